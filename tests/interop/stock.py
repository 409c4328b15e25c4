"""Stock Apache RocketMQ 4.9.7 (Maven Central) as subprocesses: nameserver, broker, mqadmin, and
our scenario driver (``java/src/main/java/io/aiorocketmq/interop``) running the stock clients.

``make java-deps`` builds ``java/target/classes`` and ``java/target/classpath.txt``;
:func:`require_java` fails with that hint when they (or ``java`` / ``mvn``) are missing.

Every JVM here:

* talks to 127.0.0.1 only: brokers advertise ``brokerIP1=brokerIP2=127.0.0.1``, clients get
  ``clientIP=127.0.0.1`` and an explicit nameserver (``-Drocketmq.namesrv.addr`` and ``-n`` /
  ``setNamesrvAddr``), so nothing ever asks the external address server
  (``jmenv.tbsite.net``). Stock 4.9.7 servers have no bind-address option: Netty and the HA
  service bind the wildcard address, on ports this module chooses;
* has its own ``user.home`` under the test's tmp dir (namesrv kvConfig, broker.properties,
  client logs and local offsets all go there) and ``rocketmq.home.dir`` = ``<tmp>/rocketmq_home``,
  whose ``conf/logback_{namesrv,broker,tools}.xml`` this module writes (NamesrvStartup,
  BrokerStartup and MQAdminStartup load ``${rocketmq.home}/conf/logback_*.xml`` and exit
  without it);
* has a small heap, the serial GC and C1 only (short-lived processes on a 2-core machine), and
  the ``--add-opens`` JDK 17 needs for 4.9.7's direct-buffer cleaner.

Servers are :class:`tests.procs.ServerProcess` objects (readiness line on stdout, SIGTERM then
SIGKILL by PID); their failure messages and teardown output include the logback log tails.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.procs import BROKER_READY, SPAWN_LOCK, CommandTimeout, ServerProcess, run_command

HERE = Path(__file__).resolve().parent
JAVA_DIR = HERE / "java"
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
<!-- written by tests/interop/stock.py: everything at INFO to one file under user.home -->
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
        problems.append(f"{CLASSPATH_FILE.relative_to(HERE.parents[1])} or the driver classes are missing")
    if problems:
        raise StockHarnessError(
            f"stock RocketMQ {ROCKETMQ_VERSION} interop tests need Java 17, Maven and the built harness: "
            + "; ".join(problems) + ". Run `make java-deps`.")
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


# -- mqadmin ------------------------------------------------------------------------------


@dataclass
class AdminResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return (f"mqadmin {' '.join(self.argv)} -> exit {self.returncode} in {self.seconds:.1f}s\n"
                f"-- stdout\n{self.stdout}\n-- stderr\n{self.stderr[-4000:]}")


def mqadmin(tmp: Path, namesrv_addr: str, command: str, *args: str, timeout: float = 60.0,
            serialize_type: str | None = None, fast_exit: bool = True) -> AdminResult:
    """One stock ``mqadmin <command> -n <namesrv> args...``. MQAdminStartup prints an exception's
    stack trace and still exits 0, so check ``stdout`` / ``stderr``, not just ``returncode``.
    ``fast_exit`` runs it through ``AdminMain`` (the same ``MQAdminStartup.main0``, then
    ``System.exit(0)``): ~3 s less per call than waiting for Netty's graceful shutdown."""
    env = require_java()
    home = tmp / "stock-mqadmin"
    argv = [command, "-n", namesrv_addr, *args]
    cmd = [env.java, *jvm_args(tmp, home, namesrv_addr, heap=CLIENT_HEAP, serialize_type=serialize_type),
           "-cp", env.classpath, MQADMIN_FAST_MAIN if fast_exit else MQADMIN_MAIN, *argv]
    began = time.monotonic()
    try:
        code, stdout, stderr = run_command(cmd, timeout)
    except CommandTimeout as exc:
        raise StockHarnessError(f"mqadmin {' '.join(argv)} did not finish in {timeout}s\n"
                                f"{exc.stdout}\n{exc.stderr}") from None
    return AdminResult(argv, code, stdout, stderr, time.monotonic() - began)


# -- the scenario driver ------------------------------------------------------------------

Event = dict[str, Any]


def driver_args(options: Mapping[str, Any]) -> list[str]:
    """``{"key_prefix": "k-", "broadcast": True, "tags": ["A", "B"], "props": {"a": "1"}}`` ->
    ``--key-prefix k- --broadcast --tags A,B --props a=1``; None / False are left out."""
    out: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, Mapping):
            out += [flag, ";".join(f"{k}={v}" for k, v in value.items())]
        elif isinstance(value, list | tuple):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


