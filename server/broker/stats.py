"""Broker statistics: upstream ``BrokerStatsManager`` + the counters of ``StoreStatsService`` and ``BrokerStats``.

Contract:

* ``on_put(topic, msg_num, size)`` after a stored send and ``on_get(group, topic, msg_num,
  size, found)`` after each store read of a pull feed every counter; both are O(1) and
  never await (they are called on the hot paths).
* Named stats items (``TOPIC_PUT_NUMS``, ``TOPIC_PUT_SIZE``, ``GROUP_GET_NUMS``,
  ``GROUP_GET_SIZE``, ``SNDBCK_PUT_NUMS``, ``BROKER_PUT_NUMS``, ``BROKER_GET_NUMS``) keyed as
  upstream (``topic``, ``topic@group``, the cluster name) answer VIEW_BROKER_STATS_DATA with
  minute / hour / day snapshots ``(sum, tps, avgpt)``: upstream samples each item every 10 s
  (7 kept), every 10 min (7 kept) and every hour (25 kept) and computes over first..last.
* Broker-wide TPS (``putTps``, ``getFoundTps``, ``getMissTps``, ``getTotalTps``,
  ``getTransferedTps``) come from one cumulative sample per second (601 kept), over 10 s,
  60 s and 600 s windows, formatted like ``StoreStatsService``: each window's Java double, an
  empty string while there are not yet enough samples, joined by single spaces (so
  ``"0.0 0.2998800479808077 "`` early on; docs/PROTOCOL.md 4.11).
* ``msgPutTotal*`` / ``msgGetTotal*``: upstream ``BrokerStats.record()`` runs at each local
  midnight; the totals at the last two midnights give "today morning" and "yesterday
  morning".

Sampling is lazy instead of timer-driven: every update and every read first appends the
samples for the period boundaries that have passed (with the totals as they stood then,
which are the current totals since nothing changed in between). The result equals a
sampler that never misses a tick, needs no task, and is deterministic under the injected
clock (``clock() -> epoch ms``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple

from aiorocketmq.protocol.fastjson import java_double_str

__all__ = [
    "BrokerStatsManager",
    "StatsItem",
    "StatsSnapshot",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "BROKER_PUT_NUMS",
    "BROKER_GET_NUMS",
]

# common/stats/Stats.java names (VIEW_BROKER_STATS_DATA's statsName)
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"

_ITEM_SETS = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
              BROKER_PUT_NUMS, BROKER_GET_NUMS)

# StatsItem: (sampling period ms, samples kept) for the minute, hour and day views.
_MINUTE = (10_000, 7)
_HOUR = (600_000, 7)
_DAY = (3_600_000, 25)

_SECOND_MS = 1000
_MAX_SECOND_SAMPLES = 601  # StoreStatsService.MAX_RECORDS_OF_SAMPLING + 1
_TPS_WINDOWS = (10, 60, 600)
_DAY_MS = 86_400_000


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class StatsSnapshot(NamedTuple):
    """``StatsSnapshot``: what a stats item did over one view's window."""

    sum: int
    tps: float
    avgpt: float


class _Sampled:
    """Snapshots ``(ts, value, times)`` taken every ``period`` ms, the last ``keep`` kept."""

    __slots__ = ("period", "samples", "next_at")

    def __init__(self, period: int, keep: int, now: int) -> None:
        self.period = period
        self.samples: deque[tuple[int, int, int]] = deque(maxlen=keep)
        self.samples.append((now, 0, 0))
        self.next_at = now + period

    def roll(self, now: int, value: int, times: int) -> None:
        if now < self.next_at:
            return
        keep = self.samples.maxlen or 1
        due = (now - self.next_at) // self.period + 1
        if due > keep:  # only the last ``keep`` boundaries can still be in the deque
            self.next_at += (due - keep) * self.period
            due = keep
        for _ in range(due):
            self.samples.append((self.next_at, value, times))
            self.next_at += self.period

    def snapshot(self) -> StatsSnapshot:
        """``StatsItem.computeStatsData``: first..last of the kept samples."""
        first, last = self.samples[0], self.samples[-1]
        total = last[1] - first[1]
        elapsed = last[0] - first[0]
        tps = total * 1000.0 / elapsed if elapsed > 0 else 0.0
        times = last[2] - first[2]
        avgpt = total / times if times > 0 else 0.0
        return StatsSnapshot(total, tps, avgpt)


