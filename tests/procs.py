"""Start real ``mqnamesrv`` / ``mqbroker`` processes on 127.0.0.1 for integration tests.

The helpers live in the package, ``aiorocketmq.bench._procs``, so that the benchmarks
work from an installed wheel too; the tests import them from here, as they always have.
Servers bind port 0 and print their readiness line with the real address (read under a
deadline); their logs go to a file the fixtures print when they tear down.
"""

from __future__ import annotations

from aiorocketmq.bench._procs import (
    BROKER_READY,
    NAMESRV_READY,
    SPAWN_LOCK,
    CommandTimeout,
    ServerProcess,
    broker_process,
    namesrv_and_broker,
    namesrv_process,
    run_command,
)

__all__ = ["BROKER_READY", "NAMESRV_READY", "SPAWN_LOCK", "CommandTimeout", "ServerProcess",
           "broker_process", "namesrv_and_broker", "namesrv_process", "run_command"]
