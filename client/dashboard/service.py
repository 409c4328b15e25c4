"""``DashboardService``: every dashboard page's data, and its actions, over ``MQAdmin``.

Each public coroutine returns JSON-ready dicts (snake_case keys) and raises one of three
things: ``InputError`` (the request is wrong: a bad name, a malformed time range, a preview
that is too large; nothing was sent to the cluster), ``NotFoundError`` (the topic, group or
message does not exist), or an error of ``protocol.errors`` from the cluster itself. The
HTTP layer (``routes``) maps them to 400, 404 and 502/504.

What each page asks, following Apache rocketmq-dashboard's services (``ClusterServiceImpl``,
``TopicServiceImpl``, ``ConsumerServiceImpl``, ``MessageServiceImpl``):

* cluster: ClusterInfo (106), then GET_BROKER_RUNTIME_INFO (28) of every broker, master and
  slave: ``putTps`` / ``getTransferedTps`` (first number: the 10 s window),
  ``msgPutTotalTodayNow``, ``brokerVersionDesc``, ``commitLogDiskRatio``,
  ``commitLogDirCapacity``; replication lag of a slave = its master's ``commitLogMaxOffset``
  minus its own.
* timers: GET_TIMER_METRICS (61, stock 5.x) of every master, pending timers per real topic,
  and the runtime info's ``timer*`` keys (the timer store's progress).
* topics: the nameserver's topic list (206) classified as normal / retry / DLQ / system;
  one topic: its route (105), GET_TOPIC_STATS_INFO (202), QUERY_TOPIC_CONSUME_BY_WHO (300).
* groups: the subscription groups of every master (201); per group of the page shown
  GET_CONSUME_STATS (208) for lag and consume TPS, GET_CONSUMER_CONNECTION_LIST (203) for
  members and, with two or more members, GET_CONSUMER_RUNNING_INFO (307) of each client for
  what it subscribes to (``subscription_issues``: where the clients disagree).

Lists are paged (``page_of``) and the cluster info, topic list, group list and group rows
are kept in a ``TtlCache`` for ``cache_ttl`` seconds; every change made through the service
clears it.
* messages: by time range, upstream's ``queryMessageByTopic`` (SEARCH_OFFSET_BY_TIMESTAMP
  per queue, then PULL_MESSAGE without committing, at most ``max_scan_messages``); by key,
  QUERY_MESSAGE (12); by id, VIEW_MESSAGE_BY_ID (33) for an offset id or QUERY_MESSAGE with
  ``_UNIQUE_KEY_QUERY`` for a UNIQ_KEY.
* resend: upstream ``consumeMessageDirectly``: CONSUME_MESSAGE_DIRECTLY (309) to the broker
  that stores the message, which hands it to one online client of the group.
* reset offset: INVOKE_BROKER_TO_RESET_OFFSET (222) when the group has online consumers;
  otherwise the offsets are rewritten with UPDATE_CONSUMER_OFFSET (15), as upstream's
  ``resetOffsetByTimestampOld``. Skipping the backlog is a reset to the newest offset.

Destructive actions take the acting user's name and log it (``dashboard.topic_deleted``,
``dashboard.offset_reset``, ...).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from aiorocketmq.client.admin.acl import (
    broker_acl_config,
    delete_acl_config,
    update_acl_config,
    update_global_white_addr_config,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.admin.subscriptions import client_subscriptions, subscription_issues
from aiorocketmq.client.api import PullStatus
from aiorocketmq.client.producer import Validators
from aiorocketmq.client.trace.query import query_trace_views
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.acl import PlainAccessConfig
from aiorocketmq.protocol.bodies import (
    ClusterInfo,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumeStats,
    MessageQueue,
    ProducerConnection,
    SubscriptionGroupConfig,
    TopicConfig,
)
from aiorocketmq.protocol.body_codec import CONTENT_TYPE_PROPERTY, decode_body
from aiorocketmq.protocol.codes import (
    LanguageCode,
    MessageConst,
    MixAll,
    MQVersion,
    Perm,
    RequestCode,
    ResponseCode,
    SystemTopic,
)
from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    RemotingError,
    TopicNotExistError,
)
from aiorocketmq.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.protocol.message import MessageDecodeError, MessageExt, decode_offset_msg_id

__all__ = [
    "DashboardService",
    "InputError",
    "NotFoundError",
    "PREVIEW_MODES",
    "DEFAULT_PREVIEW_BYTES",
    "MAX_PREVIEW_BYTES",
    "MAX_TEST_BODY_BYTES",
    "TtlCache",
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "body_preview",
    "first_tps",
    "page_of",
    "topic_kind",
]

log = get_logger("aiorocketmq.dashboard")

PREVIEW_MODES = ("text", "json", "hex")
DEFAULT_PREVIEW_BYTES = 4096
MAX_PREVIEW_BYTES = 64 * 1024
MAX_TEST_BODY_BYTES = 64 * 1024
MAX_QUEUE_NUMS = 1024
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
_MAX_CONCURRENT_CALLS = 8  # admin calls in flight for one page (groups, brokers)
_PULL_BATCH = 32
_LONG_MAX = 2**63 - 1

T = TypeVar("T")


class InputError(MQClientError):
    """The request is malformed; nothing was sent to the cluster."""


class NotFoundError(MQClientError):
    """The topic, group or message named by the request does not exist."""


class TtlCache:
    """Results of admin calls, each reused for ``ttl`` seconds (0: never kept).

    One load per key at a time: a caller that finds a load under way awaits it instead of
    asking the cluster again (the groups page, its 5 s refresh and the live sampler ask for
    the same group list). ``clear()`` drops every entry, and a load that began before it
    is not stored: after the dashboard's own change the next page shows the new state.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[Any, tuple[float, Any]] = {}
        self._loading: dict[Any, asyncio.Future[Any]] = {}
        self._generation = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: Any, load: Callable[[], Awaitable[T]]) -> T:
        hit = self._entries.get(key)
        if hit is not None and time.monotonic() - hit[0] < self.ttl:
            value: T = hit[1]
            return value
        pending = self._loading.get(key)
        if pending is not None:
            shared: T = await asyncio.shield(pending)
            return shared
        generation = self._generation
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            value = await load()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" noise without waiters
            raise
        finally:
            if self._loading.get(key) is future:
                del self._loading[key]
        if generation == self._generation and self.ttl > 0:
            self._entries[key] = (time.monotonic(), value)
            if len(self._entries) > 20_000:  # bounded: drop the oldest half
                for old in sorted(self._entries, key=lambda k: self._entries[k][0]
                                  )[:len(self._entries) // 2]:
                    del self._entries[old]
        future.set_result(value)
        return value

    def clear(self) -> None:
        self._entries.clear()
        self._generation += 1

    def drop(self, key: Any) -> None:
        """Forget ``key`` (a load under way still stores its value)."""
        self._entries.pop(key, None)


# -- pure helpers ---------------------------------------------------------------------------


def page_of(rows: list[T], page: int, size: int) -> tuple[list[T], dict[str, int]]:
    """Rows of the 1-based ``page`` of ``size`` rows, and the paging fields of an answer."""
    _int_in(page, 1, _LONG_MAX, "page")
    _int_in(size, 1, MAX_PAGE_SIZE, "size")
    total = len(rows)
    pages = max(1, -(-total // size))
    start = (page - 1) * size
    return rows[start:start + size], {"page": page, "size": size, "total": total,
                                      "pages": pages}


def first_tps(text: str | None) -> float:
    """The 10 s figure of a ``putTps``-style value (``"12.5 11.0 10.2"``), 0.0 when absent."""
    if not text:
        return 0.0
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return 0.0


def topic_kind(topic: str) -> str:
    """``retry``, ``dlq``, ``system`` (also ``<cluster>_REPLY_TOPIC``) or ``normal``."""
    if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(MixAll.DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if topic in SystemTopic.SYSTEM_TOPICS or topic.startswith(SystemTopic.SYSTEM_TOPIC_PREFIX) \
            or topic.endswith("_" + MixAll.REPLY_TOPIC_POSTFIX):
        return "system"
    return "normal"


def _hexdump(data: bytes) -> str:
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at:at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes:<47}  |{text}|")
    return "\n".join(lines)


def body_preview(body: bytes, mode: str = "text", limit: int = DEFAULT_PREVIEW_BYTES, *,
                 content_type: str | None = None) -> dict[str, Any]:
    """The first ``limit`` bytes of a body as text, pretty JSON or a hex dump.

    JSON mode decodes a body whose ``contentType`` property names a codec (msgpack, JSON)
    through ``protocol.body_codec`` first; a body that is not JSON falls back to text with
    ``note`` saying why. Raises ``InputError`` for an unknown mode or a limit outside
    1..``MAX_PREVIEW_BYTES``.
    """
    if mode not in PREVIEW_MODES:
        raise InputError(f"preview mode must be one of {', '.join(PREVIEW_MODES)}, got {mode!r}")
    if not 0 < limit <= MAX_PREVIEW_BYTES:
        raise InputError(f"preview limit must be 1..{MAX_PREVIEW_BYTES} bytes, got {limit}")
    out: dict[str, Any] = {"mode": mode, "size": len(body), "truncated": len(body) > limit,
                           "note": None}
    shown = body[:limit]
    if mode == "hex":
        out["content"] = _hexdump(shown)
        return out
    if mode == "json":
        try:
            if content_type and content_type != "application/json":
                value = decode_body(body, content_type)
            else:
                value = json.loads(body.decode("utf-8"))
            text = json.dumps(value, indent=2, ensure_ascii=False, default=repr)
            out["truncated"] = len(text) > limit
            out["content"] = text[:limit]
            return out
        except (ValueError, UnicodeDecodeError, MQClientError) as exc:
            out["mode"] = "text"
            out["note"] = f"not JSON ({type(exc).__name__}: {str(exc)[:120]}); shown as text"
    text = shown.decode("utf-8", errors="replace")
    if "\ufffd" in text and out["note"] is None:
        out["note"] = "not valid UTF-8: undecodable bytes shown as \ufffd (try hex)"
    out["content"] = text
    return out


def _checked(check: Callable[[str], None], name: str) -> str:
    """``name`` when ``check`` (a ``Validators`` rule) accepts it, else ``InputError``."""
    try:
        check(name)
    except MQClientError as exc:
        raise InputError(str(exc)) from None
    return name


def _check_topic(topic: str) -> str:
    return _checked(Validators.check_topic, topic)


def _check_group(group: str) -> str:
    return _checked(Validators.check_group, group)


def _check_range(begin_ms: int, end_ms: int) -> None:
    for name, v in (("begin", begin_ms), ("end", end_ms)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _LONG_MAX:
            raise InputError(f"{name} must be epoch milliseconds, got {v!r}")
    if begin_ms > end_ms:
        raise InputError(f"begin ({begin_ms}) is after end ({end_ms})")


def _check_confirm(confirm: str | None, name: str, action: str) -> None:
    if confirm != name:
        raise InputError(f"{action} needs confirmation: send confirm={name!r}")


def _int_in(value: int, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{what} must be an integer in {low}..{high}, got {value!r}")
    return value


def _language_name(lang: LanguageCode | int) -> str:
    try:
        return LanguageCode(lang).name
    except ValueError:
        return str(lang)


def message_summary(msg: MessageExt) -> dict[str, Any]:
    """One row of a message list (no body)."""
    return {
        "msg_id": msg.msg_id or msg.offset_msg_id,
        "offset_msg_id": msg.offset_msg_id,
        "topic": msg.topic,
        "tags": msg.properties.get(MessageConst.PROPERTY_TAGS),
        "keys": msg.properties.get(MessageConst.PROPERTY_KEYS),
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "store_timestamp": msg.store_timestamp,
        "born_timestamp": msg.born_timestamp,
        "born_host": msg.born_host,
        "store_host": msg.store_host,
        "body_size": len(msg.body or b""),
        "reconsume_times": msg.reconsume_times,
    }


class DashboardService:
    """The dashboard's view of one cluster, through ``admin`` (see the module docstring).

    Args:
        admin: an open ``MQAdmin``; the service does not close it.
        max_scan_messages: most messages a search by time range returns.
    """

    def __init__(self, admin: MQAdmin, *, max_scan_messages: int = 2000,
                 cache_ttl: float = 5.0) -> None:
        self.admin = admin
        self.max_scan_messages = max_scan_messages
        self.cache = TtlCache(cache_ttl)
        self._limit = asyncio.Semaphore(_MAX_CONCURRENT_CALLS)
        # Calls made from inside an ``_each`` item (a group row asking its clients) take
        # their own slots: sharing ``_limit`` would let 8 rows hold every slot and wait
        # forever for one more.
        self._inner_limit = asyncio.Semaphore(_MAX_CONCURRENT_CALLS)

    def changed(self) -> None:
        """The dashboard changed the cluster: the next page reads it afresh."""
        self.cache.clear()

    async def _cluster_info(self) -> ClusterInfo:
        return await self.cache.get("cluster_info", self.admin.cluster_info)

    async def _topic_names(self) -> list[str]:
        return await self.cache.get("topic_list", self.admin.topic_list)

    async def _bounded(self, fn: Callable[[Any], Awaitable[T]], item: Any) -> T:
        async with self._limit:  # the call is made only once a slot is free
            return await fn(item)

    async def _each(self, fn: Callable[[Any], Awaitable[T]], items: Iterable[Any]
                    ) -> list[T | BaseException]:
        """``fn(item)`` for every item, a few at a time; failures returned, not raised."""
        return await asyncio.gather(*(self._bounded(fn, i) for i in items),
                                    return_exceptions=True)

    # -- cluster -----------------------------------------------------------------------

    async def cluster(self) -> dict[str, Any]:
        """Brokers per cluster with role, address, version, TPS, disk and replication lag."""
        info = await self.admin.cluster_info()
        rows: list[tuple[str, str, int, str]] = []
        for cname, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                    rows.append((cname, name, bid, addr))
        runtimes = await self._each(self.admin.broker_runtime_info, [r[3] for r in rows])
        by_name: dict[str, dict[int, dict[str, str]]] = {}
        for (_c, name, bid, _a), rt in zip(rows, runtimes, strict=True):
            if isinstance(rt, dict):
                by_name.setdefault(name, {})[bid] = rt
        clusters: dict[str, list[dict[str, Any]]] = {}
        for (cname, name, bid, addr), rt in zip(rows, runtimes, strict=True):
            broker: dict[str, Any] = {"broker_name": name, "broker_id": bid, "addr": addr,
                                      "role": "MASTER" if bid == MixAll.MASTER_ID else "SLAVE"}
            if isinstance(rt, BaseException):
                broker["error"] = _describe(rt)
            else:
                broker.update(self._broker_row(rt, by_name.get(name, {}), bid))
            clusters.setdefault(cname, []).append(broker)
        return {"namesrv_addr": ";".join(self.admin.namesrv_addrs),
                "clusters": [{"name": c, "brokers": b} for c, b in clusters.items()]}

    @staticmethod
    def _broker_row(rt: dict[str, str], same_name: dict[int, dict[str, str]],
                    bid: int) -> dict[str, Any]:
        def num(key: str, table: dict[str, str] = rt) -> int:
            try:
                return int(table.get(key, "0") or 0)
            except ValueError:
                return 0

        try:
            disk_ratio: float | None = float(rt.get("commitLogDiskRatio", ""))
        except ValueError:
            disk_ratio = None
        lag: int | None = None
        master = same_name.get(MixAll.MASTER_ID)
        if bid != MixAll.MASTER_ID and master is not None:
            lag = max(num("commitLogMaxOffset", master) - num("commitLogMaxOffset"), 0)
        return {
            "version": rt.get("brokerVersionDesc", ""),
            "put_tps": first_tps(rt.get("putTps")),
            "get_tps": first_tps(rt.get("getTransferedTps") or rt.get("getTransferredTps")),
            "msg_put_today": num("msgPutTotalTodayNow") - num("msgPutTotalTodayMorning"),
            "msg_get_today": num("msgGetTotalTodayNow") - num("msgGetTotalTodayMorning"),
            "disk_ratio": disk_ratio,
            "disk_capacity": rt.get("commitLogDirCapacity", ""),
            "commit_log_max_offset": num("commitLogMaxOffset"),
            "replication_lag_bytes": lag,
        }

    async def timers(self) -> dict[str, Any]:
        """Timer messages: pending per topic on every master (GET_TIMER_METRICS, 61) and each
        master's progress (the runtime info's ``timer*`` keys, stock 5.x's
        ``#Timer(Progress)``). A master without a timer store has ``error``."""
        masters = await self._masters()
        addrs = list(masters.values())
        metrics = await self._each(self.admin.timer_metrics, addrs)
        runtimes = await self._each(self.admin.broker_runtime_info, addrs)
        brokers: list[dict[str, Any]] = []
        topics: dict[str, dict[str, Any]] = {}
        for (name, addr), m, rt in zip(masters.items(), metrics, runtimes, strict=True):
            row: dict[str, Any] = {"broker_name": name, "addr": addr}
            if isinstance(rt, dict):
                def num(key: str, rt: dict[str, str] = rt) -> float:
                    try:
                        return float(rt.get(key, "0"))
                    except ValueError:
                        return 0.0
                row.update(read_behind_s=int(num("timerReadBehind")),
                           offset_behind=int(num("timerOffsetBehind")),
                           pending=int(num("timerCongestNum")),
                           enqueue_tps=num("timerEnqueueTps"), dequeue_tps=num("timerDequeueTps"))
            if isinstance(m, BaseException):
                row["error"] = _describe(m)
            else:
                for topic, (count, ts) in m.items():
                    if count == 0:
                        continue
                    t = topics.setdefault(topic, {"topic": topic, "pending": 0, "last_change_ms": 0,
                                                  "brokers": {}})
                    t["pending"] += count
                    t["last_change_ms"] = max(t["last_change_ms"], ts)
                    t["brokers"][name] = count
            brokers.append(row)
        rows = sorted(topics.values(), key=lambda t: (-t["pending"], t["topic"]))
        return {"brokers": brokers, "topics": rows, "total": sum(t["pending"] for t in rows)}

    async def cluster_names(self) -> list[str]:
        return sorted((await self._cluster_info()).cluster_addr_table)

    # -- topics ------------------------------------------------------------------------

    async def topic_rows(self, query: str = "", *, kinds: Iterable[str] = ("normal",)
                         ) -> list[dict[str, str]]:
        """Topic names containing ``query`` (case-insensitive), of the given kinds, sorted."""
        wanted = set(kinds)
        names = await self._topic_names()
        info = await self._cluster_info()
        hidden = set(info.cluster_addr_table) | set(info.broker_addr_table)
        q = query.lower()
        rows = [{"topic": t, "kind": topic_kind(t)} for t in sorted(set(names))
                if t not in hidden and q in t.lower()]
        return [r for r in rows if r["kind"] in wanted]

    async def topics(self, query: str = "", *, kinds: Iterable[str] = ("normal",),
                     page: int = 1, size: int = MAX_PAGE_SIZE) -> dict[str, Any]:
        """One page of ``topic_rows``, the paging fields and the cluster names.

        The nameserver's list and the cluster info come from the cache (``cache_ttl``)."""
        rows, paging = page_of(await self.topic_rows(query, kinds=kinds), page, size)
        return {"topics": rows, **paging, "clusters": await self.cluster_names()}

    async def _route(self, topic: str) -> Any:
        try:
            return await self.admin.topic_route(_check_topic(topic))
        except TopicNotExistError:
            raise NotFoundError(f"topic '{topic}' does not exist") from None

    async def topic(self, topic: str) -> dict[str, Any]:
        """Route, per-queue min/max offsets, message count, consuming groups of ``topic``."""
        route = await self._route(topic)
        stats = await self.admin.topic_stats(topic)
        try:
            groups = await self.admin.query_topic_consume_by_who(topic)
        except MQBrokerError:
            groups = []
        queues = [{"broker_name": mq.broker_name, "queue_id": mq.queue_id,
                   "min_offset": o.min_offset, "max_offset": o.max_offset,
                   "messages": o.max_offset - o.min_offset,
                   "last_update_timestamp": o.last_update_timestamp}
                  for mq, o in sorted(stats.offset_table.items())]
        info = await self.admin.cluster_info()
        cluster_of = {n: c for c, names in info.cluster_addr_table.items() for n in names}
        return {
            "topic": topic,
            "kind": topic_kind(topic),
            "brokers": [{"broker_name": bd.broker_name, "cluster": cluster_of.get(bd.broker_name),
                         "addrs": {str(k): v for k, v in sorted(bd.broker_addrs.items())}}
                        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name)],
            "queue_datas": [{"broker_name": qd.broker_name, "read_queue_nums": qd.read_queue_nums,
                             "write_queue_nums": qd.write_queue_nums, "perm": int(qd.perm),
                             "perm_text": _perm_text(int(qd.perm))}
                            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)],
            "queues": queues,
            "total_messages": sum(q["messages"] for q in queues),
            "consumer_groups": groups,
        }

    async def create_or_update_topic(self, *, topic: str, cluster: str | None = None,
                                     broker_addr: str | None = None, read_queue_nums: int = 8,
                                     write_queue_nums: int = 8, perm: int = 6,
                                     order: bool = False, user: str) -> dict[str, Any]:
        """UPDATE_AND_CREATE_TOPIC on every master of ``cluster`` or on one broker."""
        _check_topic(topic)
        if topic_kind(topic) == "system" or topic == SystemTopic.AUTO_CREATE_TOPIC_KEY:
            raise InputError(f"topic '{topic}' is a system topic; the dashboard does not edit it")
        _int_in(read_queue_nums, 1, MAX_QUEUE_NUMS, "read_queue_nums")
        _int_in(write_queue_nums, 1, MAX_QUEUE_NUMS, "write_queue_nums")
        if perm not in (2, 4, 6):
            raise InputError(f"perm must be 2 (write), 4 (read) or 6 (read+write), got {perm!r}")
        if not isinstance(order, bool):
            raise InputError("order must be true or false")
        if bool(cluster) == bool(broker_addr):
            raise InputError("give either a cluster or a broker address")
        config = TopicConfig(topic_name=topic, read_queue_nums=read_queue_nums,
                             write_queue_nums=write_queue_nums, perm=perm, order=order)
        if cluster:
            if cluster not in await self.cluster_names():
                raise NotFoundError(f"cluster '{cluster}' does not exist")
            done = await self.admin.create_topic_in_cluster(cluster, config)
        else:
            assert broker_addr is not None
            masters = {b.addr for b in await self.admin.brokers(masters_only=True)}
            if broker_addr not in masters:
                raise NotFoundError(f"'{broker_addr}' is not the address of a master broker")
            await self.admin.create_topic(broker_addr, config)
            done = [broker_addr]
        self.changed()
        log.info("dashboard.topic_updated", user=user, topic=topic, brokers=done,
                 read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums, perm=perm,
                 order=order)
        return {"topic": topic, "brokers": done}

    async def delete_topic(self, topic: str, *, confirm: str | None, user: str
                           ) -> dict[str, Any]:
        """Delete ``topic`` from its brokers and nameservers; ``confirm`` must repeat the name."""
        _check_topic(topic)
        _check_confirm(confirm, topic, "deleting a topic")
        route = await self._route(topic)
        info = await self.admin.cluster_info()
        names = {bd.broker_name for bd in route.broker_datas}
        clusters = sorted(c for c, members in info.cluster_addr_table.items() if names & set(members))
        done: list[str] = []
        for cluster in clusters:
            done.extend(await self.admin.delete_topic(topic, cluster))
        self.changed()
        log.warning("dashboard.topic_deleted", user=user, topic=topic, clusters=clusters,
                    brokers=done)
        return {"topic": topic, "clusters": clusters, "brokers": done}

    async def send_test_message(self, topic: str, *, body: str, tags: str | None = None,
                                keys: str | None = None, user: str) -> dict[str, Any]:
        """Send one message (upstream's ``sendTopicMessage``, producer group per call)."""
        await self._route(topic)
        data = body.encode("utf-8")
        if not data:
            raise InputError("message body is empty")
        if len(data) > MAX_TEST_BODY_BYTES:
            raise InputError(f"message body is {len(data)} bytes; the dashboard sends at most "
                             f"{MAX_TEST_BODY_BYTES}")
        for what, value in (("tags", tags), ("keys", keys)):
            if value is not None and len(value) > 255:
                raise InputError(f"{what} longer than 255 characters")
        result = await self.admin.send_message(topic, data, tags=tags or None, keys=keys or None)
        log.info("dashboard.message_sent", user=user, topic=topic, msg_id=result.msg_id,
                 size=len(data))
        return {"status": result.status.name, "msg_id": result.msg_id,
                "offset_msg_id": result.offset_msg_id,
                "broker_name": result.message_queue.broker_name,
                "queue_id": result.message_queue.queue_id, "queue_offset": result.queue_offset}

    # -- consumer groups ----------------------------------------------------------------

    async def group_names(self, *, include_system: bool = False) -> list[str]:
        """Subscription groups of every master, merged (cached for ``cache_ttl``)."""
        names = await self.cache.get("group_names", self._load_group_names)
        if include_system:
            return names
        return [g for g in names if not _is_system_group(g)]

    async def _load_group_names(self) -> list[str]:
        names: set[str] = set()
        for table in (await self._group_tables()).values():
            names.update(table)
        return sorted(names)

    async def _masters(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address (of ``cluster`` only, when given)."""
        info = await self._cluster_info()
        names = (set(info.cluster_addr_table.get(cluster, ())) if cluster is not None
                 else set(info.broker_addr_table))
        return {name: bd.broker_addrs[MixAll.MASTER_ID]
                for name, bd in sorted(info.broker_addr_table.items())
                if name in names and MixAll.MASTER_ID in bd.broker_addrs}

    async def _group_tables(self) -> dict[str, dict[str, SubscriptionGroupConfig]]:
        """Master address -> its subscription group table (201), cached; a broker that
        does not answer is left out."""
        async def load() -> dict[str, dict[str, SubscriptionGroupConfig]]:
            masters = sorted((await self._masters()).values())
            tables = await self._each(self.admin.subscription_groups, masters)
            return {addr: t for addr, t in zip(masters, tables, strict=True)
                    if isinstance(t, dict)}
        return await self.cache.get("group_tables", load)

    async def group_config(self, group: str) -> dict[str, Any]:
        """The subscription group config of ``group`` on each master that has it."""
        _check_group(group)
        if not await self._group_exists(group):
            raise NotFoundError(f"consumer group '{group}' does not exist")
        names = {addr: name for name, addr in (await self._masters()).items()}
        return {"group": group, "brokers": [
            {"broker_name": names.get(addr, ""), "addr": addr,
             "config": _group_config_view(table[group])}
            for addr, table in sorted((await self._group_tables()).items()) if group in table]}

    async def create_or_update_group(self, group: str, *, cluster: str | None = None,
                                     broker_addr: str | None = None,
                                     settings: dict[str, Any], user: str) -> dict[str, Any]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) on every master of ``cluster`` or on one
        master; ``settings`` are ``SubscriptionGroupConfig`` fields (snake_case), the rest
        keep the Java defaults."""
        _check_group(group)
        if _is_system_group(group):
            raise InputError(f"group '{group}' is a system group; the dashboard does not edit it")
        if bool(cluster) == bool(broker_addr):
            raise InputError("give either a cluster or a broker address")
        config = SubscriptionGroupConfig(group_name=group)
        for key, value in settings.items():
            rule = _GROUP_SETTINGS.get(key)
            if rule is None:
                raise InputError(f"unknown group setting '{key}' (known: "
                                 f"{', '.join(sorted(_GROUP_SETTINGS))})")
            if rule is bool:
                if not isinstance(value, bool):
                    raise InputError(f"{key} must be true or false")
            else:
                low, high = rule
                _int_in(value, low, high, key)
            setattr(config, key, value)
        if cluster:
            if cluster not in await self.cluster_names():
                raise NotFoundError(f"cluster '{cluster}' does not exist")
            targets = sorted((await self._masters(cluster)).values())
        else:
            if broker_addr not in (await self._masters()).values():
                raise NotFoundError(f"'{broker_addr}' is not the address of a master broker")
            assert broker_addr is not None
            targets = [broker_addr]
        for addr in targets:
            await self.admin.create_subscription_group(addr, config)
        self.changed()
        log.info("dashboard.group_updated", user=user, group=group, brokers=targets,
                 **{k: getattr(config, k) for k in sorted(_GROUP_SETTINGS)})
        return {"group": group, "brokers": targets, "config": _group_config_view(config)}

    async def delete_group(self, group: str, *, confirm: str | None, remove_offset: bool,
                           user: str) -> dict[str, Any]:
        """DELETE_SUBSCRIPTIONGROUP (207) on every master that has ``group``."""
        _check_group(group)
        _check_confirm(confirm, group, "deleting a consumer group")
        if _is_system_group(group):
            raise InputError(f"group '{group}' is a system group; the dashboard does not delete it")
        if not isinstance(remove_offset, bool):
            raise InputError("remove_offset must be true or false")
        self.cache.drop("group_tables")
        targets = sorted(addr for addr, table in (await self._group_tables()).items()
                         if group in table)
        if not targets:
            raise NotFoundError(f"consumer group '{group}' does not exist")
        for addr in targets:
            await self.admin.delete_subscription_group(addr, group, remove_offset=remove_offset)
        self.changed()
        log.warning("dashboard.group_deleted", user=user, group=group, brokers=targets,
                    remove_offset=remove_offset)
        return {"group": group, "brokers": targets, "remove_offset": remove_offset}

    async def consumer_running_info(self, group: str, client_id: str) -> dict[str, Any]:
        """One client's running info (GET_CONSUMER_RUNNING_INFO 307, upstream's
        ``getConsumerRunningInfo``): properties, subscriptions, queues held, per-topic RT/TPS."""
        _check_group(group)
        if not client_id or len(client_id) > 255:
            raise InputError("client id must be 1..255 characters")
        try:
            conn = await self.admin.consumer_connection(group)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                raise NotFoundError(f"consumer group '{group}' has no online client") from None
            raise
        if client_id not in {c.client_id for c in conn.connection_set}:
            raise NotFoundError(f"client '{client_id}' is not online in group '{group}'")
        info = await self.admin.consumer_running_info(group, client_id)
        return {
            "group": group, "client_id": client_id,
            "properties": dict(sorted(info.properties.items())),
            "subscriptions": [{"topic": sd.topic, "expression": sd.sub_string,
                               "expression_type": sd.expression_type,
                               "sub_version": sd.sub_version}
                              for sd in sorted(info.subscription_set, key=lambda d: d.topic)],
            "queues": [{"topic": mq.topic, "broker_name": mq.broker_name,
                        "queue_id": mq.queue_id, **dataclasses.asdict(pq)}
                       for mq, pq in sorted(info.mq_table.items())],
            "status": [{"topic": t, **dataclasses.asdict(st)}
                       for t, st in sorted(info.status_table.items())],
        }

    # -- brokers ------------------------------------------------------------------------

    async def broker_config(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CONFIG (26) of a broker of the cluster (master or slave)."""
        info = await self.admin.cluster_info()
        known = {a: (name, bid) for name, bd in info.broker_addr_table.items()
                 for bid, a in bd.broker_addrs.items()}
        if addr not in known:
            raise NotFoundError(f"'{addr}' is not the address of a broker of this cluster")
        props, version = await self.admin.broker_config(addr)
        name, bid = known[addr]
        return {"addr": addr, "broker_name": name, "broker_id": bid, "version": version,
                "config": dict(sorted(props.items()))}

    async def _group_exists(self, group: str) -> bool:
        """Whether ``group`` is a subscription group; a cached list that lacks it is read
        again (the group may be newer than the cache)."""
        if group in await self.group_names(include_system=True):
            return True
        self.cache.drop("group_tables")
        self.cache.drop("group_names")
        return group in await self.group_names(include_system=True)

    async def _group_summary(self, group: str) -> dict[str, Any]:
        """One row of the group list; cached for ``cache_ttl`` (``as_of``: when it was read)."""
        return await self.cache.get(("group_row", group), lambda: self._load_group_summary(group))

    async def _load_group_summary(self, group: str) -> dict[str, Any]:
        row: dict[str, Any] = {"group": group, "members": 0, "consume_type": None,
                               "message_model": None, "version": None, "lag": 0,
                               "consume_tps": 0.0, "topics": [], "subscription_consistent": None,
                               "as_of": time.time_ns() // 1_000_000}
        try:
            stats = await self.admin.consume_stats(group)
            row["lag"] = stats.compute_total_diff()
            row["consume_tps"] = round(stats.consume_tps, 2)
            row["topics"] = sorted({mq.topic for mq in stats.offset_table
                                    if not mq.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)})
        except MQBrokerError as exc:
            row["error"] = _describe(exc)
        try:
            conn = await self.admin.consumer_connection(group)
        except MQBrokerError:
            return row
        row["members"] = len(conn.connection_set)
        row["consume_type"] = conn.consume_type
        row["message_model"] = conn.message_model
        if conn.connection_set:
            row["version"] = MQVersion.desc(min(c.version for c in conn.connection_set))
        if len(conn.connection_set) > 1:  # one client cannot disagree with itself
            clients = await self.client_subscriptions(group, conn)
            row["subscription_consistent"] = not subscription_issues(clients)
        elif conn.connection_set:
            row["subscription_consistent"] = True
        return row

    async def groups(self, query: str = "", *, include_system: bool = False, page: int = 1,
                     size: int = DEFAULT_PAGE_SIZE) -> dict[str, Any]:
        """One page of groups with members, lag, consume TPS and whether their clients
        subscribe alike (upstream ``queryGroupList``, paged: only the page's groups are
        asked for their stats and connections, and those rows are cached)."""
        names = [g for g in await self.group_names(include_system=include_system)
                 if query.lower() in g.lower()]
        shown, paging = page_of(names, page, size)
        rows = await self._each(self._group_summary, shown)
        out = []
        for name, row in zip(shown, rows, strict=True):
            out.append(row if isinstance(row, dict) else {"group": name, "error": _describe(row)})
        return {"groups": out, **paging, "clusters": await self.cluster_names()}

    async def client_subscriptions(self, group: str, conn: ConsumerConnection
                                   ) -> list[dict[str, Any]]:
        """What each online client of ``group`` subscribes to (``client/admin/subscriptions.py``),
        asked within this service's limit of calls in flight."""
        return await client_subscriptions(self.admin, group, conn, limit=self._inner_limit,
                                          describe=_describe)

    async def _consume_stats(self, group: str) -> ConsumeStats:
        _check_group(group)
        if not await self._group_exists(group):
            raise NotFoundError(f"consumer group '{group}' does not exist")
        return await self.admin.consume_stats(group)

    async def group(self, group: str) -> dict[str, Any]:
        """Members, subscriptions, per-queue lag and total, consume TPS of ``group``."""
        stats = await self._consume_stats(group)
        queues: list[dict[str, Any]] = [
                  {"topic": mq.topic, "broker_name": mq.broker_name, "queue_id": mq.queue_id,
                   "broker_offset": w.broker_offset, "consumer_offset": w.consumer_offset,
                   "lag": w.broker_offset - w.consumer_offset,
                   "last_timestamp": w.last_timestamp}
                  for mq, w in sorted(stats.offset_table.items())]
        per_topic: dict[str, int] = {}
        for q in queues:
            per_topic[q["topic"]] = per_topic.get(q["topic"], 0) + q["lag"]
        out: dict[str, Any] = {"group": group, "lag": stats.compute_total_diff(),
                               "consume_tps": round(stats.consume_tps, 2), "queues": queues,
                               "lag_by_topic": per_topic, "online": False, "members": [],
                               "subscriptions": [], "consume_type": None,
                               "message_model": None, "consume_from_where": None,
                               "clients": [], "subscription_issues": [],
                               "subscription_consistent": None}
        try:
            conn = await self.admin.consumer_connection(group)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            return out
        out.update(self._connection_view(conn))
        out["online"] = bool(conn.connection_set)
        out["clients"] = await self.client_subscriptions(group, conn)
        out["subscription_issues"] = subscription_issues(out["clients"])
        out["subscription_consistent"] = not out["subscription_issues"]
        return out

    @staticmethod
    def _connection_view(conn: ConsumerConnection) -> dict[str, Any]:
        return {
            "members": [{"client_id": c.client_id, "client_addr": c.client_addr,
                         "language": _language_name(c.language),
                         "version": MQVersion.desc(c.version)}
                        for c in sorted(conn.connection_set, key=lambda c: c.client_id)],
            "subscriptions": [{"topic": t, "expression": s.sub_string,
                               "expression_type": s.expression_type}
                              for t, s in sorted(conn.subscription_table.items())],
            "consume_type": conn.consume_type,
            "message_model": conn.message_model,
            "consume_from_where": conn.consume_from_where,
        }

    async def reset_offset(self, group: str, *, topic: str, timestamp_ms: int,
                           confirm: str | None, user: str, force: bool = True
                           ) -> dict[str, Any]:
        """Move ``group``'s offsets on ``topic`` to ``timestamp_ms`` (-1: the newest)."""
        _check_group(group)
        _check_topic(topic)
        _check_confirm(confirm, group, "resetting offsets")
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int) or (
                timestamp_ms < 0 and timestamp_ms != -1):
            raise InputError(f"timestamp_ms must be epoch milliseconds or -1, got {timestamp_ms!r}")
        await self._route(topic)
        if not await self._group_exists(group):
            raise NotFoundError(f"consumer group '{group}' does not exist")
        try:
            table = await self.admin.reset_offset_by_time(topic, group, timestamp_ms, force=force)
            mode = "online"
            offsets = {mq: off for mq, off in table.items()}
        except MQBrokerError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            mode = "offline"
            offsets = await self._reset_offline(topic, group, timestamp_ms, force=force)
        self.changed()
        log.warning("dashboard.offset_reset", user=user, group=group, topic=topic,
                    timestamp_ms=timestamp_ms, mode=mode, queues=len(offsets))
        return {"group": group, "topic": topic, "timestamp_ms": timestamp_ms, "mode": mode,
                "offsets": [{"broker_name": mq.broker_name, "queue_id": mq.queue_id,
                             "offset": off} for mq, off in sorted(offsets.items())]}

    async def skip_backlog(self, group: str, *, topic: str | None, confirm: str | None,
                           user: str) -> dict[str, Any]:
        """Reset ``group`` to the newest offset of ``topic`` (or of every topic it consumes)."""
        stats = await self._consume_stats(group)
        _check_confirm(confirm, group, "skipping the backlog")
        topics = [topic] if topic else sorted(
            {mq.topic for mq in stats.offset_table
             if not mq.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)})
        results = [await self.reset_offset(group, topic=t, timestamp_ms=-1, confirm=confirm,
                                           user=user) for t in topics]
        return {"group": group, "topics": topics, "results": results}

    async def _reset_offline(self, topic: str, group: str, timestamp_ms: int, *,
                             force: bool) -> dict[MessageQueue, int]:
        """``resetOffsetByTimestampOld``: write each queue's offset with UPDATE_CONSUMER_OFFSET."""
        stats = await self.admin.consume_stats(group)
        current = {mq: w.consumer_offset for mq, w in stats.offset_table.items()
                   if mq.topic == topic}
        out: dict[MessageQueue, int] = {}
        for addr, mq in await self.admin.readable_queues(topic):
            if timestamp_ms == -1:
                target = await self.admin.api.get_max_offset(addr, mq, self.admin.timeout)
            else:
                target = await self.admin.search_offset(addr, mq, timestamp_ms)
            old = current.get(mq)
            if not force and old is not None and target > old:
                out[mq] = old
                continue
            await self.admin.api.update_consumer_offset(addr, UpdateConsumerOffsetRequestHeader(
                consumer_group=group, topic=topic, queue_id=mq.queue_id, commit_offset=target,
                bname=mq.broker_name), self.admin.timeout, oneway=False)
            out[mq] = target
        return out

    # -- connections --------------------------------------------------------------------

    async def connections(self, *, producer_group: str | None = None,
                          topic: str | None = None) -> dict[str, Any]:
        """Consumers of every online group; producers of ``producer_group`` on ``topic``.

        Brokers keep producers by group without a list of groups (4.9.7 has no
        GET_ALL_PRODUCER_INFO), so producers are looked up by group and topic, as upstream's
        producer page does.
        """
        names = await self.group_names()

        async def load(group: str) -> dict[str, Any] | None:
            try:
                conn = await self.admin.consumer_connection(group)
            except MQBrokerError:
                return None
            return {"group": group, **self._connection_view(conn)}

        async def one(group: str) -> dict[str, Any] | None:  # cached like the group rows
            return await self.cache.get(("connections", group), lambda: load(group))

        consumers = [c for c in await self._each(one, names) if isinstance(c, dict)]
        out: dict[str, Any] = {"consumers": consumers, "producers": None}
        if producer_group or topic:
            if not (producer_group and topic):
                raise InputError("a producer lookup needs both a producer group and a topic")
            _check_group(producer_group)
            await self._route(topic)
            try:
                conn = await self.admin.producer_connection(producer_group, topic)
            except MQBrokerError as exc:
                # A group without live producers: the broker says SYSTEM_ERROR
                # "the producer group[...] not exist" (ProducerManager has no entry).
                if exc.code != ResponseCode.SYSTEM_ERROR or "not exist" not in (exc.remark or ""):
                    raise
                conn = ProducerConnection()
            seen: dict[str, dict[str, Any]] = {}
            for c in conn.connection_set:
                seen.setdefault(c.client_id, {
                    "client_id": c.client_id, "client_addr": c.client_addr,
                    "language": _language_name(c.language), "version": MQVersion.desc(c.version)})
            out["producers"] = {"group": producer_group, "topic": topic,
                                "members": sorted(seen.values(), key=lambda m: m["client_id"])}
        return out

    # -- messages -----------------------------------------------------------------------

    async def messages_by_time(self, topic: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
        """Messages of ``topic`` stored in [begin_ms, end_ms], newest first, capped."""
        _check_range(begin_ms, end_ms)
        await self._route(topic)
        found, truncated = await self._scan(topic, begin_ms, end_ms)
        return {"topic": topic, "begin_ms": begin_ms, "end_ms": end_ms,
                "messages": [message_summary(m) for m in found],
                "truncated": truncated}

    async def _scan(self, topic: str, begin_ms: int, end_ms: int
                    ) -> tuple[list[MessageExt], bool]:
        """Messages of ``topic`` stored in [begin_ms, end_ms], newest first, at most
        ``max_scan_messages`` (and whether there were more)."""
        _check_range(begin_ms, end_ms)
        found: list[MessageExt] = []
        truncated = False
        for addr, mq in await self.admin.readable_queues(topic):
            low = await self.admin.search_offset(addr, mq, begin_ms)
            _min, high = await self.admin.queue_offsets(addr, mq)
            stop = min(await self.admin.search_offset(addr, mq, end_ms) + 1, high)
            offset = low
            while offset < stop:
                if len(found) >= self.max_scan_messages:
                    truncated = True
                    break
                result = await self.admin.pull(addr, mq, offset, _PULL_BATCH)
                if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                found.extend(m for m in result.msg_found_list
                             if begin_ms <= m.store_timestamp <= end_ms)
        found.sort(key=lambda m: m.store_timestamp, reverse=True)
        return found[:self.max_scan_messages], truncated

    async def messages_by_key(self, topic: str, key: str) -> dict[str, Any]:
        """QUERY_MESSAGE by key (upstream's 64 at most), newest first."""
        if not key or len(key) > 255:
            raise InputError("key must be 1..255 characters")
        await self._route(topic)
        try:
            found = await self.admin.query_message_by_key(topic, key, max_num=64)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.QUERY_NOT_FOUND:
                raise
            found = []
        found.sort(key=lambda m: m.store_timestamp, reverse=True)
        return {"topic": topic, "key": key, "messages": [message_summary(m) for m in found]}

    async def find_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """The message with offset id or unique key ``msg_id`` (in ``topic`` if given)."""
        if not msg_id or len(msg_id) > 128 or not all(c in "0123456789abcdefABCDEF"
                                                      for c in msg_id):
            raise InputError(f"message id must be hexadecimal, got {msg_id[:140]!r}")
        if topic:
            await self._route(topic)
            found = await self._by_unique_key(topic, msg_id)
            if found is not None:
                return found
        try:
            decode_offset_msg_id(msg_id)
            msg = await self.admin.view_message(msg_id)
            if not topic or msg.topic == topic:
                return msg
        except (MessageDecodeError, MQClientError, MQBrokerError, RemotingError):
            pass
        if not topic:
            for t in await self._user_topics():
                found = await self._by_unique_key(t, msg_id)
                if found is not None:
                    return found
        raise NotFoundError(f"no message with id '{msg_id}'"
                            + (f" in topic '{topic}'" if topic else ""))

    async def _user_topics(self) -> list[str]:
        return [t["topic"] for t in await self.topic_rows()]

    async def _by_unique_key(self, topic: str, uniq_key: str) -> MessageExt | None:
        try:
            found = await self.admin.query_message_by_unique_key(topic, uniq_key)
        except (MQBrokerError, TopicNotExistError):
            return None
        found = [m for m in found if m.msg_id == uniq_key or m.offset_msg_id == uniq_key]
        return min(found, key=lambda m: m.store_timestamp) if found else None

    async def message(self, msg_id: str, *, topic: str | None = None, preview: str = "text",
                      limit: int = DEFAULT_PREVIEW_BYTES) -> dict[str, Any]:
        """One message: summary, properties, body preview, groups that may resend it."""
        body_preview(b"", preview, limit)  # check the preview arguments before any I/O
        msg = await self.find_message(msg_id, topic)
        try:
            groups = await self.admin.query_topic_consume_by_who(msg.topic)
        except MQBrokerError:
            groups = []
        return {**message_summary(msg), "properties": dict(sorted(msg.properties.items())),
                "body": body_preview(bytes(msg.body or b""), preview, limit,
                                     content_type=msg.properties.get(CONTENT_TYPE_PROPERTY)),
                "consumer_groups": groups}

    async def resend(self, msg_id: str, *, group: str, topic: str | None = None,
                     client_id: str | None = None, user: str) -> dict[str, Any]:
        """Hand the message to one online client of ``group`` (CONSUME_MESSAGE_DIRECTLY)."""
        _check_group(group)
        msg = await self.find_message(msg_id, topic)
        try:
            conn = await self.admin.consumer_connection(group)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                raise InputError(f"consumer group '{group}' has no online client to resend to"
                                 ) from None
            raise
        clients = [c.client_id for c in conn.connection_set if c.client_id]
        if client_id is None:
            if not clients:
                raise InputError(f"consumer group '{group}' has no online client to resend to")
            client_id = clients[0]
        elif client_id not in clients:
            raise InputError(f"client '{client_id}' is not online in group '{group}'")
        header = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=msg.offset_msg_id,
            broker_name=None)
        response = await self.admin.invoke(
            msg.store_host, RequestCode.CONSUME_MESSAGE_DIRECTLY, header,
            timeout=max(self.admin.timeout * 3, 12.0))
        result = ConsumeMessageDirectlyResult.decode(response.body or b"{}")
        log.info("dashboard.message_resent", user=user, msg_id=msg_id, group=group,
                 client_id=client_id, result=result.consume_result)
        return {"msg_id": msg_id, "group": group, "client_id": client_id,
                "consume_result": result.consume_result, "remark": result.remark,
                "spent_time_ms": result.spent_time_mills}

    # -- dead-letter queue --------------------------------------------------------------

    async def _dlq_messages(self, group: str, begin_ms: int, end_ms: int
                            ) -> tuple[str, list[MessageExt] | None, bool]:
        """(DLQ topic, its messages stored in the range or None when it does not exist,
        truncated)."""
        _check_group(group)
        _check_range(begin_ms, end_ms)
        topic = MixAll.dlq_topic(group)
        try:
            await self._route(topic)
        except NotFoundError:
            return topic, None, False
        found, truncated = await self._scan(topic, begin_ms, end_ms)
        return topic, found, truncated

    async def dlq_messages(self, group: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
        """The dead letters of ``group`` (``%DLQ%<group>``) stored in [begin_ms, end_ms], newest
        first, each with the topic it first failed on and how often it was retried."""
        topic, found, truncated = await self._dlq_messages(group, begin_ms, end_ms)
        rows = [{**message_summary(m),
                 "origin_topic": m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC),
                 "origin_msg_id": m.properties.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID)}
                for m in found or []]
        return {"group": group, "topic": topic, "exists": found is not None,
                "begin_ms": begin_ms, "end_ms": end_ms, "messages": rows,
                "truncated": truncated}

    async def dlq_export(self, group: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
        """``dlq_messages`` with every property and the whole body (UTF-8 text when it
        decodes, else base64), for a file the operator keeps or replays elsewhere."""
        topic, found, truncated = await self._dlq_messages(group, begin_ms, end_ms)
        out = []
        for m in found or []:
            body = bytes(m.body or b"")
            try:
                text: str | None = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            out.append({**message_summary(m), "properties": dict(sorted(m.properties.items())),
                        "body_text": text,
                        "body_base64": None if text is not None
                        else base64.b64encode(body).decode("ascii")})
        return {"group": group, "topic": topic, "begin_ms": begin_ms, "end_ms": end_ms,
                "exported_ms": time.time_ns() // 1_000_000, "truncated": truncated,
                "messages": out}

    async def dlq_resend(self, group: str, msg_ids: Any, *, user: str) -> dict[str, Any]:
        """Hand dead letters back to an online client of ``group`` (CONSUME_MESSAGE_DIRECTLY,
        upstream's ``batchResendDlqMessage``); one result per message, failures included."""
        _check_group(group)
        if not isinstance(msg_ids, list) or not msg_ids or len(msg_ids) > 100 or not all(
                isinstance(i, str) for i in msg_ids):
            raise InputError("'msg_ids' must be a list of 1..100 message ids")
        topic = MixAll.dlq_topic(group)
        results = []
        for msg_id in msg_ids:
            try:
                r = await self.resend(msg_id, group=group, topic=topic, user=user)
                results.append({"msg_id": msg_id, "ok": r["consume_result"] == "CR_SUCCESS",
                                "consume_result": r["consume_result"],
                                "client_id": r["client_id"], "error": None})
            except (MQClientError, MQBrokerError, RemotingError) as exc:
                results.append({"msg_id": msg_id, "ok": False, "consume_result": None,
                                "client_id": None, "error": str(exc)})
        return {"group": group, "topic": topic, "results": results}

    # -- message trace ------------------------------------------------------------------

    async def message_trace(self, msg_id: str, trace_topic: str | None = None
                            ) -> dict[str, Any]:
        """The trace records of ``msg_id`` (``queryMsgTraceById``: QUERY_MESSAGE on the trace
        topic, ``RMQ_SYS_TRACE_TOPIC`` unless given)."""
        if not msg_id or len(msg_id) > 128:
            raise InputError("message id must be 1..128 characters")
        topic = trace_topic or SystemTopic.TRACE_TOPIC
        await self._route(topic)
        try:
            views = await query_trace_views(self.admin, msg_id, topic)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.QUERY_NOT_FOUND:
                raise
            views = []
        records = sorted((dataclasses.asdict(v) for v in views),
                         key=lambda r: (r["time_stamp"], r["msg_type"]))
        return {"msg_id": msg_id, "trace_topic": topic, "records": records}

    # -- ACL (plain_acl accounts and the global white list) ------------------------------

    async def acl(self) -> dict[str, Any]:
        """Every master's ACL accounts and global white list (GET_BROKER_CLUSTER_ACL_CONFIG,
        54). Secrets are never sent to the page: ``secret_key`` shows only its length."""
        masters = await self._masters()

        async def one(addr: str) -> tuple[list[str], list[PlainAccessConfig]]:
            return await broker_acl_config(self.admin, addr)

        answers = await self._each(one, list(masters.values()))
        brokers = []
        for (name, addr), answer in zip(masters.items(), answers, strict=True):
            row: dict[str, Any] = {"broker_name": name, "addr": addr}
            if isinstance(answer, BaseException):
                row.update(error=_describe(answer), global_white_addrs=[], accounts=[])
            else:
                white, accounts = answer
                row.update(error=None, global_white_addrs=sorted(white), accounts=[
                    {"access_key": a.access_key,
                     "secret_key": "*" * len(a.secret_key or ""),
                     "white_remote_address": a.white_remote_address, "admin": a.admin,
                     "default_topic_perm": a.default_topic_perm,
                     "default_group_perm": a.default_group_perm,
                     "topic_perms": a.topic_perms or [], "group_perms": a.group_perms or []}
                    for a in sorted(accounts, key=lambda a: a.access_key or "")])
            brokers.append(row)
        return {"brokers": brokers}

    async def update_acl_account(self, data: dict[str, Any], *, user: str) -> dict[str, Any]:
        """UPDATE_AND_CREATE_ACL_CONFIG (50) of one account on every master (stock
        ``updateAclConfig -c``)."""
        def text(key: str, *, required: bool = False) -> str | None:
            value = data.get(key)
            if value is None or value == "":
                if required:
                    raise InputError(f"'{key}' is required")
                return None
            if not isinstance(value, str) or len(value) > 1024 or any(
                    c in value for c in "\r\n"):
                raise InputError(f"'{key}' must be one line of text")
            return value.strip()

        def perms(key: str) -> list[str] | None:
            value = data.get(key)
            if value is None or value == []:
                return None
            if not isinstance(value, list) or not all(
                    isinstance(v, str) and "=" in v and v.split("=", 1)[1] in _ACL_PERMS
                    for v in value):
                raise InputError(f"'{key}' must be a list of 'name=PERM' (PERM: "
                                 f"{', '.join(_ACL_PERMS)})")
            return [v.strip() for v in value]

        admin = data.get("admin", False)
        if not isinstance(admin, bool):
            raise InputError("'admin' must be true or false")
        config = PlainAccessConfig(
            access_key=text("access_key", required=True),
            secret_key=text("secret_key", required=True),
            white_remote_address=text("white_remote_address"), admin=admin,
            default_topic_perm=text("default_topic_perm"),
            default_group_perm=text("default_group_perm"),
            topic_perms=perms("topic_perms"), group_perms=perms("group_perms"))
        for key in ("default_topic_perm", "default_group_perm"):
            if getattr(config, key) not in (None, *_ACL_PERMS):
                raise InputError(f"'{key}' must be one of {', '.join(_ACL_PERMS)}")
        targets = sorted((await self._masters()).values())
        for addr in targets:
            await update_acl_config(self.admin, addr, config)
        log.warning("dashboard.acl_account_updated", user=user, access_key=config.access_key,
                    admin=config.admin, brokers=targets)
        return {"access_key": config.access_key, "brokers": targets}

    async def delete_acl_account(self, access_key: str, *, confirm: str | None, user: str
                                 ) -> dict[str, Any]:
        """DELETE_ACL_CONFIG (51) of ``access_key`` on every master."""
        if not access_key or len(access_key) > 1024:
            raise InputError("access key must be 1..1024 characters")
        _check_confirm(confirm, access_key, "deleting an ACL account")
        targets = sorted((await self._masters()).values())
        for addr in targets:
            await delete_acl_config(self.admin, addr, access_key)
        log.warning("dashboard.acl_account_deleted", user=user, access_key=access_key,
                    brokers=targets)
        return {"access_key": access_key, "brokers": targets}

    async def update_global_white_list(self, addrs: Any, *, user: str) -> dict[str, Any]:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) on every master: the whole list."""
        if not isinstance(addrs, list) or not all(
                isinstance(a, str) and a.strip() and "," not in a and len(a) <= 256
                for a in addrs):
            raise InputError("'addrs' must be a list of addresses or patterns "
                             "(192.168.0.*, 10.0.1-5.*, ...), without commas")
        clean = [a.strip() for a in addrs]
        targets = sorted((await self._masters()).values())
        for addr in targets:
            await update_global_white_addr_config(self.admin, addr, ",".join(clean))
        log.warning("dashboard.acl_white_list_updated", user=user, addrs=clean, brokers=targets)
        return {"global_white_addrs": clean, "brokers": targets}

    # -- live samples -------------------------------------------------------------------

    async def sample(self, groups: list[str]) -> dict[str, Any]:
        """One live sample: TPS in/out per broker and lag per group (``sampler``)."""
        info: ClusterInfo = await self._cluster_info()
        masters = sorted((name, bd.broker_addrs[MixAll.MASTER_ID])
                         for name, bd in info.broker_addr_table.items()
                         if MixAll.MASTER_ID in bd.broker_addrs)
        runtimes = await self._each(self.admin.broker_runtime_info, [a for _n, a in masters])
        tps = {}
        for (name, _addr), rt in zip(masters, runtimes, strict=True):
            if isinstance(rt, dict):
                tps[name] = {"put_tps": first_tps(rt.get("putTps")),
                             "get_tps": first_tps(rt.get("getTransferedTps"))}
        stats = await self._each(self.admin.consume_stats, groups)
        lag = {g: s.compute_total_diff() for g, s in zip(groups, stats, strict=True)
               if isinstance(s, ConsumeStats)}
        return {"brokers": tps, "lag": lag}


def _is_system_group(group: str) -> bool:
    return group in _SYSTEM_GROUPS or MixAll.is_sys_consumer_group(group)


_SYSTEM_GROUPS = frozenset({
    MixAll.DEFAULT_CONSUMER_GROUP, MixAll.TOOLS_CONSUMER_GROUP, MixAll.FILTERSRV_CONSUMER_GROUP,
    MixAll.MONITOR_CONSUMER_GROUP, MixAll.SELF_TEST_CONSUMER_GROUP, MixAll.ONS_HTTP_PROXY_GROUP,
    MixAll.CID_ONSAPI_PERMISSION_GROUP, MixAll.CID_ONSAPI_OWNER_GROUP,
    MixAll.CID_ONSAPI_PULL_GROUP, MixAll.DEFAULT_PRODUCER_GROUP,
    MixAll.CLIENT_INNER_PRODUCER_GROUP, MixAll.SELF_TEST_PRODUCER_GROUP,
})


_ACL_PERMS = ("DENY", "PUB", "SUB", "PUB|SUB")

# Settable fields of SubscriptionGroupConfig: bool, or the (low, high) range of an int.
_GROUP_SETTINGS: dict[str, Any] = {
    "consume_enable": bool, "consume_from_min_enable": bool, "consume_broadcast_enable": bool,
    "notify_consumer_ids_changed_enable": bool, "retry_queue_nums": (0, 64),
    "retry_max_times": (-1, 1000), "broker_id": (0, 1024),
    "which_broker_when_consume_slowly": (0, 1024),
}


def _group_config_view(config: SubscriptionGroupConfig) -> dict[str, Any]:
    return {k: getattr(config, k) for k in ("group_name", *sorted(_GROUP_SETTINGS))}


def _perm_text(perm: int) -> str:
    return ("R" if Perm.readable(perm) else "-") + ("W" if Perm.writeable(perm) else "-")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MQBrokerError):
        return f"CODE: {exc.code} DESC: {exc.remark}"
    return f"{type(exc).__name__}: {exc}"
