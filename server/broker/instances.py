"""``mqbroker --instances N``: a host's worth of brokers from one configuration, supervised.

A broker process runs its event loop on one core. RocketMQ scales a cluster out by broker
groups, so a host with many cores runs several brokers, each its own group (upstream
deployments start one ``BrokerStartup`` per group by hand or by script). This does that
from one command:

* From the base configuration (``-c`` file, ``-n``) it derives N broker configurations:
  ``brokerName`` gets ``-<i>`` appended (i = 0 .. N-1); ``listenPort`` becomes
  ``listenPort + i * instancePortStep`` (default step 10: each broker also uses
  ``listenPort + 1`` for HA and upstream clients know ``listenPort - 2`` as its VIP
  channel; 0 stays 0, any free port); ``storePathRootDir`` becomes
  ``<storePathRootDir>/instance-<i>``; a non-zero ``metricsPort`` becomes
  ``metricsPort + i``. Every other key is the same for all, so ``brokerId`` /
  ``brokerRole`` make all N masters or all N slaves: a second ``mqbroker --instances N``
  with ``brokerId=1``, ``brokerRole=SLAVE``, another ``listenPort`` and another store
  pairs a slave with each master of the same name (slaves find their master's HA address
  through the name server, as upstream's do).
* Each instance's configuration is written to ``<its store root>/broker.conf`` and the
  instance is started as ``mqbroker -c <that file>`` with this command's other options,
  so its own config changes persist per instance. Instances print their own readiness
  lines (``The broker[<name>-<i>, ...] boot success...``) to the shared stdout.
* Supervision: SIGTERM or SIGINT stops every instance (SIGTERM, then SIGKILL after
  ``--instances-stop-timeout`` seconds) and exits 0. An instance that exits on its own is
  started again after a backoff (``protocol/backoff.py``, reset after 60 s of uptime),
  except exit code 2 (a bad configuration, which every instance shares): then all stop
  and the command exits 2. Explicit store paths (``storePathCommitLog`` and the like)
  cannot be split per instance and are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.backoff import Backoff

from .config import load_broker_configs

__all__ = ["instance_properties", "run_instances", "DEFAULT_PORT_STEP"]

log = get_logger("aiorocketmq.broker")

DEFAULT_PORT_STEP = 10
STABLE_AFTER = 60.0
# Store keys naming one directory or file: N brokers cannot share them.
_SINGLE_PATH_KEYS = ("storePathCommitLog", "storePathConsumeQueue", "storePathIndex",
                     "storeCheckpoint", "abortFile")


def instance_properties(props: Mapping[str, str], index: int, *,
                        port_step: int = DEFAULT_PORT_STEP) -> dict[str, str]:
    """The configuration of instance ``index`` derived from the base ``props``.

    Raises:
        ValueError: a key that cannot be split per instance, or a bad base value.
    """
    for key in _SINGLE_PATH_KEYS:
        if props.get(key):
            raise ValueError(f"{key} names one path; with --instances set storePathRootDir only")
    config, store_config = load_broker_configs(props)
    out = dict(props)
    out["brokerName"] = f"{config.broker_name}-{index}"
    if config.listen_port:
        port = config.listen_port + index * port_step
        if port + 1 > 65535:
            raise ValueError(f"listenPort of instance {index} would be {port}, beyond 65534")
        out["listenPort"] = str(port)
    out["storePathRootDir"] = os.path.join(store_config.store_path_root_dir, f"instance-{index}")
    if config.metrics_port:
        out["metricsPort"] = str(config.metrics_port + index)
    return out


def write_properties(path: str, props: Mapping[str, str]) -> None:
    """Write ``key=value`` lines (values as read: no escapes needed for the keys we derive)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("# written by mqbroker --instances; edits here apply to this instance\n")
        for key, value in props.items():
            fh.write(f"{key}={value}\n")
    os.replace(tmp, path)


class _Instance:
    __slots__ = ("index", "conf_path", "name", "proc", "started_at", "backoff")

    def __init__(self, index: int, conf_path: str, name: str) -> None:
        self.index = index
        self.conf_path = conf_path
        self.name = name
        self.proc: asyncio.subprocess.Process | None = None
        self.started_at = 0.0
        self.backoff = Backoff(initial=1.0, cap=30.0, stable_after=STABLE_AFTER)


async def _supervise(instances: list[_Instance], child_args: Sequence[str],
                     stop_timeout: float) -> int:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    exit_code = 0

    async def launch(inst: _Instance) -> None:
        inst.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiorocketmq.server.broker.main", "-c", inst.conf_path,
            *child_args)
        inst.started_at = time.monotonic()
        log.info("broker.instance_started", instance=inst.name, pid=inst.proc.pid,
                 config=inst.conf_path)

    async def watch(inst: _Instance) -> None:
        nonlocal exit_code
        while not stopping.is_set():
            await launch(inst)
            assert inst.proc is not None
            code = await inst.proc.wait()
            if stopping.is_set():
                return
            uptime = time.monotonic() - inst.started_at
            if code == 2:
                log.error("broker.instance_bad_config", instance=inst.name, exit_code=code)
                exit_code = 2
                stopping.set()
                return
            inst.backoff.connection_ended(uptime)
            delay = inst.backoff.next_delay()
            log.warning("broker.instance_exited", instance=inst.name, exit_code=code,
                        uptime_s=round(uptime, 1), restart_in_s=round(delay, 1))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stopping.wait()

    watchers = [asyncio.create_task(watch(inst), name=f"watch-{inst.name}") for inst in instances]
    await stopping.wait()
    running = [i.proc for i in instances if i.proc is not None and i.proc.returncode is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(stop_timeout):
            await asyncio.gather(*(p.wait() for p in running))
    except TimeoutError:
        for proc in running:
            if proc.returncode is None:
                log.warning("broker.instance_killed", pid=proc.pid, after_s=stop_timeout)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        await asyncio.gather(*(p.wait() for p in running))
    for task in watchers:
        task.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)
    return exit_code


def run_instances(count: int, props: Mapping[str, str], child_args: Sequence[str], *,
                  port_step: int = DEFAULT_PORT_STEP, stop_timeout: float = 30.0) -> int:
    """Derive, write and supervise ``count`` broker instances; the command's exit code."""
    if count < 1:
        print(f"mqbroker: --instances must be at least 1, not {count}", file=sys.stderr)
        return 2
    instances: list[_Instance] = []
    try:
        for i in range(count):
            derived = instance_properties(props, i, port_step=port_step)
            path = os.path.join(derived["storePathRootDir"], "broker.conf")
            write_properties(path, derived)
            instances.append(_Instance(i, path, derived["brokerName"]))
    except ValueError as exc:
        print(f"mqbroker: bad configuration: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mqbroker: cannot write the instance configurations: {exc}", file=sys.stderr)
        return 1
    log.info("broker.instances", count=count, names=",".join(i.name for i in instances))
    return asyncio.run(_supervise(instances, child_args, stop_timeout))
