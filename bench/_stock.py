"""Stock Apache RocketMQ 4.9.7 nameserver and broker as subprocesses: the JVM command builder.

Used by the benchmarks that run ours beside stock (``compare``, ``scale``, ``ha_bench``) and,
through ``tests/interop/stock.py``, by the interop tests, which add stock ``mqadmin`` and our
scenario driver. The JVMs need Java 17 and a classpath with stock 4.9.7's jars and our
driver classes: ``make java-deps`` builds it in a checkout (``tests/interop/java/target``);
``AIOROCKETMQ_STOCK_HARNESS`` names that ``java`` directory for an installed package.
:func:`require_java` fails with a one-line remedy when any of it is missing.

Every JVM here:

* talks to 127.0.0.1 only: brokers advertise ``brokerIP1=brokerIP2=127.0.0.1``, clients get
  ``clientIP=127.0.0.1`` and an explicit nameserver (``-Drocketmq.namesrv.addr`` and ``-n`` /
  ``setNamesrvAddr``), so nothing ever asks the external address server
  (``jmenv.tbsite.net``). Stock 4.9.7 servers have no bind-address option: Netty and the HA
  service bind the wildcard address, on ports this module chooses;
* has its own ``user.home`` under the caller's tmp dir (namesrv kvConfig, broker.properties,
  client logs and local offsets all go there) and ``rocketmq.home.dir`` =
  ``<tmp>/rocketmq_home``, whose ``conf/logback_{namesrv,broker,tools}.xml`` this module
  writes (NamesrvStartup, BrokerStartup and MQAdminStartup load
  ``${rocketmq.home}/conf/logback_*.xml`` and exit without it);
* has a small heap, the serial GC and C1 only (short-lived processes on a 2-core machine), and
  the ``--add-opens`` JDK 17 needs for 4.9.7's direct-buffer cleaner (callers pass
  ``jvm_extra`` for more: later flags win).

Servers are :class:`~aiorocketmq.bench._procs.ServerProcess` objects (readiness line on
stdout, SIGTERM then SIGKILL by PID); their failure messages and teardown output include the
logback log tails.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._procs import BROKER_READY, ServerProcess

__all__ = ["BROKER_MAIN", "CLASSES", "CLASSPATH_FILE", "CLIENT_HEAP", "DRIVER_MAIN", "JAVA_DIR",
           "JDK17_OPENS", "JVM_BASE", "JavaEnv", "JavaServer", "MQADMIN_FAST_MAIN", "MQADMIN_MAIN",
           "NAMESRV_MAIN", "PORT_IN_USE", "ROCKETMQ_VERSION", "SERVER_HEAP", "STOCK_NAMESRV_READY",
           "StockHarnessError", "free_port", "jvm_args", "require_java", "rocketmq_home",
           "start_stock_broker", "start_stock_namesrv", "stock_broker_process",
           "stock_namesrv_process", "stop_all"]

# tests/interop/java of a checkout (this file is bench/_stock.py there), or the variable's.
JAVA_DIR = Path(os.environ.get("AIOROCKETMQ_STOCK_HARNESS")
                or Path(__file__).resolve().parents[1] / "tests" / "interop" / "java")
CLASSES = JAVA_DIR / "target" / "classes"
CLASSPATH_FILE = JAVA_DIR / "target" / "classpath.txt"
ROCKETMQ_VERSION = "4.9.7"

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
MQADMIN_FAST_MAIN = "io.aiorocketmq.interop.AdminMain"  # MQAdminStartup.main0, then System.exit(0)
DRIVER_MAIN = "io.aiorocketmq.interop.Driver"

STOCK_NAMESRV_READY = re.compile(r"The Name Server boot success\. serializeType=(\w+)")
PORT_IN_USE = re.compile(r"Address already in use|BindException")

JDK17_OPENS = [
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
]
# Short-lived JVMs on a shared 2-core machine: serial GC, C1 only, small heaps.
JVM_BASE = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Djava.net.preferIPv4Stack=true",
            "-Dfile.encoding=UTF-8"]
SERVER_HEAP = ["-Xms64m", "-Xmx384m", "-XX:MaxDirectMemorySize=256m"]
CLIENT_HEAP = ["-Xms32m", "-Xmx256m"]

LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<!-- written by aiorocketmq.bench._stock: everything at INFO to one file under user.home -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/logs/{name}.log</file>
    <append>true</append>
    <encoder>
      <pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{0}} - %msg%n</pattern>
      <charset>UTF-8</charset>
    </encoder>
  </appender>
  <logger name="RocketmqStats" level="WARN"/>
  <logger name="RocketmqCommercial" level="WARN"/>
  <logger name="RocketmqWaterMark" level="WARN"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


class StockHarnessError(AssertionError):
    """The Java harness is missing, or a stock process failed / did not get ready."""


# -- the built classpath ------------------------------------------------------------------


@dataclass(frozen=True)
class JavaEnv:
    java: str
    classpath: str  # our driver classes first, then stock RocketMQ 4.9.7 and its dependencies


def require_java() -> JavaEnv:
    """``java``, ``mvn`` and the classpath ``make java-deps`` builds; :class:`StockHarnessError`
    with a one-line remedy when any is missing."""
    problems = []
    java = shutil.which("java")
    if java is None:
        problems.append("`java` (JDK 17) is not on PATH")
    if shutil.which("mvn") is None:
        problems.append("`mvn` (Maven 3) is not on PATH")
    if not CLASSPATH_FILE.is_file() or not (CLASSES / "io/aiorocketmq/interop/AdminMain.class").is_file():
        problems.append(f"{CLASSPATH_FILE} or the driver classes are missing")
    if problems:
        raise StockHarnessError(
            f"stock RocketMQ {ROCKETMQ_VERSION} needs Java 17, Maven and the built harness: "
            + "; ".join(problems) + ". Run `make java-deps` in a checkout (and, for an "
            "installed package, set AIOROCKETMQ_STOCK_HARNESS to its tests/interop/java).")
    assert java is not None
    return JavaEnv(java, f"{CLASSES}{os.pathsep}{CLASSPATH_FILE.read_text().strip()}")


# -- homes and JVM arguments --------------------------------------------------------------


def rocketmq_home(tmp: Path) -> Path:
    """``<tmp>/rocketmq_home`` with ``conf/logback_{namesrv,broker,tools}.xml`` (written once)."""
    home = tmp / "rocketmq_home"
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("namesrv", "broker", "tools"):
        path = conf / f"logback_{name}.xml"
        if not path.exists():
            path.write_text(LOGBACK.format(name=name))
    return home


def jvm_args(tmp: Path, user_home: Path, namesrv_addr: str, *, heap: list[str],
             serialize_type: str | None = None, props: Mapping[str, str] | None = None) -> list[str]:
    """The JVM options every stock process gets (see the module docstring)."""
    user_home.mkdir(parents=True, exist_ok=True)
    args = [*heap, *JVM_BASE, *JDK17_OPENS,
            f"-XX:ErrorFile={user_home}/hs_err_%p.log",
            f"-Duser.home={user_home}",
            f"-Drocketmq.home.dir={rocketmq_home(tmp)}",
            f"-Drocketmq.namesrv.addr={namesrv_addr}",
            f"-Drocketmq.client.logRoot={user_home}/logs",
            "-Drocketmq.client.logLevel=INFO",
            "-Dcom.rocketmq.sendMessageWithVIPChannel=false",
            "-Drocketmq.client.rebalance.waitInterval=1000"]
    if serialize_type is not None:
        if serialize_type not in ("JSON", "ROCKETMQ"):
            raise ValueError(f"serialize_type JSON or ROCKETMQ, not {serialize_type!r}")
        args.append(f"-Drocketmq.serialize.type={serialize_type}")
    args += [f"-D{k}={v}" for k, v in (props or {}).items()]
    return args


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))  # the stock servers bind the wildcard address
        except OSError:
            return False
    return True


def free_port(*, offsets: Iterable[int] = (0,)) -> int:
    """A port P (below the ephemeral range) such that P + each offset is free right now."""
    offsets = tuple(offsets)
    for _ in range(200):
        port = random.randrange(12000, 32000)
        if all(_port_free(port + off) for off in offsets):
            return port
    raise StockHarnessError(f"no free port with offsets {offsets}")


# -- servers ------------------------------------------------------------------------------


class JavaServer(ServerProcess):
    """A stock nameserver or broker; ``address`` is 127.0.0.1:<listenPort> once started."""

    def __init__(self, argv: list[str], ready: re.Pattern[str], *, address: str, home: Path,
                 logs: list[Path], startup_seconds_limit: float = 90.0) -> None:
        super().__init__(argv, ready, home / "stderr.log")
        self.expected_address = address
        self.home = home
        self.logs = logs
        self.startup_seconds: float | None = None
        self.startup_seconds_limit = startup_seconds_limit

    def start(self, timeout: float | None = None) -> JavaServer:
        began = time.monotonic()
        try:
            super().start(timeout or self.startup_seconds_limit)
        except RuntimeError as exc:
            raise StockHarnessError(str(exc)) from None  # the message has the log tails
        self.startup_seconds = time.monotonic() - began
        self.address = self.expected_address
        return self

    @property
    def port(self) -> int:
        return int(self.expected_address.rsplit(":", 1)[1])

    def wait_log(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """The first match of ``pattern`` in the server's logback log, polled until ``timeout``
        (e.g. a master's "HAService receive new connection": a slave's HAClient retries every
        5 s, and a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until then)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            for path in self.logs:
                try:
                    m = rx.search(path.read_text(errors="replace"))
                except FileNotFoundError:
                    continue
                if m:
                    return m
            if time.monotonic() > deadline:
                raise StockHarnessError(f"{self.home.name}: no /{pattern}/ in its log within {timeout}s\n"
                                        f"{self.log_tail(40)}")
            if not self.alive():
                raise StockHarnessError(f"{self.home.name} exited while waiting for /{pattern}/\n{self.log_tail(40)}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 80) -> str:
        parts = [f"-- {self.log_path.name} (stdout before ready: {''.join(self.stdout_lines)!r})\n"
                 + super().log_tail(lines)]
        for path in self.logs:
            try:
                text = path.read_text(errors="replace")
            except FileNotFoundError:
                text = "(no log)"
            parts.append(f"-- {path.name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)


def stop_all(servers: Iterable[ServerProcess], timeout: float = 15.0) -> dict[ServerProcess, int | None]:
    """SIGTERM every server at once, then wait for each (SIGKILL at the deadline): a stock
    broker's orderly shutdown alone takes ~6 s (Netty event threads poll every 3 s, the store
    sleeps 1 s), so stopping them one after another would add up."""
    servers = list(servers)
    for server in servers:
        if server.alive():
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    return {server: server.stop(max(0.1, deadline - time.monotonic())) for server in servers}


def _start_on_free_ports(make: Any, attempts: int = 3) -> JavaServer:
    """``make()`` builds a JavaServer on freshly chosen ports; retried when a port was taken
    between choosing it and the JVM binding it."""
    for attempt in range(attempts):
        server: JavaServer = make()
        try:
            return server.start()
        except StockHarnessError as exc:
            if attempt + 1 < attempts and PORT_IN_USE.search(str(exc)):
                continue
            raise
    raise AssertionError("unreachable")


def stock_namesrv_process(tmp: Path, *, name: str = "stock-namesrv", port: int | None = None,
                          props: Mapping[str, str] | None = None,
                          jvm_extra: Sequence[str] = ()) -> JavaServer:
    """A stock ``NamesrvStartup -c namesrv.properties`` (listenPort=port or a free one), not started.
    ``jvm_extra`` follows the default JVM options (later wins: bench/compare.py gives C2 and a
    bigger heap)."""
    env = require_java()
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    address = f"127.0.0.1:{port}"
    settings = {"listenPort": str(port), "kvConfigPath": str(home / "kvConfig.json"), **(props or {})}
    conf = home / "namesrv.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    argv = [env.java, *jvm_args(tmp, home, address, heap=SERVER_HEAP), *jvm_extra, "-cp",
            env.classpath, NAMESRV_MAIN, "-c", str(conf)]
    return JavaServer(argv, STOCK_NAMESRV_READY, address=address, home=home,
                      logs=[home / "logs" / "namesrv.log"])


def start_stock_namesrv(tmp: Path, *, name: str = "stock-namesrv",
                        props: Mapping[str, str] | None = None,
                        jvm_extra: Sequence[str] = ()) -> JavaServer:
    return _start_on_free_ports(lambda: stock_namesrv_process(tmp, name=name, props=props,
                                                              jvm_extra=jvm_extra))


def stock_broker_process(tmp: Path, namesrv_addr: str, *, name: str = "broker-a",
                         conf: Mapping[str, str] | None = None, port: int | None = None,
                         jvm_extra: Sequence[str] = ()) -> JavaServer:
    """A stock ``BrokerStartup -c broker.conf -n namesrv`` whose store lives under ``tmp/<name>``;
    ``conf`` entries go into broker.conf over the defaults below (any role: pass brokerRole,
    brokerId, ...). It binds listenPort-2 (fast/VIP), listenPort and listenPort+1 (HA)."""
    env = require_java()
    home = tmp / f"stock-{name}"
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port(offsets=(-2, 0, 1))
    store = home / "store"
    settings = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": "0",
        "listenPort": str(port),
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true",
        "diskMaxUsedSpaceRatio": "95",
    }
    settings.update(conf or {})
    # Never overridable: loopback and the explicit nameserver.
    settings.update({"brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "namesrvAddr": namesrv_addr})
    conf_path = home / "broker.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    argv = [env.java, *jvm_args(tmp, home, namesrv_addr, heap=SERVER_HEAP), *jvm_extra, "-cp",
            env.classpath, BROKER_MAIN, "-c", str(conf_path), "-n", namesrv_addr]
    return JavaServer(argv, BROKER_READY, address=f"127.0.0.1:{settings['listenPort']}", home=home,
                      logs=[home / "logs" / "broker.log"])


def start_stock_broker(tmp: Path, namesrv_addr: str, *, name: str = "broker-a",
                       conf: Mapping[str, str] | None = None,
                       jvm_extra: Sequence[str] = ()) -> JavaServer:
    return _start_on_free_ports(lambda: stock_broker_process(tmp, namesrv_addr, name=name, conf=conf,
                                                             jvm_extra=jvm_extra))
