package io.aiorocketmq.interop;

import java.io.File;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * produce-paced: synchronous sends one after another, --interval-ms apart, that go on after a
 * failed send (the fault tests count failures instead of stopping at the first). It stops after
 * --count sends, at --timeout-ms, or as soon as the file --stop-file exists.
 *
 * <p>Options: --send-timeout-ms (default 3000), --retry-times (default 2), --latency-fault
 * (setSendLatencyFaultEnable(true)). Each send is one {@code sent} event (as produce-sync's, plus
 * {@code ms}: how long send() took, and {@code at}: ms since the driver began) or one
 * {@code send-error} event (index, key, ms, at, the exception).
 */
final class Paced {
    private Paced() {
    }

    static Map<String, Object> run(Options o) throws Exception {
        Driver.Common c = new Driver.Common(o);
        Messages msgs = new Messages(o, 0);
        long intervalMs = o.lng("interval-ms", 50);
        String stopFile = o.str("stop-file", null);
        DefaultMQProducer p = new DefaultMQProducer(c.group, c.rpcHook);
        c.configure(p, "producer");
        p.setSendMsgTimeout(o.integer("send-timeout-ms", 3000));
        p.setRetryTimesWhenSendFailed(o.integer("retry-times", 2));
        p.setSendLatencyFaultEnable(o.flag("latency-fault"));
        o.rejectUnused();
        p.start();
        Json.emit(Driver.started("producer", p.buildMQClientId()));
        int sent = 0;
        int failed = 0;
        try {
            for (int i = c.start; i < c.start + c.count; i++) {
                if (System.currentTimeMillis() > c.deadline() || (stopFile != null && new File(stopFile).exists())) {
                    break;
                }
                Message m = msgs.build(i);
                long began = System.currentTimeMillis();
                try {
                    SendResult r = p.send(m);
                    Map<String, Object> e = Messages.sent(i, m, r);
                    e.put("ms", System.currentTimeMillis() - began);
                    e.put("at", began - c.begin);
                    Json.emit(e);
                    sent++;
                } catch (Exception ex) {
                    Map<String, Object> e = Driver.error(ex);
                    e.remove("stack");
                    e.put("event", "send-error");
                    e.put("index", i);
                    e.put("key", m.getKeys());
                    e.put("ms", System.currentTimeMillis() - began);
                    e.put("at", began - c.begin);
                    Json.emit(e);
                    failed++;
                }
                Thread.sleep(intervalMs);
            }
        } finally {
            p.shutdown();
        }
        return c.done(o.scenario, "sent", sent, "failed", failed);
    }
}
