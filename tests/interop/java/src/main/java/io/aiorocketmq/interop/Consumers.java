package io.aiorocketmq.interop;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * Consumer scenarios. Each waits until it has accepted --count distinct messages (by msgId, the
 * UNIQ_KEY) and then lingers --linger-ms; with --count 0 it consumes until --timeout-ms and
 * succeeds. Every delivery is one {@code received} event (with {@code consumeResult} for the push
 * listeners), so redeliveries show up as repeated msgIds with growing reconsumeTimes.
 *
 * <p>Options: --sub EXPR (default *), --from first|last|timestamp [--from-timestamp
 * yyyyMMddHHmmss|millis], --broadcast, --pull-batch-size. Push: --consume-threads (default 4),
 * --reconsume-pattern REGEX (keys that match are refused: RECONSUME_LATER for a concurrent
 * listener, SUSPEND_CURRENT_QUEUE_A_MOMENT for an orderly one) --reconsume-times K (refuse only
 * while reconsumeTimes &lt; K; default: always), --max-reconsume-times, --suspend-ms,
 * --expect-deliveries D (also wait for D deliveries in all, refused ones included).
 * lite-pull-assign-seek: --seek begin|end|OFFSET (default begin), --commit (commitSync at the end).
 * pull-consumer: --from-offset (default 0), --max-nums (default 32).
 */
final class Consumers {
    private Consumers() {
    }

    /** Distinct accepted messages and the wait for --count of them. */
    static final class Tracker {
        final Set<String> accepted = ConcurrentHashMap.newKeySet();
        final AtomicInteger deliveries = new AtomicInteger();
        final int target;
        /** --expect-deliveries: also wait until this many deliveries (refused ones included). */
        volatile int minDeliveries;

        Tracker(int target) {
            this.target = target;
        }

        void delivered(MessageExt m, String result, boolean accept) {
            int n = deliveries.incrementAndGet();
            Map<String, Object> e = Messages.received("received", m);
            if (result != null) {
                e.put("consumeResult", result);
            }
            Json.emit(e);
            if (accept) {
                accept(m.getMsgId());
            }
            if (minDeliveries > 0 && n >= minDeliveries) {
                synchronized (this) {
                    notifyAll();
                }
            }
        }

        void accept(String msgId) {
            if (accepted.add(msgId)) {
                synchronized (this) {
                    notifyAll();
                }
            }
        }

        synchronized boolean reached() {
            return target > 0 && accepted.size() >= target && deliveries.get() >= minDeliveries;
        }

