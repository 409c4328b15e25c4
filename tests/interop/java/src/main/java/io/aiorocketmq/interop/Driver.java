package io.aiorocketmq.interop;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.exception.RemotingException;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Runs one named scenario with the stock RocketMQ 4.9.7 client classes and reports on stdout as
 * JSON lines (see tests/interop/stock.py for the Python side):
 *
 * <pre>
 * java -cp target/classes:$(cat target/classpath.txt) io.aiorocketmq.interop.Driver SCENARIO \
 *     --namesrv 127.0.0.1:PORT --topic T [--group G] [--count N] [--timeout-ms MS] ...
 * </pre>
 *
 * <p>Events: {@code sent}, {@code send-error}, {@code received}, {@code pull}, {@code check},
 * {@code replied}, {@code reply}, {@code started}, then exactly one of {@code done} (exit 0) or
 * {@code error} (exit 1 on an exception, 2 on bad usage, 3 when the expected messages did not
 * arrive before --timeout-ms, 4 when the watchdog had to halt a JVM that would not stop).
 */
public final class Driver {
    static final int EXIT_ERROR = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_TIMEOUT = 3;
    static final int EXIT_WATCHDOG = 4;

    /** Thrown by a scenario that ran but did not see what it waited for. */
    static final class Timeout extends Exception {
        Timeout(String message) {
            super(message);
        }
    }

    /** The options every scenario shares. */
    static final class Common {
        final String namesrv;
        final String group;
        final String instance;
        final int count;
        final int start;
        final long timeoutMs;
        final long lingerMs;
        final int pollNamesrvMs;
        final int heartbeatMs;
        final int persistOffsetMs;
        /** --access-key / --secret-key: ACL signing with the stock AclClientRPCHook, else null. */
        final RPCHook rpcHook;
        final long begin = System.currentTimeMillis();

        Common(Options o) {
            namesrv = o.required("namesrv");
            group = o.str("group", "DriverGroup-" + o.scenario);
            String pid = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];
            instance = o.str("instance", "driver-" + pid + "-" + System.nanoTime());
            count = o.integer("count", 10);
            start = o.integer("start", 0);
            timeoutMs = o.lng("timeout-ms", 30000);
            lingerMs = o.lng("linger-ms", 0);
            pollNamesrvMs = o.integer("poll-namesrv-ms", 1000);
            heartbeatMs = o.integer("heartbeat-ms", 5000);
            persistOffsetMs = o.integer("persist-offset-ms", 5000);
            String accessKey = o.str("access-key", null);
            String secretKey = o.str("secret-key", null);
            rpcHook = accessKey == null ? null
                : new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
        }

        long deadline() {
            return begin + timeoutMs;
        }

        /** Settings every client gets: explicit nameserver, loopback, no VIP channel, quick route pickup. */
        void configure(ClientConfig c, String role) {
            c.setNamesrvAddr(namesrv);
            c.setInstanceName(instance + "-" + role);
            c.setClientIP("127.0.0.1");
            c.setVipChannelEnabled(false);
            c.setPollNameServerInterval(pollNamesrvMs);
            c.setHeartbeatBrokerInterval(heartbeatMs);
            c.setPersistConsumerOffsetInterval(persistOffsetMs);
        }