class StatsItem:
    """One counter (``value``) and how many increments made it (``times``), with its views."""

    __slots__ = ("value", "times", "_views", "_due")

    def __init__(self, now: int) -> None:
        self.value = 0
        self.times = 0
        self._views = tuple(_Sampled(p, k, now) for p, k in (_MINUTE, _HOUR, _DAY))
        # The earliest sampling boundary of the views: until then an add is two int adds.
        self._due = min(v.next_at for v in self._views)

    def _roll(self, now: int) -> None:
        for view in self._views:
            view.roll(now, self.value, self.times)
        self._due = min(v.next_at for v in self._views)

    def add(self, inc: int, times: int, now: int) -> None:
        if now >= self._due:
            self._roll(now)
        self.value += inc
        self.times += times

    def minute(self, now: int) -> StatsSnapshot:
        self._roll(now)
        return self._views[0].snapshot()

    def hour(self, now: int) -> StatsSnapshot:
        self._roll(now)
        return self._views[1].snapshot()

    def day(self, now: int) -> StatsSnapshot:
        self._roll(now)
        return self._views[2].snapshot()


class _PerSecond:
    """A cumulative total sampled once a second (``StoreStatsService.sampling``)."""

    __slots__ = ("total", "samples", "next_at")

    def __init__(self, now: int) -> None:
        self.total = 0
        self.samples: deque[tuple[int, int]] = deque(maxlen=_MAX_SECOND_SAMPLES)
        self.samples.append((now, 0))
        self.next_at = now + _SECOND_MS

    def roll(self, now: int) -> None:
        if now < self.next_at:
            return
        due = (now - self.next_at) // _SECOND_MS + 1
        if due > _MAX_SECOND_SAMPLES:
            self.next_at += (due - _MAX_SECOND_SAMPLES) * _SECOND_MS
            due = _MAX_SECOND_SAMPLES
        for _ in range(due):
            self.samples.append((self.next_at, self.total))
            self.next_at += _SECOND_MS

    def tps(self, window: int) -> float | None:
        """``CallSnapshot.getTPS`` over the last ``window`` seconds; None if not enough samples."""
        if len(self.samples) <= window:
            return None
        before = self.samples[-(window + 1)]
        last = self.samples[-1]
        elapsed = last[0] - before[0]
        return (last[1] - before[1]) * 1000.0 / elapsed if elapsed > 0 else 0.0


def _tps_text(values: list[float | None]) -> str:
    return " ".join("" if v is None else java_double_str(v) for v in values)


def _next_local_midnight_ms(now: int) -> int:
    t = time.localtime(now / 1000)
    midnight = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
    return int(midnight * 1000) + _DAY_MS


def _format_runtime(elapsed_ms: int) -> str:
    """``StoreStatsService.getFormatRuntime``: ``[ d days, h hours, m minutes, s seconds ]``."""
    secs = max(elapsed_ms, 0) // 1000
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


