"""``Routine``: one named background task owned by a service, as upstream's ``ServiceThread``.

``start()`` creates the task once (a second call does nothing); ``await stop()`` cancels it
and waits for it to end, and does nothing when it is not running. Shared by the broker's
periodic services (``AclFileWatcher``, ``SlaveSynchronize``,
``TransactionalMessageCheckService``), which keep their own loops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["Routine"]


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
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
