package io.aiorocketmq.interop;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Deterministic test messages (the Python side, tests/interop/stock.py, rebuilds the same ones
 * to compare) and the JSON shapes of send results and received messages.
 *
 * <p>Message {@code i}: key {@code keyPrefix + i}; tag {@code tags[i % tags.size()]} (none when
 * the list is empty); user properties {@code idx=i} plus the static {@code --props}; body
 * {@code "body-" + key} in UTF-8 when {@code bodySize <= 0}, otherwise {@code bodySize} bytes
 * {@code (i * 31 + j) & 0xff}.
 */
final class Messages {
    final String topic;
    final String keyPrefix;
    final List<String> tags;
    final Map<String, String> props;
    final int bodySize;
    final int delayLevel;

    Messages(Options o, int defaultDelayLevel) {
        topic = o.required("topic");
        keyPrefix = o.str("key-prefix", "k-");
        tags = o.list("tags", "TagA");
        props = o.pairs("props");
        bodySize = o.integer("body-size", 0);
        delayLevel = o.integer("delay-level", defaultDelayLevel);
    }

    String key(int i) {
        return keyPrefix + i;
    }

    byte[] body(int i) {
        if (bodySize <= 0) {
            return ("body-" + key(i)).getBytes(StandardCharsets.UTF_8);
        }
        byte[] b = new byte[bodySize];
        for (int j = 0; j < bodySize; j++) {
            b[j] = (byte) ((i * 31 + j) & 0xff);
        }
        return b;
    }

    Message build(int i) {
        String tag = tags.isEmpty() ? null : tags.get(i % tags.size());
        Message m = new Message(topic, tag, key(i), body(i));
        m.putUserProperty("idx", Integer.toString(i));
        for (Map.Entry<String, String> e : props.entrySet()) {
            m.putUserProperty(e.getKey(), e.getValue());
        }
        if (delayLevel > 0) {
            m.setDelayTimeLevel(delayLevel);
        }
        return m;
    }

    static Map<String, Object> sent(int i, Message m, SendResult r) {
        Map<String, Object> e = Json.obj("event", "sent", "index", i, "key", m.getKeys(), "tags", m.getTags());
        if (r != null) {
            e.put("status", r.getSendStatus().name());
            e.put("msgId", r.getMsgId());
            e.put("offsetMsgId", r.getOffsetMsgId());
            e.put("brokerName", r.getMessageQueue().getBrokerName());
            e.put("queueId", r.getMessageQueue().getQueueId());
            e.put("queueOffset", r.getQueueOffset());
            e.put("transactionId", r.getTransactionId());
            e.put("regionId", r.getRegionId());
        } else {
            e.put("status", null);
            e.put("msgId", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
        }
        return e;
    }

    static Map<String, Object> received(String event, MessageExt m) {
        Map<String, Object> e = Json.obj("event", event);
        e.put("index", m.getUserProperty("idx") == null ? null : Integer.valueOf(m.getUserProperty("idx")));
        e.put("msgId", m.getMsgId());
        e.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        e.put("topic", m.getTopic());
        e.put("tags", m.getTags());
        e.put("keys", m.getKeys());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        e.put("body", Base64.getEncoder().encodeToString(body));
        e.put("bodyLength", body.length);
        Map<String, String> all = m.getProperties() == null ? new TreeMap<>() : new TreeMap<>(m.getProperties());
        Map<String, String> user = new TreeMap<>();
        for (Map.Entry<String, String> p : all.entrySet()) {
            if (!MessageConst.STRING_HASH_SET.contains(p.getKey())) {
                user.put(p.getKey(), p.getValue());
            }
        }
        e.put("userProperties", user);
        e.put("properties", all);
        e.put("reconsumeTimes", m.getReconsumeTimes());
        e.put("brokerName", m.getBrokerName());
        e.put("queueId", m.getQueueId());
        e.put("queueOffset", m.getQueueOffset());
        e.put("commitLogOffset", m.getCommitLogOffset());
        e.put("sysFlag", m.getSysFlag());
        e.put("bodyCRC", m.getBodyCRC());
        e.put("storeSize", m.getStoreSize());
        e.put("bornHost", m.getBornHost() == null ? null : m.getBornHostString());
        e.put("storeHost", m.getStoreHost() == null ? null : m.getStoreHost().toString());
        e.put("bornTimestamp", m.getBornTimestamp());
        e.put("storeTimestamp", m.getStoreTimestamp());
        e.put("receivedAt", System.currentTimeMillis());
        return e;
    }
}
