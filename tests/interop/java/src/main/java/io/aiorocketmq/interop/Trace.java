package io.aiorocketmq.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code trace-roundtrip}: a stock producer and a stock push consumer, both with
 * {@code enableMsgTrace} (trace topic --trace-topic, default RMQ_SYS_TRACE_TOPIC): the producer
 * sends --count messages to --topic (tag TagT, key {@code trace-key-i}), the consumer (group
 * {@code <group>-consumer}, from the first offset) consumes them, then both linger --linger-ms
 * (default 2000, so the trace dispatchers send their batches) and shut down.
 *
 * <p>Events: {@code sent} {index, msgId, offsetMsgId} per message, {@code received} {msgId} per
 * delivery, then {@code done} with {@code msgIds}.
 */
final class Trace {
    private Trace() {
    }

    static Map<String, Object> run(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        String topic = o.required("topic");
        String traceTopic = o.str("trace-topic", null);
        long linger = o.lng("linger-ms", 2000);
        o.rejectUnused();

        DefaultMQProducer producer = new DefaultMQProducer(c.group + "-producer", c.rpcHook, true, traceTopic);
        c.configure(producer, "trace-producer");
        producer.start();
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < c.count; i++) {
            Message m = new Message(topic, "TagT", "trace-key-" + i, ("trace-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.send(m);
            ids.add(r.getMsgId());
            Json.emit(Json.obj("event", "sent", "index", i, "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId()));
        }

        Set<String> pending = ConcurrentHashMap.newKeySet();
        pending.addAll(ids);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(c.group + "-consumer", c.rpcHook,
            new AllocateMessageQueueAveragely(), true, traceTopic);
        c.configure(consumer, "trace-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Json.emit(Json.obj("event", "received", "msgId", m.getMsgId()));
                pending.remove(m.getMsgId());
            }
            synchronized (pending) {
                pending.notifyAll();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        synchronized (pending) {
            while (!pending.isEmpty() && System.currentTimeMillis() < c.deadline()) {
                pending.wait(Math.max(1, c.deadline() - System.currentTimeMillis()));
            }
        }
        if (!pending.isEmpty()) {
            throw new Driver.Timeout(pending.size() + " of " + ids.size() + " messages not consumed");
        }
        Thread.sleep(linger);
        consumer.shutdown();
        producer.shutdown();
        return c.done(o.scenario, "msgIds", ids);
    }
}
