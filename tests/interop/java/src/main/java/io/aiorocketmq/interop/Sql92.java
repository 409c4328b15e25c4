package io.aiorocketmq.interop;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code sql92-consume}: one stock push consumer and/or one stock lite-pull consumer per SQL92
 * expression (all in one client instance, each in its own group), every one subscribed to
 * --topic from its first offset with {@code MessageSelector.bySql(expression)}.
 *
 * <p>Options: --topic, --expr-file (UTF-8, one expression per line), --kinds push,lite (default
 * both), --quiet-ms (default 4000: stop once nothing arrived for that long, and at least that
 * long after the last consumer started), --group (prefix of the groups).
 *
 * <p>Events: {@code sql92-start-error} {kind, expr, responseCode, errorMessage, error} for a
 * consumer whose start failed (CHECK_CLIENT_CONFIG refused it), then one {@code sql92-result}
 * {kind, expr, idx: the sorted distinct {@code idx} properties it received} per started consumer.
 */
final class Sql92 {
    private Sql92() {
    }

    static Map<String, Object> run(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        String topic = o.required("topic");
        List<String> exprs = Files.readAllLines(Paths.get(o.required("expr-file")), StandardCharsets.UTF_8);
        List<String> kinds = o.list("kinds", "push,lite");
        long quietMs = o.lng("quiet-ms", 4000);
        o.rejectUnused();

        Map<String, Set<Integer>> got = new ConcurrentHashMap<>();
        AtomicLong last = new AtomicLong(System.currentTimeMillis());
        List<DefaultMQPushConsumer> pushes = new ArrayList<>();
        List<DefaultLitePullConsumer> lites = new ArrayList<>();
        List<Thread> pollers = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean(false);
        int failed = 0;
        for (int i = 0; i < exprs.size(); i++) {
            final String key = "#" + i;
            String expr = exprs.get(i);
            if (kinds.contains("push")) {
                DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(c.group + "-push-" + i);
                c.configure(consumer, "sql92");
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                consumer.setConsumeThreadMin(1);
                consumer.setConsumeThreadMax(1);
                consumer.subscribe(topic, MessageSelector.bySql(expr));
                Set<Integer> seen = got.computeIfAbsent("push" + key, k -> ConcurrentHashMap.newKeySet());
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    record(seen, msgs, last);
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                try {
                    consumer.start();
                    pushes.add(consumer);
                } catch (MQClientException e) {
                    failed++;
                    got.remove("push" + key);
                    startError("push", i, e);
                    consumer.shutdown();
                }
            }
            if (kinds.contains("lite")) {
                DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(c.group + "-lite-" + i);
                c.configure(consumer, "sql92lite");
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                consumer.setPullThreadNums(1);
                consumer.subscribe(topic, MessageSelector.bySql(expr));
                Set<Integer> seen = got.computeIfAbsent("lite" + key, k -> ConcurrentHashMap.newKeySet());
                try {
                    consumer.start();
                    lites.add(consumer);
                } catch (MQClientException e) {
                    failed++;
                    got.remove("lite" + key);
                    startError("lite", i, e);
                    consumer.shutdown();
                    continue;
                }
                Thread t = new Thread(() -> {
                    while (!stop.get()) {
                        try {
                            record(seen, consumer.poll(200), last);
                        } catch (RuntimeException e) {
                            return;
                        }
                    }
                }, "sql92-poll-" + i);
                t.setDaemon(true);
                t.start();
                pollers.add(t);
            }
        }
        long started = System.currentTimeMillis();
        last.set(Math.max(last.get(), started));
        while (System.currentTimeMillis() < c.deadline()
            && (System.currentTimeMillis() - last.get() < quietMs || System.currentTimeMillis() - started < quietMs)) {
            Thread.sleep(100);
        }
        stop.set(true);
        for (Thread t : pollers) {
            t.join(2000);
        }
        for (Map.Entry<String, Set<Integer>> e : new TreeMap<>(got).entrySet()) {
            String k = e.getKey();
            Json.emit(Json.obj("event", "sql92-result", "kind", k.substring(0, 4),
                "expr", Integer.parseInt(k.substring(5)), "idx", new ArrayList<>(new TreeSet<>(e.getValue()))));
        }
        for (DefaultMQPushConsumer p : pushes) {
            p.shutdown();
        }
        for (DefaultLitePullConsumer l : lites) {
            l.shutdown();
        }
        return c.done(o.scenario, "expressions", exprs.size(), "startFailures", failed);
    }

    private static void record(Set<Integer> seen, List<MessageExt> msgs, AtomicLong last) {
        if (msgs == null || msgs.isEmpty()) {
            return;
        }
        for (MessageExt m : msgs) {
            String idx = m.getUserProperty("idx");
            if (idx != null) {
                seen.add(Integer.parseInt(idx));
            }
        }
        last.set(System.currentTimeMillis());
    }

    private static void startError(String kind, int i, MQClientException e) {
        Json.emit(Json.obj("event", "sql92-start-error", "kind", kind, "expr", i,
            "responseCode", e.getResponseCode(), "errorMessage", e.getErrorMessage(),
            "error", e.getClass().getName() + ": " + e.getMessage()));
    }
}
