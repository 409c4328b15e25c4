"""Stock Apache RocketMQ 5.3.3 (Maven Central) as subprocesses: nameserver, broker, and the
5.x producer driver ``java5/src/main/java/io/aiorocketmq/interop5/Timer5.java``.

``make java-deps`` builds ``java5/target/classes`` and ``java5/target/classpath.txt`` (a pom of
its own, so the 4.9.7 classpath of ``java/`` is not disturbed); :func:`require_java5` fails
with that hint when they are missing. Every JVM is set up as :mod:`tests.interop.stock` sets
up the 4.9.7 ones (127.0.0.1 only, ``brokerIP1=brokerIP2=127.0.0.1``, the nameserver address
always given, ``user.home``, logs and stores under the test's tmp dir); 5.x logs through
its own ``rmq.*.logback.xml`` into ``<user.home>/logs/rocketmqlogs/``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.interop.stock import (
    BROKER_MAIN,
    BROKER_READY,
    CLIENT_HEAP,
    NAMESRV_MAIN,
    SERVER_HEAP,
    STOCK_NAMESRV_READY,
    DriverProcess,
    DriverResult,
    JavaEnv,
    JavaServer,
    StockHarnessError,
    _start_on_free_ports,
    driver_args,
    free_port,
    jvm_args,
)

HERE = Path(__file__).resolve().parent
JAVA5_DIR = HERE / "java5"
CLASSES5 = JAVA5_DIR / "target" / "classes"
CLASSPATH5_FILE = JAVA5_DIR / "target" / "classpath.txt"
ROCKETMQ5_VERSION = "5.3.3"
TIMER5_MAIN = "io.aiorocketmq.interop5.Timer5"


def require_java5() -> JavaEnv:
    """``java`` and the 5.3.3 classpath ``make java-deps`` builds, or :class:`StockHarnessError`."""
    java = shutil.which("java")
    problems = []
    if java is None:
        problems.append("`java` (JDK 17) is not on PATH")
    if not CLASSPATH5_FILE.is_file() or not (CLASSES5 / "io/aiorocketmq/interop5/Timer5.class").is_file():
        problems.append(f"{CLASSPATH5_FILE.relative_to(HERE.parents[1])} or the Timer5 driver is missing")
    if problems:
        raise StockHarnessError(f"stock RocketMQ {ROCKETMQ5_VERSION} interop tests need Java 17 and the "
                                "built harness: " + "; ".join(problems) + ". Run `make java-deps`.")
    assert java is not None
    return JavaEnv(java, f"{CLASSES5}{os.pathsep}{CLASSPATH5_FILE.read_text().strip()}")


def _logs(home: Path, name: str) -> list[Path]:
    return [home / "logs" / "rocketmqlogs" / f"{name}.log"]


def start_stock5_namesrv(tmp: Path, *, name: str = "stock5-namesrv") -> JavaServer:
    env = require_java5()

    def make() -> JavaServer:
        home = tmp / name
        home.mkdir(parents=True, exist_ok=True)
        port = free_port()
        address = f"127.0.0.1:{port}"
        conf = home / "namesrv.properties"
        conf.write_text(f"listenPort={port}\nkvConfigPath={home / 'kvConfig.json'}\n")
        argv = [env.java, *jvm_args(tmp, home, address, heap=SERVER_HEAP), "-cp", env.classpath,
                NAMESRV_MAIN, "-c", str(conf)]
        return JavaServer(argv, STOCK_NAMESRV_READY, address=address, home=home,
                          logs=_logs(home, "namesrv"))
    return _start_on_free_ports(make)


def start_stock5_broker(tmp: Path, namesrv_addr: str, *, name: str = "broker5-a",
                        conf: Mapping[str, str] | None = None) -> JavaServer:
    """A stock 5.3.3 ``BrokerStartup -c broker.conf -n namesrv``, store under ``tmp/stock5-<name>``."""
    env = require_java5()

    def make() -> JavaServer:
        home = tmp / f"stock5-{name}"
        home.mkdir(parents=True, exist_ok=True)
        port = free_port(offsets=(-2, 0, 1))
        store = home / "store"
        settings = {
            "brokerClusterName": "DefaultCluster", "brokerName": name, "brokerId": "0",
            "listenPort": str(port), "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "mappedFileSizeTimerLog": str(4 * 1024 * 1024),
            "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true",
            "diskMaxUsedSpaceRatio": "95",
            **(conf or {}),
            "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "namesrvAddr": namesrv_addr,
        }
        conf_path = home / "broker.conf"
        conf_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        argv = [env.java, *jvm_args(tmp, home, namesrv_addr, heap=SERVER_HEAP), "-cp", env.classpath,
                BROKER_MAIN, "-c", str(conf_path), "-n", namesrv_addr]
        return JavaServer(argv, BROKER_READY, address=f"127.0.0.1:{port}", home=home,
                          logs=_logs(home, "broker"))
    return _start_on_free_ports(make)


def run_timer5(tmp: Path, *, namesrv: str, timeout: float = 120.0, **options: Any) -> DriverResult:
    """Run ``Timer5`` (the 5.3.3 producer, see its source for the options) to its end."""
    env = require_java5()
    name = f"timer5-{time.monotonic_ns()}"
    home = tmp / "stock5-driver" / name
    argv = ["--namesrv", namesrv, *driver_args(options)]
    cmd = [env.java, *jvm_args(tmp, home, namesrv, heap=CLIENT_HEAP), "-cp", env.classpath,
           TIMER5_MAIN, *argv]
    return DriverProcess(name, argv, home).start(cmd).wait(timeout)
