package io.aiorocketmq.interop;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

/**
 * The stock 4.9.7 client side of bench/compare.py: one measured run, one JSON line on stdout.
 *
 * <pre>
 * java -cp target/classes:$(cat target/classpath.txt) io.aiorocketmq.interop.Bench MODE \
 *     --namesrv 127.0.0.1:PORT --topic T --count N [--size 128] [--inflight 16] [--group G]
 * </pre>
 *
 * <p>Modes: {@code sync} (--inflight threads each sending synchronously), {@code async}
 * (send with a callback, at most --inflight unanswered), {@code preload} (batch sends of
 * --batch messages, round robin over the write queues, not timed for the table),
 * {@code consume} (a push consumer from the first offset until --count messages arrived; the
 * clock starts at the first delivery, as mqbench's consumer). The line:
 * {@code {"mode":..,"count":n,"seconds":s,"cpu":c,"errors":e}} where {@code cpu} is this JVM's
 * CPU seconds over the measured part (com.sun.management's process CPU time). One warm-up send
 * outside the clock looks the route up.
 */
public final class Bench {
    private Bench() {
    }

    private static long cpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1;
    }

    private static DefaultMQProducer producer(String namesrv, String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(namesrv);
        p.setClientIP("127.0.0.1");
        p.setInstanceName("bench-" + System.nanoTime());
        p.setVipChannelEnabled(false);
        p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        p.setSendMsgTimeout(10000);
        p.start();
        return p;
    }

    /** The topic's write queues from the name server. The warm-up send auto-creates the topic
     * and the broker registers it with the name server; on a loaded machine that registration
     * can lag (or time out until the broker's next 30 s registration), so look again for up to
     * 60 s before giving up. */
    private static List<org.apache.rocketmq.common.message.MessageQueue> publishQueues(
            DefaultMQProducer p, String topic) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                return p.fetchPublishMessageQueues(topic);
            } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    /** Any failure ends the JVM with exit code 1: the client threads are not daemons, so a
     * main that merely threw would leave the process running (and its caller waiting). */
    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        Json.claimStdout();
        Options o = new Options(args);
        String namesrv = o.required("namesrv");
        String topic = o.required("topic");
        int count = o.integer("count", 10000);
        int size = o.integer("size", 128);
        int inflight = o.integer("inflight", 16);
        int batch = o.integer("batch", 64);
        String group = o.str("group", "bench_" + o.scenario);
        long timeoutMs = o.lng("timeout-ms", 600000);
        byte[] body = new byte[size];
        java.util.Arrays.fill(body, (byte) 'x');
        AtomicInteger errors = new AtomicInteger();
        long t0;
        long c0;
        long t1;
        long c1;
        int done = count;
        switch (o.scenario) {
            case "sync": {
                DefaultMQProducer p = producer(namesrv, group);
                p.send(new Message(topic, body));
                AtomicInteger issued = new AtomicInteger();
                List<Thread> threads = new ArrayList<>();
                t0 = System.nanoTime();
                c0 = cpuNanos();
                for (int i = 0; i < inflight; i++) {
                    Thread t = new Thread(() -> {
                        while (issued.getAndIncrement() < count) {
                            try {
                                p.send(new Message(topic, body));
                            } catch (Exception e) {
                                errors.incrementAndGet();
                            }
                        }
                    });
                    t.start();
                    threads.add(t);
                }
                for (Thread t : threads) {
                    t.join();
                }
                t1 = System.nanoTime();
                c1 = cpuNanos();
                p.shutdown();
                break;
            }
            case "async": {
                DefaultMQProducer p = producer(namesrv, group);
                p.send(new Message(topic, body));
                Semaphore permits = new Semaphore(inflight);
                CountDownLatch all = new CountDownLatch(count);
                SendCallback cb = new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        permits.release();
                        all.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        errors.incrementAndGet();
                        permits.release();
                        all.countDown();
                    }
                };
                t0 = System.nanoTime();
                c0 = cpuNanos();
                for (int i = 0; i < count; i++) {
                    permits.acquire();
                    try {
                        p.send(new Message(topic, body), cb);
                    } catch (Exception e) {
                        cb.onException(e);
                    }
                }
                all.await(timeoutMs, TimeUnit.MILLISECONDS);
                t1 = System.nanoTime();
                c1 = cpuNanos();
                p.shutdown();
                break;
            }
            case "preload": {
                DefaultMQProducer p = producer(namesrv, group);
                p.send(new Message(topic, body));
                List<org.apache.rocketmq.common.message.MessageQueue> mqs = publishQueues(p, topic);
                t0 = System.nanoTime();
                c0 = cpuNanos();
                int sent = 0;
                int q = 0;
                while (sent < count) {
                    int k = Math.min(batch, count - sent);
                    List<Message> msgs = new ArrayList<>(k);
                    for (int i = 0; i < k; i++) {
                        msgs.add(new Message(topic, body));
                    }
                    p.send(msgs, mqs.get(q++ % mqs.size()));
                    sent += k;
                }
                t1 = System.nanoTime();
                c1 = cpuNanos();
                p.shutdown();
                break;
            }
            case "consume": {
                DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
                c.setNamesrvAddr(namesrv);
                c.setClientIP("127.0.0.1");
                c.setInstanceName("bench-" + System.nanoTime());
                c.setVipChannelEnabled(false);
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                c.subscribe(topic, "*");
                AtomicInteger received = new AtomicInteger();
                AtomicLong first = new AtomicLong();
                AtomicLong firstCpu = new AtomicLong();
                CountDownLatch all = new CountDownLatch(1);
                c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    if (first.get() == 0 && first.compareAndSet(0, System.nanoTime())) {
                        firstCpu.set(cpuNanos());
                    }
                    if (received.addAndGet(msgs.size()) >= count) {
                        all.countDown();
                    }
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                c.start();
                boolean ok = all.await(timeoutMs, TimeUnit.MILLISECONDS);
                t1 = System.nanoTime();
                c1 = cpuNanos();
                t0 = first.get() == 0 ? t1 : first.get();
                c0 = firstCpu.get();
                done = received.get();
                if (!ok) {
                    errors.incrementAndGet();
                }
                c.shutdown();
                break;
            }
            default:
                throw new IllegalArgumentException("mode sync|async|preload|consume, got " + o.scenario);
        }
        Json.emit(Json.obj("mode", o.scenario, "count", done, "seconds", (t1 - t0) / 1e9,
            "cpu", (c1 - c0) / 1e9, "errors", errors.get()));
        System.exit(0);
    }
}