@dataclass
class DriverResult:
    name: str
    argv: list[str]
    returncode: int
    events: list[Event]
    stderr: str
    seconds: float
    log_tail: str = ""

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.get("event") == kind]

    @property
    def done(self) -> Event | None:
        found = self.of("done")
        return found[-1] if found else None

    @property
    def error(self) -> Event | None:
        found = self.of("error")
        return found[-1] if found else None

    def describe(self, last: int = 15) -> str:
        shown = "\n".join("    " + json.dumps(_compact(e)) for e in self.events[-last:])
        return (f"--- driver {self.name}: {' '.join(self.argv)}\n"
                f"exit {self.returncode} after {self.seconds:.1f}s, {len(self.events)} events; last {last}:\n"
                f"{shown}\n--- stderr (tail)\n{self.stderr[-3000:]}\n--- client log (tail)\n{self.log_tail}")

    def check(self) -> DriverResult:
        """Itself when the scenario ended with ``done`` and exit 0; else StockHarnessError."""
        if self.returncode != 0 or self.done is None:
            err = self.error or {}
            raise StockHarnessError(f"driver {self.name} failed: {err.get('error')}\n{self.describe()}")
        return self


def _compact(e: Event) -> Event:
    return {k: v for k, v in e.items() if k not in ("properties", "stack")}


@dataclass
class DriverProcess:
    """A running driver JVM; stdout (JSON lines) and stderr go to files under its home."""

    name: str
    argv: list[str]
    home: Path
    proc: subprocess.Popen[bytes] | None = None
    began: float = 0.0
    result: DriverResult | None = None
    _lines_read: list[Event] = field(default_factory=list)

    @property
    def stdout_path(self) -> Path:
        return self.home / "stdout.jsonl"

    @property
    def stderr_path(self) -> Path:
        return self.home / "stderr.log"

    def start(self, cmd: list[str]) -> DriverProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.began = time.monotonic()
            with SPAWN_LOCK:
                self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        return self

    def events(self) -> list[Event]:
        """Every JSON line printed so far (a line still being written is left for later)."""
        try:
            data = self.stdout_path.read_bytes()
        except FileNotFoundError:
            return []
        events = []
        for line in data.split(b"\n")[:-1]:
            if line.strip():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    events.append({"event": "unparsed", "line": line.decode(errors="replace")})
        return events

    def wait_for(self, kind: str, *, timeout: float = 60.0) -> Event:
        """The first event of ``kind``; fails when the driver exits or the deadline passes first."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events():
                if e.get("event") == kind:
                    return e
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise StockHarnessError(f"driver {self.name} exited before {kind!r}\n{self.wait(5).describe()}")
            if time.monotonic() > deadline:
                raise StockHarnessError(f"driver {self.name}: no {kind!r} in {timeout}s\n{self._describe_now()}")
            time.sleep(0.05)

    def _describe_now(self) -> str:
        return "\n".join("    " + json.dumps(_compact(e)) for e in self.events()[-15:])

    def wait(self, timeout: float = 120.0) -> DriverResult:
        """Wait for the driver to exit (SIGKILL after ``timeout``) and collect its result."""
        if self.result is not None:
            return self.result
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        seconds = time.monotonic() - self.began
        stderr = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        log = self.home / "logs" / "rocketmq_client.log"
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "(no log)"
        self.result = DriverResult(self.name, self.argv, self.proc.returncode, self.events(), stderr,
                                   seconds, tail)
        return self.result

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def start_driver(tmp: Path, scenario: str, *, namesrv: str, name: str | None = None,
                 serialize_type: str | None = None, jvm_props: Mapping[str, str] | None = None,
                 **options: Any) -> DriverProcess:
    """Start ``Driver <scenario> --namesrv <namesrv> <options>`` (see :func:`driver_args` and
    the Java sources for the options); ``serialize_type`` JSON / ROCKETMQ sets
    ``-Drocketmq.serialize.type``. Returns at once; ``.wait()`` gives the :class:`DriverResult`."""
    env = require_java()
    name = name or f"{scenario}-{time.monotonic_ns()}"
    home = tmp / "stock-driver" / name
    argv = [scenario, "--namesrv", namesrv, *driver_args(options)]
    cmd = [env.java, *jvm_args(tmp, home, namesrv, heap=CLIENT_HEAP, serialize_type=serialize_type,
                               props=jvm_props),
           "-cp", env.classpath, DRIVER_MAIN, *argv]
    return DriverProcess(name, argv, home).start(cmd)


def run_driver(tmp: Path, scenario: str, *, namesrv: str, timeout: float = 120.0, **kwargs: Any) -> DriverResult:
    """:func:`start_driver` then wait: the finished :class:`DriverResult` (not yet checked)."""
    return start_driver(tmp, scenario, namesrv=namesrv, **kwargs).wait(timeout)


# -- the driver's deterministic messages (mirror of Messages.java) --------------------------


def message_key(i: int, key_prefix: str = "k-") -> str:
    return f"{key_prefix}{i}"


def message_body(i: int, *, key_prefix: str = "k-", body_size: int = 0) -> bytes:
    if body_size <= 0:
        return f"body-{message_key(i, key_prefix)}".encode()
    return bytes((i * 31 + j) & 0xFF for j in range(body_size))


def message_tag(i: int, tags: list[str] | tuple[str, ...] = ("TagA",)) -> str | None:
    return tags[i % len(tags)] if tags else None


def message_user_properties(i: int, props: Mapping[str, str] | None = None) -> dict[str, str]:
    return {"idx": str(i), **(props or {})}


def received_body(event: Event) -> bytes:
    return base64.b64decode(event["body"])
