"""``LiveSampler``: the live charts' data, sampled in the background into bounded series.

One routine (``_sample_routine``, owned by the sampler: created in ``start()``, cancelled and
awaited in ``stop()``) asks ``DashboardService.sample`` every ``interval`` seconds for TPS in
and out per master broker and the lag of each consumer group (the group list is refreshed
every ``GROUP_REFRESH_SAMPLES`` samples, at most ``MAX_GROUPS`` groups). Samples go into a
``deque(maxlen=max_samples)``; the pages poll ``GET /api/live`` and redraw, without a reload.

A sample that fails (the cluster is unreachable for a moment) does not end the routine: the
charts must come back with the cluster. The failure is kept as ``last_error`` (shown on the
page) and logged once when it starts and once when it clears, not once per sample.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import RocketMQError

from .service import DashboardService

__all__ = ["LiveSampler", "MAX_GROUPS", "GROUP_REFRESH_SAMPLES"]

log = get_logger("aiorocketmq.dashboard.sampler")

MAX_GROUPS = 50
GROUP_REFRESH_SAMPLES = 12


class LiveSampler:
    """Bounded TPS / lag series filled by one background routine (module docstring)."""

    def __init__(self, service: DashboardService, *, interval: float = 5.0,
                 max_samples: int = 360) -> None:
        if interval <= 0 or max_samples <= 0:
            raise ValueError("LiveSampler: interval and max_samples must be positive")
        self.service = service
        self.interval = interval
        self.samples: deque[dict[str, Any]] = deque(maxlen=max_samples)
        self.last_error: str | None = None
        self._groups: list[str] = []
        self._taken = 0  # samples taken, for the group list refresh (the deque stops growing)
        self._sample_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._sample_task is not None:
            raise RuntimeError("LiveSampler.start(): already started")
        self._sample_task = asyncio.get_running_loop().create_task(
            self._sample_routine(), name="mqdashboard-sampler")

    async def stop(self) -> None:
        """Cancel the routine and wait for it; idempotent."""
        task, self._sample_task = self._sample_task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise  # we are being cancelled ourselves, not just our child

    def snapshot(self) -> dict[str, Any]:
        """The series as ``GET /api/live`` returns them."""
        return {"interval_ms": int(self.interval * 1000), "samples": list(self.samples),
                "last_error": self.last_error}

    async def sample_once(self) -> dict[str, Any]:
        """Take one sample now and append it."""
        if not self._groups or self._taken % GROUP_REFRESH_SAMPLES == 0:
            self._groups = (await self.service.group_names())[:MAX_GROUPS]
        self._taken += 1
        sample = await self.service.sample(self._groups)
        sample["t"] = time.time_ns() // 1_000_000
        self.samples.append(sample)
        return sample

    async def _sample_routine(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.sample_once()
            except (RocketMQError, OSError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                if self.last_error is None:
                    log.warning("dashboard.sample_failed", error=error)
                self.last_error = error
            else:
                if self.last_error is not None:
                    log.info("dashboard.sample_recovered")
                self.last_error = None
            next_at = max(next_at + self.interval, loop.time())
            await asyncio.sleep(next_at - loop.time())
