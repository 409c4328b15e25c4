"""Stock Apache RocketMQ 4.9.7 (Maven Central) as subprocesses for the interop tests:
nameserver and broker (from ``aiorocketmq.bench._stock``, the JVM command builder the
benchmarks share), plus stock ``mqadmin`` and our scenario driver
(``java/src/main/java/io/aiorocketmq/interop``) running the stock clients.

``make java-deps`` builds ``java/target/classes`` and ``java/target/classpath.txt``;
:func:`require_java` fails with that hint when they (or ``java`` / ``mvn``) are missing.
The JVMs' options, homes and logs are described in ``aiorocketmq.bench._stock``.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiorocketmq.bench._stock import (
    BROKER_MAIN,
    CLASSES,
    CLASSPATH_FILE,
    CLIENT_HEAP,
    DRIVER_MAIN,
    JAVA_DIR,
    JDK17_OPENS,
    JVM_BASE,
    MQADMIN_FAST_MAIN,
    MQADMIN_MAIN,
    NAMESRV_MAIN,
    PORT_IN_USE,
    ROCKETMQ_VERSION,
    SERVER_HEAP,
    STOCK_NAMESRV_READY,
    JavaEnv,
    JavaServer,
    StockHarnessError,
    _start_on_free_ports,
    free_port,
    jvm_args,
    require_java,
    rocketmq_home,
    start_stock_broker,
    start_stock_namesrv,
    stock_broker_process,
    stock_namesrv_process,
    stop_all,
)
from tests.procs import BROKER_READY, SPAWN_LOCK, CommandTimeout, run_command

HERE = Path(__file__).resolve().parent

__all__ = [
    "BROKER_MAIN", "BROKER_READY", "CLASSES", "CLASSPATH_FILE", "CLIENT_HEAP", "DRIVER_MAIN",
    "HERE", "JAVA_DIR", "JDK17_OPENS", "JVM_BASE", "MQADMIN_FAST_MAIN", "MQADMIN_MAIN",
    "NAMESRV_MAIN", "PORT_IN_USE", "ROCKETMQ_VERSION", "SERVER_HEAP", "STOCK_NAMESRV_READY",
    "AdminResult", "DriverProcess", "DriverResult", "Event", "JavaEnv", "JavaServer",
    "StockHarnessError", "_start_on_free_ports", "driver_args", "free_port", "jvm_args",
    "message_body", "message_key", "message_tag", "message_user_properties", "mqadmin",
    "received_body", "require_java", "rocketmq_home", "run_driver", "start_driver",
    "start_stock_broker", "start_stock_namesrv", "stock_broker_process",
    "stock_namesrv_process", "stop_all",
]


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
