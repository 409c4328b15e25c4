package io.aiorocketmq.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Producer scenarios. Options: --count N --start I (message indexes I..I+N-1, see {@link Messages}),
 * --send-timeout-ms, --retry-times, and per scenario:
 * produce-batch --batch-size B (default N); produce-orderly --order-keys K (message i gets user
 * property orderKey=order-(i%K), queue = floorMod(orderKey.hashCode(), queues));
 * produce-delay --delay-level L (default 1); transaction --tx-states (cycled by index, default
 * COMMIT_MESSAGE,ROLLBACK_MESSAGE,UNKNOW) --check-result (answer to check-backs, default
 * COMMIT_MESSAGE) --no-wait-checks (do not wait until every UNKNOW message has been checked).
 */
final class Producers {
    private Producers() {
    }

    static final MessageQueueSelector BY_ORDER_KEY =
        (mqs, msg, arg) -> mqs.get(Math.floorMod(arg.hashCode(), mqs.size()));

    private static DefaultMQProducer producer(Driver.Common c, Options o, DefaultMQProducer p) {
        c.configure(p, "producer");
        p.setSendMsgTimeout(o.integer("send-timeout-ms", 3000));
        p.setRetryTimesWhenSendFailed(o.integer("retry-times", 2));
        p.setRetryTimesWhenSendAsyncFailed(o.integer("retry-times", 2));
        return p;
    }

    static Map<String, Object> run(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        Messages msgs = new Messages(o, "produce-delay".equals(o.scenario) ? 1 : 0);
        int batchSize = o.integer("batch-size", Math.max(1, c.count));
        int orderKeys = o.integer("order-keys", 4);
        DefaultMQProducer p = producer(c, o, new DefaultMQProducer(c.group, c.rpcHook));
        o.rejectUnused();
        p.start();
        Json.emit(Driver.started("producer", p.buildMQClientId()));
        int sent = 0;
        int notOk = 0;
        try {
            switch (o.scenario) {
                case "produce-sync":
                case "produce-delay":
                    for (int i = c.start; i < c.start + c.count; i++) {
                        Message m = msgs.build(i);
                        SendResult r = p.send(m);
                        notOk += r.getSendStatus() == SendStatus.SEND_OK ? 0 : 1;
                        Json.emit(Messages.sent(i, m, r));
                        sent++;
                    }
                    break;
                case "produce-oneway":
                    for (int i = c.start; i < c.start + c.count; i++) {
                        Message m = msgs.build(i);
                        p.sendOneway(m);
                        Json.emit(Messages.sent(i, m, null));
                        sent++;
                    }
                    break;
                case "produce-orderly":
                    for (int i = c.start; i < c.start + c.count; i++) {
                        Message m = msgs.build(i);
                        String orderKey = "order-" + (i % orderKeys);
                        m.putUserProperty("orderKey", orderKey);
                        SendResult r = p.send(m, BY_ORDER_KEY, orderKey);
                        notOk += r.getSendStatus() == SendStatus.SEND_OK ? 0 : 1;
                        Map<String, Object> e = Messages.sent(i, m, r);
                        e.put("orderKey", orderKey);
                        Json.emit(e);
                        sent++;
                    }
                    break;
                case "produce-batch":
                    for (int first = c.start; first < c.start + c.count; first += batchSize) {
                        int last = Math.min(first + batchSize, c.start + c.count);
                        List<Message> batch = new ArrayList<>();
                        for (int i = first; i < last; i++) {
                            batch.add(msgs.build(i));
                        }
                        SendResult r = p.send(batch);
                        notOk += r.getSendStatus() == SendStatus.SEND_OK ? 0 : 1;
                        String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                        String[] offsetIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                        for (int j = 0; j < batch.size(); j++) {
                            Map<String, Object> e = Messages.sent(first + j, batch.get(j), r);
                            e.put("msgId", j < ids.length ? ids[j] : null);
                            e.put("offsetMsgId", j < offsetIds.length ? offsetIds[j] : null);
                            e.put("queueOffset", r.getQueueOffset() + j);
                            e.put("batchMsgId", r.getMsgId());
                            Json.emit(e);
                            sent++;
                        }
                    }
                    break;
                case "produce-async":
                    sent = sendAsync(c, msgs, p);
                    break;
                default:
                    throw new IllegalArgumentException(o.scenario);
            }
            if (c.lingerMs > 0) {
                Thread.sleep(c.lingerMs);
            }
        } finally {
            p.shutdown();
        }
        return c.done(o.scenario, "sent", sent, "notOk", notOk);
    }

