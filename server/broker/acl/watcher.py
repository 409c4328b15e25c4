"""``AclFileWatcher``: reload the ACL files when they change, as upstream ``AclFileWatchService``.

One routine owned by the broker (``start`` / ``stop``) calls
``PlainPermissionManager.check_files`` every ``interval`` seconds: a change in the number of
ACL files reloads everything, a changed file (modification time or size) reloads that
file. Upstream polls every 5 s; we poll every second by default (a few ``stat`` calls), so
an edit takes effect sooner with the same result.
"""

from __future__ import annotations

import asyncio

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.routine import Routine

from .plain_permission import PlainPermissionManager

__all__ = ["AclFileWatcher"]

log = get_logger("aiorocketmq.broker.acl")


class AclFileWatcher:
    """Polls one manager's files; ``start()`` once, ``await stop()`` (idempotent)."""

    def __init__(self, manager: PlainPermissionManager, interval: float = 1.0) -> None:
        self.manager = manager
        self.interval = interval
        self._routine = Routine(self._watch_routine, "AclFileWatchService")

    def start(self) -> None:
        self._routine.start()

    async def _watch_routine(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.manager.check_files()

    async def stop(self) -> None:
        await self._routine.stop()
