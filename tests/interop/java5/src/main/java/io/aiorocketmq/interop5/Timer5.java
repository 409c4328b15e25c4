package io.aiorocketmq.interop5;

import com.alibaba.fastjson2.JSON;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Timer messages sent with the stock RocketMQ 5.3.3 remoting client (tests/interop/stock5.py runs
 * it; tests/interop/test_stock_timer.py checks what arrives):
 *
 * <pre>
 * Timer5 --namesrv 127.0.0.1:PORT --topic T --way sec|ms|at --value V [--count N] [--group G]
 *        [--retry-times R] [--send-timeout-ms MS]
 * </pre>
 *
 * <p>Message i: tag {@code TagT}, key {@code k5-i}, body {@code t5-i}, user property {@code idx=i},
 * sent to queue {@code i % queues} with {@code setDelayTimeSec(V)}, {@code setDelayTimeMs(V)} or
 * {@code setDeliverTimeMs(V)}. One JSON object per line on stdout: {@code sent} per message
 * (with the SendResult, born time and recall handle), then {@code done} (exit 0), or {@code
 * error} with the response code and remark of a refused send (exit 1).
 */
public final class Timer5 {
    private static PrintStream out = System.out;

    private Timer5() {
    }

    private static void emit(Map<String, Object> event) {
        synchronized (Timer5.class) {
            out.println(JSON.toJSONString(event));
            out.flush();
        }
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            o.put(args[i].substring(2), args[i + 1]);
        }
        return o;
    }

    public static void main(String[] args) {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        int code = 0;
        DefaultMQProducer p = null;
        try {
            Map<String, String> o = options(args);
            String topic = o.get("topic");
            String way = o.get("way");
            long value = Long.parseLong(o.get("value"));
            int count = Integer.parseInt(o.getOrDefault("count", "4"));
            p = new DefaultMQProducer(o.getOrDefault("group", "PG-timer5"));
            p.setNamesrvAddr(o.get("namesrv"));
            p.setInstanceName("timer5-" + System.nanoTime());
            p.setClientIP("127.0.0.1");
            p.setVipChannelEnabled(false);
            p.setSendMsgTimeout(Integer.parseInt(o.getOrDefault("send-timeout-ms", "5000")));
            p.setRetryTimesWhenSendFailed(Integer.parseInt(o.getOrDefault("retry-times", "0")));
            p.start();
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, "TagT", "k5-" + i, ("t5-" + i).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("idx", Integer.toString(i));
                switch (way) {
                    case "sec":
                        m.setDelayTimeSec(value);
                        break;
                    case "ms":
                        m.setDelayTimeMs(value);
                        break;
                    case "at":
                        m.setDeliverTimeMs(value);
                        break;
                    default:
                        throw new IllegalArgumentException("--way sec|ms|at, got " + way);
                }
                long born = System.currentTimeMillis();
                SendResult r = p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), i);
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("event", "sent");
                e.put("index", i);
                e.put("sentAt", born);
                e.put("status", r.getSendStatus().name());
                e.put("msgId", r.getMsgId());
                e.put("offsetMsgId", r.getOffsetMsgId());
                e.put("queueId", r.getMessageQueue().getQueueId());
                e.put("queueOffset", r.getQueueOffset());
                e.put("recallHandle", r.getRecallHandle());
                e.put("properties", new LinkedHashMap<>(m.getProperties()));
                emit(e);
            }
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("event", "done");
            done.put("count", count);
            emit(done);
        } catch (Throwable t) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("event", "error");
            e.put("error", t.getClass().getName() + ": " + t.getMessage());
            Throwable broker = t;
            while (broker != null && !(broker instanceof MQBrokerException)) {
                broker = broker.getCause();
            }
            if (broker != null) {
                e.put("responseCode", ((MQBrokerException) broker).getResponseCode());
                e.put("errorMessage", ((MQBrokerException) broker).getErrorMessage());
            } else if (t instanceof MQClientException) {
                e.put("responseCode", ((MQClientException) t).getResponseCode());
                e.put("errorMessage", ((MQClientException) t).getErrorMessage());
            }
            List<String> causes = new ArrayList<>();
            for (Throwable c = t.getCause(); c != null && causes.size() < 8; c = c.getCause()) {
                causes.add(c.getClass().getName() + ": " + c.getMessage());
            }
            e.put("causes", causes);
            emit(e);
            code = 1;
        } finally {
            if (p != null) {
                p.shutdown();
            }
        }
        System.exit(code);
    }
}