    private static int sendAsync(Driver.Common c, Messages msgs, DefaultMQProducer p) throws Exception {
        CountDownLatch latch = new CountDownLatch(c.count);
        AtomicInteger failed = new AtomicInteger();
        for (int i = c.start; i < c.start + c.count; i++) {
            final int index = i;
            final Message m = msgs.build(i);
            p.send(m, new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    Json.emit(Messages.sent(index, m, r));
                    latch.countDown();
                }

                @Override
                public void onException(Throwable t) {
                    Map<String, Object> e = Driver.error(t);
                    e.put("event", "send-error");
                    e.put("index", index);
                    e.put("key", m.getKeys());
                    Json.emit(e);
                    failed.incrementAndGet();
                    latch.countDown();
                }
            });
        }
        long left = c.deadline() - System.currentTimeMillis();
        if (!latch.await(Math.max(left, 0), TimeUnit.MILLISECONDS)) {
            throw new Driver.Timeout((c.count - latch.getCount()) + " of " + c.count + " async sends completed");
        }
        if (failed.get() > 0) {
            throw new IllegalStateException(failed.get() + " of " + c.count + " async sends failed (see send-error events)");
        }
        return c.count;
    }

    static Map<String, Object> transaction(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        Messages msgs = new Messages(o, 0);
        List<LocalTransactionState> states = new ArrayList<>();
        for (String s : o.list("tx-states", "COMMIT_MESSAGE,ROLLBACK_MESSAGE,UNKNOW")) {
            states.add(LocalTransactionState.valueOf(s));
        }
        LocalTransactionState checkResult = LocalTransactionState.valueOf(o.str("check-result", "COMMIT_MESSAGE"));
        boolean waitChecks = !o.flag("no-wait-checks");
        TransactionMQProducer p = (TransactionMQProducer) producer(c, o, new TransactionMQProducer(c.group));
        o.rejectUnused();

        Set<String> unknownKeys = ConcurrentHashMap.newKeySet();
        Set<String> checkedKeys = ConcurrentHashMap.newKeySet();
        AtomicInteger checks = new AtomicInteger();
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int i = Integer.parseInt(msg.getUserProperty("idx"));
                LocalTransactionState s = states.get(Math.floorMod(i, states.size()));
                if (s == LocalTransactionState.UNKNOW) {
                    unknownKeys.add(msg.getKeys());
                }
                return s;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Map<String, Object> e = Messages.received("check", msg);
                e.put("transactionId", msg.getTransactionId());
                e.put("result", checkResult.name());
                Json.emit(e);
                checks.incrementAndGet();
                synchronized (checkedKeys) {
                    checkedKeys.add(msg.getKeys());
                    checkedKeys.notifyAll();
                }
                return checkResult;
            }
        });
        p.start();
        Json.emit(Driver.started("producer", p.buildMQClientId()));
        int sent = 0;
        try {
            for (int i = c.start; i < c.start + c.count; i++) {
                Message m = msgs.build(i);
                TransactionSendResult r = p.sendMessageInTransaction(m, null);
                Map<String, Object> e = Messages.sent(i, m, r);
                e.put("localState", r.getLocalTransactionState().name());
                Json.emit(e);
                sent++;
            }
            if (waitChecks) {
                synchronized (checkedKeys) {
                    while (!checkedKeys.containsAll(unknownKeys)) {
                        long left = c.deadline() - System.currentTimeMillis();
                        if (left <= 0) {
                            Set<String> missing = new java.util.TreeSet<>(unknownKeys);
                            missing.removeAll(checkedKeys);
                            throw new Driver.Timeout("no check-back for UNKNOW transaction(s) " + missing);
                        }
                        checkedKeys.wait(left);
                    }
                }
            }
            if (c.lingerMs > 0) {
                Thread.sleep(c.lingerMs);
            }
        } finally {
            p.shutdown();
        }
        return c.done(o.scenario, "sent", sent, "checks", checks.get(), "unknown", unknownKeys.size());
    }
}
