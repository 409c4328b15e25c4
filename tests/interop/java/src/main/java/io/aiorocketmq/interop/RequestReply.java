package io.aiorocketmq.interop;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * request-reply: --role both (default; replier and requester in this JVM, as separate client
 * instances), requester or replier. The replier consumes --topic in --group and answers each
 * request with body "reply:" + request body through MessageUtil.createReplyMessage; the
 * requester sends --count requests (messages as in {@link Messages}) with
 * DefaultMQProducer.request(msg, --request-timeout-ms) one after another and prints each answer
 * as a {@code reply} event (the shape of {@code received}, plus {@code requestIndex}).
 */
final class RequestReply {
    private RequestReply() {
    }

    static final byte[] PREFIX = "reply:".getBytes(StandardCharsets.UTF_8);

    static Map<String, Object> run(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        Messages msgs = new Messages(o, 0);
        String role = o.str("role", "both");
        long requestTimeout = o.lng("request-timeout-ms", 10000);
        o.rejectUnused();
        boolean replier = "both".equals(role) || "replier".equals(role);
        boolean requester = "both".equals(role) || "requester".equals(role);
        if (!replier && !requester) {
            throw new IllegalArgumentException("--role both|requester|replier, got " + role);
        }

        DefaultMQPushConsumer consumer = null;
        DefaultMQProducer replyProducer = null;
        DefaultMQProducer requestProducer = null;
        Consumers.Tracker replied = new Consumers.Tracker(requester ? 0 : c.count);
        Set<String> answered = ConcurrentHashMap.newKeySet();
        int replies = 0;
        try {
            if (replier) {
                replyProducer = new DefaultMQProducer(c.group + "-replier");
                c.configure(replyProducer, "reply-producer");
                replyProducer.start();
                final DefaultMQProducer rp = replyProducer;
                consumer = new DefaultMQPushConsumer(c.group);
                c.configure(consumer, "replier");
                consumer.setConsumeThreadMin(2);
                consumer.setConsumeThreadMax(2);
                consumer.subscribe(msgs.topic, "*");
                consumer.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                consumer.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
                    for (MessageExt m : list) {
                        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
                        byte[] answer = new byte[PREFIX.length + body.length];
                        System.arraycopy(PREFIX, 0, answer, 0, PREFIX.length);
                        System.arraycopy(body, 0, answer, PREFIX.length, body.length);
                        try {
                            Message reply = MessageUtil.createReplyMessage(m, answer);
                            SendResult r = rp.send(reply, 3000);
                            Map<String, Object> e = Messages.received("replied", m);
                            e.put("replyTopic", reply.getTopic());
                            e.put("replyStatus", r.getSendStatus().name());
                            e.put("correlationId", m.getProperty(MessageConst.PROPERTY_CORRELATION_ID));
                            Json.emit(e);
                            answered.add(m.getMsgId());
                            replied.accept(m.getMsgId());
                        } catch (Exception ex) {
                            Map<String, Object> e = Driver.error(ex);
                            e.put("event", "reply-error");
                            e.put("key", m.getKeys());
                            Json.emit(e);
                            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                        }
                    }
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                consumer.start();
                Json.emit(Driver.started("replier", consumer.buildMQClientId()));
            }
            if (requester) {
                requestProducer = new DefaultMQProducer(c.group + "-requester");
                c.configure(requestProducer, "requester");
                requestProducer.start();
                Json.emit(Driver.started("requester", requestProducer.buildMQClientId()));
                for (int i = c.start; i < c.start + c.count; i++) {
                    Message m = msgs.build(i);
                    Message reply = requestProducer.request(m, requestTimeout);
                    Map<String, Object> e;
                    if (reply instanceof MessageExt) {
                        e = Messages.received("reply", (MessageExt) reply);
                    } else {
                        e = Json.obj("event", "reply", "topic", reply.getTopic(),
                            "body", java.util.Base64.getEncoder().encodeToString(reply.getBody()),
                            "properties", new java.util.TreeMap<>(reply.getProperties()));
                    }
                    e.put("requestIndex", i);
                    e.put("requestKey", m.getKeys());
                    Json.emit(e);
                    replies++;
                }
            } else {
                replied.finish(c);
            }
        } finally {
            if (requestProducer != null) {
                requestProducer.shutdown();
            }
            if (consumer != null) {
                consumer.shutdown();
            }
            if (replyProducer != null) {
                replyProducer.shutdown();
            }
        }
        return c.done(o.scenario, "replies", replies, "answered", answered.size());
    }
}
