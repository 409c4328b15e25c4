"""``Routine``: one named background task owned by a service, as upstream's ``ServiceThread``.

``start()`` creates the task once (a second call does nothing); ``await stop()`` cancels it
and waits for it to end, and does nothing when it is not running. Shared by the broker's
periodic services (``AclFileWatcher``, ``SlaveSynchronize``,
``TransactionalMessageCheckService``, ``ClientHousekeepingService``,
``PullRequestHoldService``, ``registerBrokerAll``, ``persistConsumerOffset``), which keep
their own loops.

``await cancel_and_wait(tasks)``: cancel every task, then wait for each to end (a task's
own CancelledError is swallowed; any other exception it ends with propagates). Services
that own several tasks stop them with it, and so does any code that cancels a task and then
waits for it to end.

``ServiceState``: where a service is in its life, as upstream's ``common.ServiceState``:
``CREATE_JUST`` until ``start()``, ``START_FAILED`` while starting (and after a start that
raised), ``RUNNING`` once started, ``SHUTDOWN_ALREADY`` from the first ``shutdown()`` on.
The clients' producers, consumers and instance, the broker and the HA service keep theirs
in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

__all__ = ["Routine", "ServiceState", "cancel_and_wait"]


class ServiceState(enum.Enum):
    """Upstream ``ServiceState`` of a service (see the module docstring)."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel every task, then wait for each to end (see the module docstring)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Routine:
    """Runs ``factory()`` as a task named ``name``; ``start()`` once, ``await stop()`` (idempotent)."""

    def __init__(self, factory: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._factory = factory
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._factory(), name=self._name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait((task,))