class BrokerStatsManager:
    """Every counter the admin requests read; see the module docstring.

    Args:
        cluster_name: key of the broker-wide ``BROKER_PUT_NUMS`` / ``BROKER_GET_NUMS`` items.
        clock: wall-clock epoch milliseconds (tests inject one).
    """

    def __init__(self, cluster_name: str, *, clock: Callable[[], int] = _wall_ms) -> None:
        self.cluster_name = cluster_name
        self._clock = clock
        now = clock()
        self.boot_timestamp = now
        self._sets: dict[str, dict[str, StatsItem]] = {name: {} for name in _ITEM_SETS}
        self._put_times = _PerSecond(now)
        self._get_found = _PerSecond(now)
        self._get_miss = _PerSecond(now)
        self._transferred = _PerSecond(now)
        self.put_message_size_total = 0
        self.put_message_failed_times = 0
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0
        self._next_midnight = _next_local_midnight_ms(now)
        self._due = 0  # the first _tick samples and computes the next boundary

    # -- updates (hot paths) --------------------------------------------------------------

    def _add(self, set_name: str, key: str, inc: int, now: int, times: int = 1) -> None:
        items = self._sets[set_name]
        item = items.get(key)
        if item is None:
            item = items[key] = StatsItem(now)
        item.add(inc, times, now)

    def _tick(self) -> int:
        now = self._clock()
        if now < self._due:  # no boundary passed: nothing to sample (the per-message case)
            return now
        if now >= self._next_midnight:
            self._record_midnight(now)
        series_all = (self._put_times, self._get_found, self._get_miss, self._transferred)
        for series in series_all:
            series.roll(now)
        self._due = min(self._next_midnight, *(series.next_at for series in series_all))
        return now

    def on_put(self, topic: str, msg_num: int, size: int) -> None:
        """A send stored ``msg_num`` messages (a batch counts each) of ``size`` bytes in total."""
        now = self._tick()
        sets = self._sets
        # Per stored send: the items found by one lookup each, added in place (_add's work).
        nums = sets[TOPIC_PUT_NUMS].get(topic)
        sizes = sets[TOPIC_PUT_SIZE].get(topic)
        broker = sets[BROKER_PUT_NUMS].get(self.cluster_name)
        if nums is None or sizes is None or broker is None:
            self._add(TOPIC_PUT_NUMS, topic, msg_num, now)
            self._add(TOPIC_PUT_SIZE, topic, size, now)
            self._add(BROKER_PUT_NUMS, self.cluster_name, msg_num, now)
        else:
            # StatsItem.add of each, inlined (three calls less per stored send).
            if now >= nums._due:
                nums._roll(now)
            nums.value += msg_num
            nums.times += 1
            if now >= sizes._due:
                sizes._roll(now)
            sizes.value += size
            sizes.times += 1
            if now >= broker._due:
                broker._roll(now)
            broker.value += msg_num
            broker.times += 1
        self._put_times.total += msg_num
        self.put_message_size_total += size

    def on_put_failed(self) -> None:
        """A send the store refused (``putMessageFailedTimes``)."""
        self.put_message_failed_times += 1

    def on_get(self, group: str, topic: str, msg_num: int, size: int, found: bool) -> None:
        """A pull read the store: ``found`` (status FOUND) with ``msg_num`` messages, or a miss."""
        now = self._tick()
        if found:
            key = topic + "@" + group
            self._add(GROUP_GET_NUMS, key, msg_num, now)
            self._add(GROUP_GET_SIZE, key, size, now)
            self._add(BROKER_GET_NUMS, self.cluster_name, msg_num, now)
            self._get_found.total += 1
            self._transferred.total += msg_num
        else:
            self._get_miss.total += 1

    def on_send_back(self, group: str, topic: str) -> None:
        """CONSUMER_SEND_MSG_BACK stored a retry (``incSendBackNums``)."""
        self._add(SNDBCK_PUT_NUMS, topic + "@" + group, 1, self._tick())

    # -- reads ----------------------------------------------------------------------------

    def get_stats_item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        items = self._sets.get(stats_name)
        return None if items is None else items.get(stats_key)

    def items(self, stats_name: str) -> Iterable[tuple[str, StatsItem]]:
        """Every ``(key, StatsItem)`` of one named set, in insertion order (empty if unknown).

        A live view: iterate it on the loop thread without awaiting in between.
        """
        items = self._sets.get(stats_name)
        return () if items is None else items.items()

    def now(self) -> int:
        return self._tick()

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second ``group`` pulled from ``topic`` over the last minute."""
        item = self._sets[GROUP_GET_NUMS].get(topic + "@" + group)
        return 0.0 if item is None else item.minute(self._tick()).tps

    @property
    def msg_put_total_today_now(self) -> int:
        return self._put_times.total

    @property
    def msg_get_total_today_now(self) -> int:
        return self._transferred.total

    def _record_midnight(self, now: int) -> None:
        """``BrokerStats.record()``; a gap of several days leaves no traffic to attribute."""
        days = (now - self._next_midnight) // _DAY_MS + 1
        if days == 1:
            self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
            self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
        else:
            self.msg_put_total_yesterday_morning = self._put_times.total
            self.msg_get_total_yesterday_morning = self._transferred.total
        self.msg_put_total_today_morning = self._put_times.total
        self.msg_get_total_today_morning = self._transferred.total
        self._next_midnight = _next_local_midnight_ms(now)

    def runtime_info(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO keys these counters own, values as upstream formats them."""
        now = self._tick()
        found = [self._get_found.tps(w) for w in _TPS_WINDOWS]
        miss = [self._get_miss.tps(w) for w in _TPS_WINDOWS]
        total_times = self._put_times.total or 1  # upstream divides by max(total, 1)
        return {
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": _format_runtime(now - self.boot_timestamp),
            "putMessageTimesTotal": str(total_times),
            "putMessageFailedTimes": str(self.put_message_failed_times),
            "putMessageSizeTotal": str(self.put_message_size_total),
            "putMessageAverageSize": java_double_str(self.put_message_size_total / total_times),
            "putTps": _tps_text([self._put_times.tps(w) for w in _TPS_WINDOWS]),
            "getFoundTps": _tps_text(found),
            "getMissTps": _tps_text(miss),
            "getTotalTps": " ".join(java_double_str((f or 0.0) + (m or 0.0))
                                    for f, m in zip(found, miss, strict=True)),
            "getTransferedTps": _tps_text([self._transferred.tps(w) for w in _TPS_WINDOWS]),
            "msgPutTotalYesterdayMorning": str(self.msg_put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.msg_put_total_today_morning),
            "msgPutTotalTodayNow": str(self.msg_put_total_today_now),
            "msgGetTotalYesterdayMorning": str(self.msg_get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.msg_get_total_today_morning),
            "msgGetTotalTodayNow": str(self.msg_get_total_today_now),
        }

    # -- deletions ------------------------------------------------------------------------

    def on_topic_deleted(self, topic: str) -> None:
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self._sets[name].pop(topic, None)
        prefix = topic + "@"
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            items = self._sets[name]
            for key in [k for k in items if k.startswith(prefix)]:
                del items[key]

    def on_group_deleted(self, group: str) -> None:
        suffix = "@" + group
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            items = self._sets[name]
            for key in [k for k in items if k.endswith(suffix)]:
                del items[key]
