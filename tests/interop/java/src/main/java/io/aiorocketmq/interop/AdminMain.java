package io.aiorocketmq.interop;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * The stock mqadmin ({@code MQAdminStartup.main0}, unchanged) followed by System.exit(0), so the
 * JVM does not sit ~3 s in Netty's graceful event-loop shutdown after the command has finished.
 * The exit code is stock mqadmin's: 0 even when the command printed an exception.
 */
public final class AdminMain {
    private AdminMain() {
    }

    public static void main(String[] args) {
        MQAdminStartup.main0(args, null);
        System.out.flush();
        System.err.flush();
        System.exit(0);
    }
}