        /** Wait for the target (or, with no target, for the deadline); false on timeout. */
        synchronized boolean await(long deadline) throws InterruptedException {
            while (!reached()) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    return target <= 0;
                }
                wait(left);
            }
            return true;
        }

        void finish(Driver.Common c) throws Exception {
            if (!await(c.deadline())) {
                throw new Driver.Timeout(accepted.size() + " of " + target + " distinct messages accepted ("
                    + deliveries.get() + " deliveries)");
            }
            if (c.lingerMs > 0) {
                Thread.sleep(c.lingerMs);
            }
        }
    }

    static Map<String, Object> push(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        String topic = o.required("topic");
        String sub = o.str("sub", "*");
        boolean orderly = "consume-orderly".equals(o.scenario);
        boolean broadcast = "consume-broadcast".equals(o.scenario) || o.flag("broadcast");
        String pattern = o.str("reconsume-pattern", null);
        Pattern refuse = pattern == null ? null : Pattern.compile(pattern);
        int refuseTimes = o.integer("reconsume-times", Integer.MAX_VALUE);
        int threads = o.integer("consume-threads", 4);
        int maxReconsume = o.integer("max-reconsume-times", -2);
        long suspendMs = o.lng("suspend-ms", 200);
        int pullBatch = o.integer("pull-batch-size", 32);
        int expectDeliveries = o.integer("expect-deliveries", 0);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(c.group, c.rpcHook,
            new AllocateMessageQueueAveragely());
        c.configure(consumer, "consumer");
        Driver.applyFrom(o, consumer);
        o.rejectUnused();
        consumer.setMessageModel(broadcast ? MessageModel.BROADCASTING : MessageModel.CLUSTERING);
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setPullBatchSize(pullBatch);
        if (maxReconsume != -2) {
            consumer.setMaxReconsumeTimes(maxReconsume);
        }
        consumer.subscribe(topic, sub);
        Tracker t = new Tracker(c.count);
        t.minDeliveries = expectDeliveries;
        if (orderly) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                ctx.setSuspendCurrentQueueTimeMillis(suspendMs);
                boolean refused = false;
                for (MessageExt m : msgs) {
                    refused |= refuse != null && m.getKeys() != null && refuse.matcher(m.getKeys()).matches()
                        && m.getReconsumeTimes() < refuseTimes;
                }
                ConsumeOrderlyStatus s = refused ? ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT : ConsumeOrderlyStatus.SUCCESS;
                for (MessageExt m : msgs) {
                    t.delivered(m, s.name(), !refused);
                }
                return s;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                boolean refused = false;
                for (MessageExt m : msgs) {
                    refused |= refuse != null && m.getKeys() != null && refuse.matcher(m.getKeys()).matches()
                        && m.getReconsumeTimes() < refuseTimes;
                }
                ConsumeConcurrentlyStatus s = refused ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                for (MessageExt m : msgs) {
                    t.delivered(m, s.name(), !refused);
                }
                return s;
            });
        }
        consumer.start();
        Json.emit(Driver.started("consumer", consumer.buildMQClientId()));
        try {
            t.finish(c);
        } finally {
            consumer.shutdown();
        }
        return c.done(o.scenario, "received", t.deliveries.get(), "distinct", t.accepted.size());
    }

    static Map<String, Object> litePull(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        String topic = o.required("topic");
        boolean assign = "lite-pull-assign-seek".equals(o.scenario);
        String sub = assign ? "*" : o.str("sub", "*");
        boolean broadcast = o.flag("broadcast");
        String seek = assign ? o.str("seek", "begin") : null;
        boolean commit = assign ? o.flag("commit") : true;
        int pullBatch = o.integer("pull-batch-size", 32);

        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(c.group, c.rpcHook);
        c.configure(consumer, "litepull");
        Driver.applyFrom(o, consumer);
        o.rejectUnused();
        consumer.setMessageModel(broadcast ? MessageModel.BROADCASTING : MessageModel.CLUSTERING);
        consumer.setPullBatchSize(pullBatch);
        consumer.setPullThreadNums(2);
        consumer.setAutoCommit(!assign);
        consumer.setPollTimeoutMillis(1000);
        if (!assign) {
            consumer.subscribe(topic, sub);
        }
        consumer.start();
        Json.emit(Driver.started("consumer", consumer.buildMQClientId()));
        Tracker t = new Tracker(c.count);
        try {
            if (assign) {
                Collection<MessageQueue> mqs = consumer.fetchMessageQueues(topic);
                consumer.assign(mqs);
                for (MessageQueue mq : mqs) {
                    if ("begin".equals(seek)) {
                        consumer.seekToBegin(mq);
                    } else if ("end".equals(seek)) {
                        consumer.seekToEnd(mq);
                    } else {
                        consumer.seek(mq, Long.parseLong(seek));
                    }
                }
                Json.emit(Json.obj("event", "assigned", "queues", queues(mqs), "seek", seek));
            }
            while (!t.reached() && System.currentTimeMillis() < c.deadline()) {
                for (MessageExt m : consumer.poll(Math.max(1, Math.min(1000, c.deadline() - System.currentTimeMillis())))) {
                    t.delivered(m, null, true);
                }
            }
            long lingerEnd = System.currentTimeMillis() + c.lingerMs;
            while (t.reached() && System.currentTimeMillis() < lingerEnd) {
                for (MessageExt m : consumer.poll(Math.max(1, lingerEnd - System.currentTimeMillis()))) {
                    t.delivered(m, null, true);
                }
            }
            if (commit) {
                consumer.commitSync();
            }
            if (c.count > 0 && !t.reached()) {
                throw new Driver.Timeout(t.accepted.size() + " of " + c.count + " distinct messages polled");
            }
        } finally {
            consumer.shutdown();
        }
        return c.done(o.scenario, "received", t.deliveries.get(), "distinct", t.accepted.size());
    }

    private static List<Map<String, Object>> queues(Collection<MessageQueue> mqs) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (MessageQueue mq : mqs) {
            out.add(Json.obj("topic", mq.getTopic(), "brokerName", mq.getBrokerName(), "queueId", mq.getQueueId()));
        }
        return out;
    }

    static Map<String, Object> pull(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        String topic = o.required("topic");
        String sub = o.str("sub", "*");
        long fromOffset = o.lng("from-offset", 0);
        int maxNums = o.integer("max-nums", 32);
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(c.group);
        c.configure(consumer, "pull");
        o.rejectUnused();
        consumer.start();
        Json.emit(Driver.started("consumer", consumer.buildMQClientId()));
        Tracker t = new Tracker(c.count);
        int pulls = 0;
        try {
            List<MessageQueue> mqs = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
            mqs.sort(MessageQueue::compareTo);
            Json.emit(Json.obj("event", "assigned", "queues", queues(mqs)));
            Map<MessageQueue, Long> next = new HashMap<>();
            Map<MessageQueue, PullStatus> last = new HashMap<>();
            for (MessageQueue mq : mqs) {
                next.put(mq, fromOffset);
            }
            while (!t.reached() && System.currentTimeMillis() < c.deadline()) {
                boolean found = false;
                for (MessageQueue mq : mqs) {
                    PullResult r = consumer.pull(mq, sub, next.get(mq), maxNums);
                    pulls++;
                    List<MessageExt> got = r.getMsgFoundList() == null ? new ArrayList<>() : r.getMsgFoundList();
                    if (r.getPullStatus() != PullStatus.NO_NEW_MSG || last.get(mq) != PullStatus.NO_NEW_MSG) {
                        Json.emit(Json.obj("event", "pull", "brokerName", mq.getBrokerName(), "queueId", mq.getQueueId(),
                            "offset", next.get(mq), "status", r.getPullStatus().name(), "found", got.size(),
                            "nextBeginOffset", r.getNextBeginOffset(), "minOffset", r.getMinOffset(),
                            "maxOffset", r.getMaxOffset()));
                    }
                    last.put(mq, r.getPullStatus());
                    for (MessageExt m : got) {
                        t.delivered(m, null, true);
                    }
                    found |= !got.isEmpty();
                    next.put(mq, r.getNextBeginOffset());
                }
                if (!found) {
                    if (c.count <= 0) {
                        break;  // every queue drained: done
                    }
                    Thread.sleep(200);
                }
            }
            if (c.count > 0 && !t.reached()) {
                throw new Driver.Timeout(t.accepted.size() + " of " + c.count + " distinct messages pulled");
            }
        } finally {
            consumer.shutdown();
        }
        return c.done(o.scenario, "received", t.deliveries.get(), "distinct", t.accepted.size(), "pulls", pulls);
    }
}