        Map<String, Object> done(String scenario, Object... kv) {
            Map<String, Object> e = Json.obj("event", "done", "scenario", scenario);
            e.putAll(Json.obj(kv));
            e.put("elapsedMs", System.currentTimeMillis() - begin);
            return e;
        }
    }

    static ConsumeFromWhere fromWhere(Options o) {
        String from = o.str("from", "first");
        switch (from) {
            case "first":
                return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
            case "last":
                return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;
            case "timestamp":
                return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP;
            default:
                throw new IllegalArgumentException("--from first|last|timestamp, got " + from);
        }
    }

    static void applyFrom(Options o, DefaultMQPushConsumer c) {
        c.setConsumeFromWhere(fromWhere(o));
        String ts = o.str("from-timestamp", null);
        if (ts != null) {
            c.setConsumeTimestamp(ts.length() == 14 ? ts : UtilAll.timeMillisToHumanString3(Long.parseLong(ts)));
        }
    }

    static void applyFrom(Options o, DefaultLitePullConsumer c) {
        c.setConsumeFromWhere(fromWhere(o));
        String ts = o.str("from-timestamp", null);
        if (ts != null) {
            c.setConsumeTimestamp(ts.length() == 14 ? ts : UtilAll.timeMillisToHumanString3(Long.parseLong(ts)));
        }
    }

    /** The {@code started} event: a client is up (JVM start + client start took startupMs). */
    static Map<String, Object> started(String role, String clientId) {
        return Json.obj("event", "started", "role", role, "clientId", clientId,
            "serializeType", RemotingCommand.getSerializeTypeConfigInThisServer().name(),
            "startupMs", System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime());
    }

    static Map<String, Object> error(Throwable t) {
        Map<String, Object> e = Json.obj("event", "error", "error", t.getClass().getName() + ": " + t.getMessage());
        if (t instanceof MQClientException) {
            e.put("responseCode", ((MQClientException) t).getResponseCode());
            e.put("errorMessage", ((MQClientException) t).getErrorMessage());
        } else if (t instanceof MQBrokerException) {
            e.put("responseCode", ((MQBrokerException) t).getResponseCode());
            e.put("errorMessage", ((MQBrokerException) t).getErrorMessage());
            e.put("brokerAddr", ((MQBrokerException) t).getBrokerAddr());
        } else if (t instanceof RemotingException) {
            e.put("remoting", true);
        }
        List<String> causes = new ArrayList<>();
        for (Throwable c = t.getCause(); c != null && causes.size() < 8; c = c.getCause()) {
            causes.add(c.getClass().getName() + ": " + c.getMessage());
        }
        e.put("causes", causes);
        StringWriter sw = new StringWriter();
        t.printStackTrace(new PrintWriter(sw));
        String stack = sw.toString();
        e.put("stack", stack.length() > 4000 ? stack.substring(0, 4000) : stack);
        return e;
    }

    private static Map<String, Object> run(Options o) throws Exception {
        switch (o.scenario) {
            case "produce-sync":
            case "produce-async":
            case "produce-oneway":
            case "produce-batch":
            case "produce-orderly":
            case "produce-delay":
                return Producers.run(o);
            case "produce-paced":
                return Paced.run(o);
            case "consume-push":
            case "consume-orderly":
            case "consume-broadcast":
                return Consumers.push(o);
            case "lite-pull-subscribe":
            case "lite-pull-assign-seek":
                return Consumers.litePull(o);
            case "pull-consumer":
                return Consumers.pull(o);
            case "transaction":
                return Producers.transaction(o);
            case "request-reply":
                return RequestReply.run(o);
            case "sql92-consume":
                return Sql92.run(o);
            case "trace-roundtrip":
                return Trace.run(o);
            default:
                throw new IllegalArgumentException("unknown scenario " + o.scenario + "; known: produce-sync, "
                    + "produce-async, produce-oneway, produce-batch, produce-orderly, produce-delay, produce-paced, consume-push, "
                    + "consume-orderly, consume-broadcast, lite-pull-subscribe, lite-pull-assign-seek, "
                    + "pull-consumer, transaction, request-reply, sql92-consume, trace-roundtrip");
        }
    }

    private static void startWatchdog(long afterMs) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(afterMs);
            } catch (InterruptedException e) {
                return;
            }
            Json.emit(Json.obj("event", "error", "error", "watchdog: the driver did not finish in " + afterMs + " ms"));
            Runtime.getRuntime().halt(EXIT_WATCHDOG);
        }, "driver-watchdog");
        t.setDaemon(true);
        t.start();
    }

    public static void main(String[] args) {
        Json.claimStdout();
        int code = 0;
        try {
            Options o = new Options(args);
            long timeout = Long.parseLong(argValue(args, "--timeout-ms", "30000"));
            startWatchdog(timeout + 60000);
            Json.emit(run(o));
        } catch (IllegalArgumentException e) {
            Json.emit(error(e));
            code = EXIT_USAGE;
        } catch (Timeout e) {
            Map<String, Object> err = Json.obj("event", "error", "error", "timeout: " + e.getMessage(), "timeout", true);
            Json.emit(err);
            code = EXIT_TIMEOUT;
        } catch (Throwable t) {
            Json.emit(error(t));
            code = EXIT_ERROR;
        }
        System.exit(code);
    }

    private static String argValue(String[] args, String name, String dflt) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        return dflt;
    }

    private Driver() {
    }
}
