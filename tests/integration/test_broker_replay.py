"""Replay the captured Java 4.9.7 client -> broker conversations against our broker.

The vectors (``tests/data/vectors/frames.jsonl``, README there) hold every frame a stock
Apache RocketMQ 4.9.7 client, ``mqadmin`` and broker exchanged. This module starts a real
``mqnamesrv`` + ``mqbroker`` on an empty store (like the capture's fresh broker), opens one
TCP connection per captured client stream, sends the captured request frames (the exact
bytes, both serialize types, unless the translation table below rewrites a field) in
captured order and compares every answer of ours with the
Java broker's captured answer (docs/PROTOCOL.md 2-6). It is our strongest evidence that stock
Java clients work against our broker.

Ordering (the causal rule). Frames are walked in capture order. A client frame is sent
as soon as it is reached; a captured broker frame (a response, or a broker-initiated
request such as NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
GET_CONSUMER_RUNNING_INFO, PUSH_REPLY_MESSAGE_TO_CLIENT) is a point where we wait for our
broker's counterpart, because every later client frame was sent after the Java client had
seen it. Held pulls therefore take as long as they did in the capture: the delay, retry
and transaction scenarios wait for the broker's own timers, and ``idle_consumer`` waits
once for the 15 s PULL_NOT_FOUND (unavoidable: that answer is what is compared). Broker
requests are answered with the Java client's captured answer frame, re-stamped with our
broker's opaque.

Harness fill-in sends. ``harness_json``/``harness_rocketmq`` are deduplicated in the
vectors: of 40 sends per run only 10 were kept. The push consumer's first pulls hold all 40
stored records, so the 30 missing sends are rebuilt from them (same queue, body, born
timestamp (shifted like any send's) and properties; the stored ``CLUSTER`` dropped and the
client's ``WAIT=true`` restored; the header copied from a kept send of the same kind) and
sent at their place in commit-log order. The store then holds exactly what the Java broker held, so queue offsets
and pull answers compare as captured, and every send answer's ``queueOffset`` proves it.

Translation table (``Translation``): requests that name broker state are rewritten to our
values, each rewrite listed there. Commit-log offsets are mapped through offsets both
brokers reported for the same message (send answers' msgId, CHECK_TRANSACTION_STATE,
records of pull/query/view answers matched by UNIQ_KEY).

Tolerated differences (each explained where it is applied): store/born hosts, ports and
store timestamps; ACL ``Signature`` fields are not re-signed after a rewrite (ACL is off);
SUBSCRIPTION_NOT_LATEST that raced a heartbeat sent earlier on the same connection (the
Java broker runs heartbeats and pulls on different thread pools); commit-log offsets that
moved because the Java broker stored a oneway END_TRANSACTION's records after the next
send (translated, not compared); live counters in GET_BROKER_RUNTIME_INFO (key set
compared); GET_BROKER_CONFIG reports our options, a subset of upstream's (JVM thread pools,
Netty, HA, DLedger... have no counterpart); a properties string in a header is compared as
a map; the broker is not restarted between captures 1 and 2 (nothing replayed depends on
the restart).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.protocol import bodies
from aiorocketmq.protocol.bodies import string_to_properties
from aiorocketmq.protocol.codes import RequestCode, ResponseCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.fastjson import ObjectKey, loads
from aiorocketmq.protocol.frame import FrameDecoder
from aiorocketmq.protocol.javautil import java_hashmap_order
from aiorocketmq.protocol.message import (
    MessageExt,
    decode_messages,
    decode_offset_msg_id,
    decode_properties,
    encode_properties,
)
from tests.procs import ServerProcess, broker_process, namesrv_process
from tests.vectors import body_bytes, frame_bytes, load_frames

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CLIENT_TO_BROKER = "client->broker"
BROKER_TO_CLIENT = "broker->client"

# Every scenario with client <-> broker traffic, in capture order. Checked against the
# vectors so that a new capture cannot silently go unreplayed.
SCENARIOS = (
    "harness_json", "harness_rocketmq", "props", "compress", "batch", "delay", "sendback",
    "orderly", "tx", "misc", "props_rocketmq", "mqadmin_updateTopic", "mqadmin_topicRoute",
    "mqadmin_clusterList", "mqadmin_consumerProgress", "mqadmin_queryMsgById",
    "mqadmin_queryMsgByKey", "mqadmin_queryMsgByUniqueKey", "mqadmin_topicStatus",
    "mqadmin_brokerStatus", "mqadmin_getBrokerConfig", "mqadmin_updateSubGroup",
    "mqadmin_deleteTopic", "idle_consumer", "mqadmin_consumerConnection",
    "mqadmin_consumerStatus", "reply",
)
DEDUPLICATED = ("harness_json", "harness_rocketmq")

# The capture's broker.conf beyond our defaults (vectors README, "How the frames were
# obtained", and the GET_BROKER_CONFIG answer, frame 1089): the transaction check runs
# every 5 s on half messages older than 3 s; retention settings as captured. The index
# sizes are the stock defaults the capture reports, which tests.procs shrinks for other tests.
BROKER_CONF = {"transactionCheckInterval": "5000", "transactionTimeOut": "3000",
               "diskMaxUsedSpaceRatio": "95", "fileReservedTime": "1",
               "maxHashSlotNum": "5000000", "maxIndexNum": "20000000"}

FILL_IN_OPAQUE_BASE = 1 << 30  # above every captured opaque: no clash on a stream
SLACK = 10.0  # seconds we allow beyond the captured delay of an answer

# Ext fields whose values depend on clocks, addresses or ids, per request code of the
# request they answer (or of the broker request). Key presence is still compared.
VOLATILE_EXT: dict[int, frozenset[str]] = {
    RequestCode.GET_EARLIEST_MSG_STORETIME: frozenset({"timestamp"}),  # our store clock
    RequestCode.QUERY_MESSAGE: frozenset({"indexLastUpdateTimestamp"}),
    RequestCode.GET_BROKER_CONFIG: frozenset({"version"}),  # DataVersion: start time
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: frozenset({"bornHost", "storeHost",
                                                         "storeTimestamp"}),
}
# Ext fields holding an offset message id or a commit-log offset: compared through the
# translation table instead of literally.
MSG_ID_EXT = frozenset({"msgId", "offsetMsgId"})
PHYS_EXT = frozenset({"commitLogOffset", "indexLastUpdatePhyoffset"})

# JSON body keys whose values are volatile, per request code (key presence compared).
VOLATILE_JSON: dict[int, frozenset[str]] = {
    RequestCode.GET_CONSUMER_CONNECTION_LIST: frozenset({"clientAddr"}),
    RequestCode.GET_CONSUME_STATS: frozenset({"lastTimestamp", "consumeTps"}),
    RequestCode.GET_TOPIC_STATS_INFO: frozenset({"lastUpdateTimestamp"}),
}
# GET_BROKER_RUNTIME_INFO: values are live counters, rates, times and paths, so the key
# set is compared, with the store path folded out of ``commitLogDiskRatio_<path>``; the
# delay-level progress ``scheduleMessageOffset_<level>`` is deterministic and compared.
RUNTIME_INFO_PATH_KEY = "commitLogDiskRatio_"
RUNTIME_INFO_EXACT = "scheduleMessageOffset_"

# GET_BROKER_CONFIG (Java properties text). Upstream dumps every field of BrokerConfig,
# NettyServerConfig, NettyClientConfig and MessageStoreConfig; most describe JVM thread
# pools, Netty, HA, DLedger, LMQ or the transient store pool, which an asyncio broker
# does not have. Documented behaviour asserted instead of the same key set: every key we
# report is upstream's spelling (or one of our own options below), with upstream's value
# unless it names this test's environment (addresses, ports, paths, file sizes).
OUR_CONFIG_KEYS = frozenset({
    "maxSuspendedPulls", "maxSuspendedPullsPerQueue",  # bounds on parked pulls (DESIGN)
    "metricsPort", "slowRequestMillis",  # Prometheus endpoint, slow-request log (server/metrics)
    # upstream reads these as -Drocketmq.broker.<key> system properties, ours as config
    "diskSpaceWarningLevelRatio", "diskSpaceCleanForciblyRatio",
    # 5.x timer messages (server/store/timer), upstream 5.3.3's keys and defaults
    "timerWheelEnable", "timerMaxDelaySec", "timerPrecisionMs", "timerRollWindowSlot",
    "timerCongestNumEachSlot", "timerFlushIntervalMs", "mappedFileSizeTimerLog",
    # DLedgerConfig's batch-push switch (server/store/dledger), which 4.9.7's broker does not read
    "enableBatchPush",
})
ENVIRONMENT_CONFIG_KEYS = frozenset({
    "namesrvAddr", "listenPort", "storePathRootDir", "storePathCommitLog", "rocketmqHome",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
})

BODY_CLASSES: dict[int, type[Any]] = {
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: bodies.ConsumerListBody,
    RequestCode.GET_BROKER_RUNTIME_INFO: bodies.KVTable,
    RequestCode.GET_CONSUME_STATS: bodies.ConsumeStats,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: bodies.GroupList,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: bodies.ConsumerConnection,
    RequestCode.GET_TOPIC_STATS_INFO: bodies.TopicStatsTable,
    RequestCode.LOCK_BATCH_MQ: bodies.LockBatchResponseBody,
    RequestCode.GET_CONSUMER_RUNNING_INFO: bodies.ConsumerRunningInfo,
}

# Sends whose header field ``g`` is the client's bornTimestamp.
BORN_TIMESTAMP_SENDS = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                                  RequestCode.SEND_REPLY_MESSAGE_V2})

# Stored-record properties that name broker addresses (offset msg ids): translated.
MSG_ID_PROPERTIES = frozenset({"ORIGIN_MESSAGE_ID"})
# Message properties holding the broker's clock (PUSH_REPLY_MESSAGE_TO_CLIENT).
VOLATILE_PROPERTIES = frozenset({"PUSH_REPLY_TIME"})


# -- results ------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Diff:
    """One difference between the captured Java answer and ours."""

    scenario: str
    frames: str  # captured frame ids, e.g. "request 54 / answer 59"
    code: str  # request code name
    what: str  # what differs: expected vs ours

    def __str__(self) -> str:
        return f"[{self.scenario}] {self.code} ({self.frames}): {self.what}"


@dataclasses.dataclass(slots=True)
class ReplayResult:
    diffs: list[Diff]
    compared: Counter[str]  # scenario -> number of captured broker frames compared
    expected: Counter[str]  # scenario -> number of captured broker frames
    fill_ins: dict[str, int]  # scenario -> number of rebuilt sends
    notes: list[str]
    elapsed: float


# -- the translation table ----------------------------------------------------------------


class Translation:
    """Captured broker state -> ours, and the request rewrites that use it.

    Rewrites (request code: field <- source):

    * VIEW_MESSAGE_BY_ID ``offset``, CONSUMER_SEND_MSG_BACK ``offset``: commit-log offset
      through ``phys``;
    * END_TRANSACTION after a send: ``commitLogOffset`` <- our half send's msgId offset,
      ``tranStateTableOffset`` <- our half send's ``queueOffset`` (keyed by UNIQ_KEY);
    * END_TRANSACTION answering a check (``fromTransactionCheck=true``): both offsets <- our
      CHECK_TRANSACTION_STATE for that UNIQ_KEY (it names the re-appended half copy);
    * SEARCH_OFFSET_BY_TIMESTAMP ``timestamp`` and the sends' ``bornTimestamp`` (``g``):
      shifted by the scenario's clock delta (our clock - capture clock when the scenario's
      first frame is sent), since the Java client read them off its own clock. The broker
      ages half messages by born time (transaction check after ``transactionTimeOut``,
      discard after ``fileReservedTime``), so unshifted born times would make the replay
      depend on how long ago the capture was taken. ``born`` records captured -> ours and
      is how stored records' and PUSH_REPLY's born times are compared.

    ``phys`` (captured commit-log offset -> ours) is filled from send answers (msgId, also
    comma-separated batch ids), CHECK_TRANSACTION_STATE and records of pull/query/view
    answers matched by UNIQ_KEY; a conflicting second value is a difference itself.
    """

    def __init__(self) -> None:
        self.phys: dict[int, int] = {}
        self.half_sends: dict[str, tuple[int, int]] = {}  # UNIQ_KEY -> (our phys, our qoff)
        self.checks: dict[str, tuple[int, int]] = {}  # UNIQ_KEY -> (our phys, our qoff)
        self.born: dict[int, int] = {}  # captured bornTimestamp -> ours

    def learn_phys(self, captured: int, ours: int) -> str | None:
        known = self.phys.setdefault(captured, ours)
        if known != ours:
            return f"commit-log offset {captured} maps to ours {known} and {ours}"
        return None

    def shift_born(self, captured: int, clock_delta_ms: int) -> int:
        return self.born.setdefault(captured, captured + clock_delta_ms)

    def rewrite(self, f: dict[str, Any], clock_delta_ms: int) -> tuple[dict[str, str], list[str]]:
        """(ext-field changes for captured request ``f``, problems)."""
        ext = f["header"].get("extFields") or {}
        code = f["code"]
        changes: dict[str, str] = {}
        problems: list[str] = []

        def phys(key: str) -> None:
            cap = int(ext[key])
            if cap in self.phys:
                changes[key] = str(self.phys[cap])
            else:
                problems.append(f"no translation for commit-log offset {key}={cap}")

        if code in (RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.CONSUMER_SEND_MSG_BACK):
            phys("offset")
        elif code == RequestCode.END_TRANSACTION:
            uniq = ext["msgId"]
            table = self.checks if ext.get("fromTransactionCheck") == "true" else self.half_sends
            if uniq in table:
                our_phys, our_qoff = table[uniq]
                changes["commitLogOffset"] = str(our_phys)
                changes["tranStateTableOffset"] = str(our_qoff)
            else:
                problems.append(f"no half message / check of ours for msgId {uniq}")
        elif code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            changes["timestamp"] = str(int(ext["timestamp"]) + clock_delta_ms)
        elif code in BORN_TIMESTAMP_SENDS:
            changes["g"] = str(self.shift_born(int(ext["g"]), clock_delta_ms))
        return {k: v for k, v in changes.items() if ext.get(k) != v}, problems


# -- harness fill-in sends ----------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class FillIn:
    """A send rebuilt from a stored record the deduplicated vectors dropped."""

    after: int  # captured frame id it follows
    seq: int
    template: dict[str, Any]  # the kept send whose header it copies
    stream: int
    scenario: str
    command: RemotingCommand
    record: MessageExt


def _uniq(props: dict[str, str]) -> str:
    return props.get("UNIQ_KEY", "")


def build_fill_ins(frames: list[dict[str, Any]], scenario: str) -> list[FillIn]:
    """The sends of ``scenario`` that deduplication dropped, rebuilt from pulled records."""
    sends = [f for f in frames if f["scenario"] == scenario and f["conn"] == CLIENT_TO_BROKER
             and f["code"] == RequestCode.SEND_MESSAGE_V2 and not f["is_response"]]
    topics = {f["header"]["extFields"]["b"] for f in sends}
    assert len(topics) == 1, f"{scenario}: one topic expected, got {topics}"
    topic = topics.pop()
    kept = {_uniq(decode_properties(f["header"]["extFields"]["i"])): f for f in sends}
    records: dict[str, MessageExt] = {}
    for f in frames:
        if (f["scenario"] == scenario and f["conn"] == BROKER_TO_CLIENT and f["is_response"]
                and f.get("request_code") == RequestCode.PULL_MESSAGE
                and f["body_format"] == "stored-messages"):
            for m in decode_messages(body_bytes(f["id"])):
                if m.topic == topic:
                    records.setdefault(_uniq(m.properties), m)
    # The rebuilt store is only faithful if every queue is covered from offset 0 up.
    by_queue: dict[int, list[int]] = defaultdict(list)
    for m in records.values():
        by_queue[m.queue_id].append(m.queue_offset)
    for q, offs in by_queue.items():
        assert sorted(offs) == list(range(len(offs))), f"{scenario}: queue {q} has gaps {offs}"
    assert set(kept) <= set(records), f"{scenario}: a kept send was never pulled"

    anchors = sorted((records[u].commit_log_offset, f) for u, f in kept.items())
    out: list[FillIn] = []
    for m in sorted(records.values(), key=lambda r: r.commit_log_offset):
        if _uniq(m.properties) in kept:
            continue
        anchor = max((a for a in anchors if a[0] < m.commit_log_offset), key=lambda a: a[0])[1]
        oneway = "oneway" in m.properties.get("KEYS", "")
        template = next(f for f in sends if f["oneway"] == oneway)
        props = {k: v for k, v in m.properties.items() if k != "CLUSTER"}
        props["WAIT"] = "true"  # the Java broker strips the client's WAIT when storing
        # The Java client writes its properties HashMap in hash order.
        ordered = {k: props[k] for k in java_hashmap_order(props)}
        ext = dict(template["header"]["extFields"])
        ext.update(e=str(m.queue_id), g=str(m.born_timestamp), i=encode_properties(ordered))
        cmd = RemotingCommand(
            RequestCode.SEND_MESSAGE_V2, version=template["header"]["version"],
            opaque=FILL_IN_OPAQUE_BASE + len(out), flag=template["flag"], ext_fields=ext,
            body=m.body,
            serialize_type=SerializeType[template["serialize"]])
        after = anchor.get("response_id", anchor["id"])
        out.append(FillIn(after, len(out), template, template["stream"], scenario, cmd, m))
    return out


# -- one replayed connection --------------------------------------------------------------


class StreamConn:
    """Our connection standing in for one captured TCP stream."""

    def __init__(self, stream: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.stream = stream
        self.reader = reader
        self.writer = writer
        self.futures: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.broker_requests: list[RemotingCommand] = []
        self.stray: list[RemotingCommand] = []  # answers nobody waits for
        self.changed = asyncio.Event()
        self.read_task = asyncio.get_running_loop().create_task(self._read_routine())

    async def _read_routine(self) -> None:
        decoder = FrameDecoder()
        while data := await self.reader.read(65536):
            for cmd in decoder.feed_and_decode(data):
                if cmd.is_response:
                    fut = self.futures.get(cmd.opaque)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                    else:
                        self.stray.append(cmd)
                else:
                    self.broker_requests.append(cmd)
                self.changed.set()

    def expect(self, opaque: int) -> asyncio.Future[RemotingCommand]:
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self.futures[opaque] = fut
        return fut

    async def broker_request(self, code: int, index: int, timeout: float) -> RemotingCommand | None:
        """Our broker's ``index``-th request of ``code`` on this connection, or None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            mine = [c for c in self.broker_requests if c.code == code]
            if len(mine) > index:
                return mine[index]
            remaining = deadline - loop.time()
            if remaining <= 0 or self.read_task.done():
                return None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                pass

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass
        self.read_task.cancel()
        try:
            await self.read_task
        except (asyncio.CancelledError, ConnectionError):
            pass


# -- comparison helpers -------------------------------------------------------------------


def _ext(cmd_header: dict[str, Any] | None) -> dict[str, str]:
    return dict((cmd_header or {}).get("extFields") or {})


def _canon(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(sorted(f"{_canon(k)}:{_canon(v)}" for k, v in value.items())) + "}"
    if isinstance(value, (list, tuple)) and not isinstance(value, ObjectKey):
        return "[" + ",".join(sorted(_canon(v) for v in value)) + "]"
    if isinstance(value, ObjectKey):
        return _canon(value.as_dict())
    return repr(value)


def _flatten(value: Any, volatile: frozenset[str], path: str, out: dict[str, str]) -> None:
    """Path -> canonical leaf; lists are compared as multisets (Java writes sets in hash
    order), dict keys in ``volatile`` keep their presence but not their value."""
    if isinstance(value, dict):
        out[path + "{}"] = ",".join(sorted(_canon(k) for k in value))
        for k, v in value.items():
            key = _canon(k)
            if isinstance(k, str) and k in volatile:
                out[f"{path}.{key}"] = "<volatile>"
            else:
                _flatten(v, volatile, f"{path}.{key}", out)
    elif isinstance(value, list):
        out[path + "[]"] = str(len(value))
        for i, v in enumerate(sorted(value, key=_canon)):
            _flatten(v, volatile, f"{path}[{i}]", out)
    else:
        out[path] = _canon(value)


def compare_json(code: int, expected: bytes, ours: bytes) -> list[str]:
    problems: list[str] = []
    cls = BODY_CLASSES.get(code)
    if cls is not None:
        try:
            cls.decode(ours)
        except Exception as exc:  # noqa: BLE001 - reported as a difference
            problems.append(f"our body does not decode as {cls.__name__}: {exc!r}")
    exp_obj, our_obj = loads(expected), loads(ours)
    if code == RequestCode.GET_BROKER_RUNTIME_INFO:
        return problems + _compare_runtime_info(exp_obj["table"], our_obj.get("table", {}))
    volatile = VOLATILE_JSON.get(code, frozenset())
    a: dict[str, str] = {}
    b: dict[str, str] = {}
    _flatten(exp_obj, volatile, "$", a)
    _flatten(our_obj, volatile, "$", b)
    for path in sorted(set(a) | set(b)):
        if a.get(path) != b.get(path):
            problems.append(f"body {path}: expected {a.get(path)} ours {b.get(path)}")
            if len(problems) >= 6:
                break
    return problems


# Our broker serves 5.x timer messages and reports the timer store as a stock 5.3.3 broker
# does (AdminBrokerProcessor.prepareRuntimeInfo: these five keys always, zeros without a
# timer store); the captures are of a 4.9.7 broker, which has no timer store.
RUNTIME_INFO_5X_TIMER_KEYS = frozenset({"timerReadBehind", "timerOffsetBehind", "timerCongestNum",
                                        "timerEnqueueTps", "timerDequeueTps"})


def _compare_runtime_info(expected: dict[str, str], ours: dict[str, str]) -> list[str]:
    def fold(k: str) -> str:
        return RUNTIME_INFO_PATH_KEY + "<path>" if k.startswith(RUNTIME_INFO_PATH_KEY) else k

    exp_keys = {fold(k) for k in expected}
    our_keys = {fold(k) for k in ours} - (RUNTIME_INFO_5X_TIMER_KEYS - exp_keys)
    missing_timer = RUNTIME_INFO_5X_TIMER_KEYS - exp_keys - set(ours)
    if missing_timer:
        return [f"runtime info: 5.x timer keys missing {sorted(missing_timer)}"]
    problems = []
    if exp_keys != our_keys:
        problems.append(f"runtime info keys: missing {sorted(exp_keys - our_keys)}, "
                        f"extra {sorted(our_keys - exp_keys)}")
    for k, v in expected.items():
        if k.startswith(RUNTIME_INFO_EXACT) and ours.get(k) != v:
            problems.append(f"runtime info {k}: expected {v!r}, ours {ours.get(k)!r}")
    return problems


def compare_broker_config(expected: bytes, ours: bytes) -> list[str]:
    exp = string_to_properties(expected.decode("utf-8"))
    mine = string_to_properties(ours.decode("utf-8"))
    problems = []
    unknown = set(mine) - set(exp) - OUR_CONFIG_KEYS
    if unknown:
        problems.append(f"config keys upstream does not have: {sorted(unknown)}")
    for k in sorted(set(exp) & set(mine) - ENVIRONMENT_CONFIG_KEYS):
        if exp[k] != mine[k]:
            problems.append(f"config {k}: expected {exp[k]!r}, ours {mine[k]!r}")
    return problems


# -- the replay ---------------------------------------------------------------------------


class Replay:
    """Walks the captured conversation (see the module docstring) against ``broker_addr``."""

    def __init__(self, broker_addr: str) -> None:
        host, port = broker_addr.rsplit(":", 1)
        self.host = host
        self.port = int(port)
        self.frames = [f for f in load_frames()
                       if f["conn"] in (CLIENT_TO_BROKER, BROKER_TO_CLIENT)]
        self.by_id = {f["id"]: f for f in self.frames}
        self.translation = Translation()
        self.conns: dict[int, StreamConn] = {}
        self.sent: dict[int, tuple[asyncio.Future[RemotingCommand] | None, float]] = {}
        self.ours_for_broker_request: dict[int, RemotingCommand] = {}  # captured id -> ours
        self.race_pulls: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.diffs: list[Diff] = []
        self.notes: list[str] = []  # tolerated, timing-dependent outcomes worth a log line
        self.compared: Counter[str] = Counter()
        self.fill_ins: dict[str, int] = {}
        self.clock_delta_ms: dict[str, int] = {}  # scenario -> our clock - capture clock

    def delta(self, scenario: str, captured_ts: float) -> int:
        return self.clock_delta_ms.setdefault(
            scenario, int(time.time() * 1000) - int(captured_ts * 1000))

    # -- bookkeeping

    def diff(self, scenario: str, frames: str, code: int | str, what: str) -> None:
        name = code if isinstance(code, str) else _code_name(code)
        self.diffs.append(Diff(scenario, frames, name, what))

    async def conn(self, stream: int) -> StreamConn:
        c = self.conns.get(stream)
        if c is None:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            c = self.conns[stream] = StreamConn(stream, reader, writer)
        return c

    def steps(self) -> list[tuple[tuple[int, int], dict[str, Any] | FillIn]]:
        seq: list[tuple[tuple[int, int], dict[str, Any] | FillIn]] = [
            ((f["id"], 0), f) for f in self.frames]
        for scenario in DEDUPLICATED:
            fills = build_fill_ins(self.frames, scenario)
            self.fill_ins[scenario] = len(fills)
            seq += [((fi.after, 1 + fi.seq), fi) for fi in fills]
        seq.sort(key=lambda s: s[0])
        return seq

    # -- main loop

    async def run(self) -> None:
        steps = self.steps()
        last_of_stream = {}
        for i, (_, step) in enumerate(steps):
            last_of_stream[step.stream if isinstance(step, FillIn) else step["stream"]] = i
        closing_at = defaultdict(list)
        for stream, i in last_of_stream.items():
            closing_at[i].append(stream)
        for i, (_, step) in enumerate(steps):
            if isinstance(step, FillIn):
                await self.fill_in(step)
            elif step["conn"] == CLIENT_TO_BROKER and not step["is_response"]:
                await self.send_request(step)
            elif step["conn"] == CLIENT_TO_BROKER:
                await self.answer_broker_request(step)
            elif step["is_response"]:
                await self.check_response(step)
            else:
                await self.check_broker_request(step)
            for stream in closing_at.get(i, ()):
                await self.close_stream(stream)

    async def fill_in(self, fi: FillIn) -> None:
        c = await self.conn(fi.stream)
        oneway = fi.command.is_oneway
        assert fi.command.ext_fields is not None
        fi.command.ext_fields["g"] = str(self.translation.shift_born(
            fi.record.born_timestamp, self.delta(fi.scenario, self.by_id[fi.after]["ts"])))
        fut = None if oneway else c.expect(fi.command.opaque)
        c.writer.write(fi.command.encode())
        if fut is None:
            return
        try:
            ours = await asyncio.wait_for(fut, SLACK)
        except TimeoutError:
            self.diff(fi.scenario, f"fill-in {fi.seq} after {fi.after}", fi.command.code,
                      "no answer to a rebuilt send")
            return
        ext = ours.ext_fields or {}
        m = fi.record
        # Expected: the template send's captured answer with this record's queue and offset.
        template_answer = _ext(self.by_id[fi.template["response_id"]]["header"])
        expected = dict(template_answer, queueId=str(m.queue_id), queueOffset=str(m.queue_offset))
        del expected["msgId"]
        if (ours.code != ResponseCode.SUCCESS or set(ext) != set(template_answer)
                or any(ext.get(k) != v for k, v in expected.items())):
            self.diff(fi.scenario, f"fill-in {fi.seq} after {fi.after}", fi.command.code,
                      f"rebuilt send answered code {ours.code} ext {ext}, expected SUCCESS "
                      f"with {sorted(template_answer)} and {expected}")
            return
        problem = self.translation.learn_phys(
            m.commit_log_offset, decode_offset_msg_id(ext["msgId"])[1])
        if problem:
            self.diff(fi.scenario, f"fill-in {fi.seq}", fi.command.code, problem)

    async def send_request(self, f: dict[str, Any]) -> None:
        c = await self.conn(f["stream"])
        changes, problems = self.translation.rewrite(f, self.delta(f["scenario"], f["ts"]))
        for p in problems:
            self.diff(f["scenario"], f"request {f['id']}", f["code"], p)
        data = frame_bytes(f["id"])
        if changes:
            cmd = RemotingCommand.decode(data[4:])
            assert cmd.ext_fields is not None
            cmd.ext_fields.update(changes)
            data = cmd.encode()
        fut = None if f["oneway"] else c.expect(f["header"]["opaque"])
        self.sent[f["id"]] = (fut, f["ts"])
        c.writer.write(data)
        if self.is_racing_pull(f):
            assert fut is not None
            self.race_pulls[f["id"]] = fut

    def is_racing_pull(self, f: dict[str, Any]) -> bool:
        """A pull the Java broker answered SUBSCRIPTION_NOT_LATEST although the client had
        already sent a heartbeat with that subscription version on this connection.

        The Java broker runs HEART_BEAT and PULL_MESSAGE on different thread pools, so the
        pull can overtake the heartbeat (frames 77/78, 1144/1146). Ours may process them in
        order; then SUBSCRIPTION_NOT_LATEST is not due and the pull is served or held as a
        normal pull, which is what a Java broker answers when the race goes the other way.
        A pull sent *before* its heartbeat (e.g. frames 869/870) is not racing and must get
        SUBSCRIPTION_NOT_LATEST from us too.
        """
        resp = self.by_id.get(f.get("response_id", -1))
        if f["code"] != RequestCode.PULL_MESSAGE or resp is None:
            return False
        if resp["code"] != ResponseCode.SUBSCRIPTION_NOT_LATEST:
            return False
        ext = f["header"]["extFields"]
        topic, sub_version = ext["topic"], int(ext["subVersion"])
        for hb in self.frames:
            if (hb["stream"] == f["stream"] and hb["id"] < f["id"]
                    and hb["code"] == RequestCode.HEART_BEAT and not hb["is_response"]
                    and hb["conn"] == CLIENT_TO_BROKER):
                data = bodies.HeartbeatData.decode(body_bytes(hb["id"]))
                for cd in data.consumer_data_set:
                    for sd in cd.subscription_data_set:
                        if sd.topic == topic and sd.sub_version >= sub_version:
                            return True
        return False

    async def answer_broker_request(self, f: dict[str, Any]) -> None:
        """Send the Java client's captured answer to our broker's matching request."""
        ours = self.ours_for_broker_request.get(f["request_id"])
        if ours is None:
            self.diff(f["scenario"], f"answer {f['id']}", f.get("request_code", 0),
                      "cannot answer: our broker never sent the request")
            return
        cmd = RemotingCommand.decode(frame_bytes(f["id"])[4:])
        cmd.opaque = ours.opaque
        (await self.conn(f["stream"])).writer.write(cmd.encode())

    async def check_response(self, f: dict[str, Any]) -> None:
        req = self.by_id[f["request_id"]]
        ids = f"request {req['id']} / answer {f['id']}"
        self.compared[f["scenario"]] += 1
        if req["id"] in self.race_pulls:
            # Conditional comparison (see is_racing_pull): do not wait for a pull that ours
            # may legitimately hold; whatever ours answers is checked when the stream ends.
            return
        fut, _ = self.sent[req["id"]]
        assert fut is not None
        timeout = (f["ts"] - req["ts"]) + SLACK
        try:
            ours = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            self.diff(f["scenario"], ids, req["code"],
                      f"expected code {f['code_name']} within {timeout:.1f}s, ours: no answer")
            return
        for p in self.compare(req, f, ours):
            self.diff(f["scenario"], ids, req["code"], p)

    async def check_broker_request(self, f: dict[str, Any]) -> None:
        index = sum(1 for g in self.frames if g["stream"] == f["stream"]
                    and g["conn"] == BROKER_TO_CLIENT and not g["is_response"]
                    and g["code"] == f["code"] and g["id"] < f["id"])
        prev = max(g["ts"] for g in self.frames if g["id"] < f["id"])
        timeout = (f["ts"] - prev) + SLACK
        self.compared[f["scenario"]] += 1
        c = await self.conn(f["stream"])
        ours = await c.broker_request(f["code"], index, timeout)
        if ours is None:
            self.diff(f["scenario"], f"broker request {f['id']}", f["code"],
                      f"expected on stream {f['stream']} within {timeout:.1f}s, ours: none")
            return
        self.ours_for_broker_request[f["id"]] = ours
        if f["code"] == RequestCode.CHECK_TRANSACTION_STATE:
            ext = ours.ext_fields or {}
            self.translation.checks[ext.get("msgId", "")] = (
                int(ext.get("commitLogOffset", "-1")), int(ext.get("tranStateTableOffset", "-1")))
            cap = _ext(f["header"])
            problem = self.translation.learn_phys(int(cap["commitLogOffset"]),
                                                  int(ext.get("commitLogOffset", "-1")))
            if problem:
                self.diff(f["scenario"], f"broker request {f['id']}", f["code"], problem)
        for p in self.compare(None, f, ours):
            self.diff(f["scenario"], f"broker request {f['id']}", f["code"], p)

    async def close_stream(self, stream: int) -> None:
        c = self.conns.pop(stream, None)
        if c is None:
            return
        mine = [f for f in self.frames if f["stream"] == stream]
        scenario = mine[0]["scenario"]
        # Requests the Java broker never answered while the client lived (held pulls):
        # ours must not have answered them either (answers not waited for are here now).
        for f in mine:
            if f["conn"] != CLIENT_TO_BROKER or f["is_response"] or f["oneway"]:
                continue
            fut, _ = self.sent.get(f["id"], (None, 0.0))
            if fut is None or not fut.done():
                continue
            ours = fut.result()
            if f["id"] in self.race_pulls:
                answer = self.by_id[f["response_id"]]
                self.notes.append(f"racing pull {f['id']} ({scenario}): ours answered "
                                  f"{_code_name_response(ours.code)}")
                if ours.code == answer["code"]:
                    for p in self.compare(f, answer, ours):
                        self.diff(scenario, f"request {f['id']} / answer {answer['id']}",
                                  f["code"], p)
                elif ours.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND):
                    self.diff(scenario, f"request {f['id']}", f["code"],
                              f"racing pull answered {_code_name_response(ours.code)}")
            elif "response_id" not in f:
                self.diff(scenario, f"request {f['id']}", f["code"],
                          f"captured: never answered (held); ours answered "
                          f"{_code_name_response(ours.code)} {ours.remark!r}")
        for f in mine:
            if f["id"] in self.race_pulls and not self.race_pulls[f["id"]].done():
                self.notes.append(f"racing pull {f['id']} ({scenario}): ours held it")
        # Broker-initiated requests beyond those captured on this connection.
        expected = Counter(f["code"] for f in mine
                           if f["conn"] == BROKER_TO_CLIENT and not f["is_response"])
        got = Counter(cmd.code for cmd in c.broker_requests)
        for code in set(expected) | set(got):
            if got[code] > expected[code]:
                self.diff(scenario, f"stream {stream}", code,
                          f"captured {expected[code]} broker request(s), ours sent {got[code]}")
        for cmd in c.stray:
            self.diff(scenario, f"stream {stream}", "?", f"unexpected answer {cmd!r}")
        await c.close()

    async def shutdown(self) -> None:
        for stream in list(self.conns):
            await self.close_stream(stream)

    # -- answer comparison

    def compare(self, req: dict[str, Any] | None, exp: dict[str, Any],
                ours: RemotingCommand) -> list[str]:
        """Differences between captured frame ``exp`` and our command (response or broker
        request). ``req`` is the captured request ``exp`` answers, None for broker requests."""
        problems: list[str] = []
        code_key = req["code"] if req is not None else exp["code"]
        header = exp["header"]
        if ours.code != exp["code"]:
            problems.append(f"code: expected {exp['code']} {exp['code_name']}, ours "
                            f"{ours.code} {_code_name_response(ours.code)} ({ours.remark!r})")
            return problems
        if SerializeType[exp["serialize"]] != ours.serialize_type:
            problems.append(f"serialize type: expected {exp['serialize']}, ours "
                            f"{SerializeType(ours.serialize_type).name}")
        if bool(exp["oneway"]) != ours.is_oneway:
            problems.append(f"oneway flag: expected {exp['oneway']}, ours {ours.is_oneway}")
        # Remarks are compared exactly, absent ones included: the Java broker's quirks
        # ('not set any response code' on a success, FOUND on pulls) are reproduced.
        remark = header.get("remark")
        if ours.remark != remark:
            problems.append(f"remark: expected {remark!r}, ours {ours.remark!r}")
        # JSON tells a command without custom header (no extFields key) from an empty one
        # ({}), and the Java broker writes both (docs/PROTOCOL.md 2.2); ROCKETMQ cannot.
        if exp["serialize"] == "JSON" and ("extFields" in header) != (ours.ext_fields is not None):
            problems.append(f"extFields: expected {'{}' if 'extFields' in header else 'absent'}, "
                            f"ours {'absent' if ours.ext_fields is None else ours.ext_fields}")
        exp_ext, our_ext = _ext(header), dict(ours.ext_fields or {})
        if set(exp_ext) != set(our_ext):
            problems.append(f"extFields keys: expected {sorted(exp_ext)}, ours {sorted(our_ext)}")
        volatile = VOLATILE_EXT.get(code_key, frozenset())
        for key in sorted(set(exp_ext) & set(our_ext)):
            a, b = exp_ext[key], our_ext[key]
            if key in volatile or a == b:
                continue
            if key in MSG_ID_EXT or key in PHYS_EXT:
                p = self.compare_offsets(key, a, b)
                if p:
                    problems.append(p)
                continue
            if key == "bornTimestamp":
                if self.translation.born.get(int(a)) != int(b):
                    problems.append(f"extFields[{key}]: captured {a} sent as "
                                    f"{self.translation.born.get(int(a))}, ours {b}")
                continue
            if key == "properties":
                # A properties string is a map to its Java reader (the Java broker writes
                # it in HashMap order, ours in insertion order).
                problems += _compare_properties(f"extFields[{key}]", decode_properties(a),
                                                decode_properties(b))
                continue
            problems.append(f"extFields[{key}]: expected {a!r}, ours {b!r}")
        problems += self.compare_body(code_key, exp, ours)
        if (req is not None and code_key in (RequestCode.SEND_MESSAGE_V2,
                                             RequestCode.SEND_MESSAGE)
                and ours.code == ResponseCode.SUCCESS):
            props = decode_properties(_ext(req["header"]).get("i", ""))
            if props.get("TRAN_MSG") == "true":
                self.translation.half_sends[props["UNIQ_KEY"]] = (
                    decode_offset_msg_id(our_ext["msgId"])[1], int(our_ext["queueOffset"]))
        return problems

    def compare_offsets(self, key: str, a: str, b: str) -> str | None:
        if key in MSG_ID_EXT:
            caps, ours = a.split(","), b.split(",")
            if len(caps) != len(ours):
                return f"extFields[{key}]: expected {len(caps)} ids, ours {len(ours)}"
            for cap_id, our_id in zip(caps, ours, strict=True):
                cap_addr, cap_off = decode_offset_msg_id(cap_id)
                our_addr, our_off = decode_offset_msg_id(our_id)
                if our_addr != f"{self.host}:{self.port}":
                    return f"extFields[{key}]: {our_id} names {our_addr}, not our broker"
                p = self.translation.learn_phys(cap_off, our_off)
                if p:
                    return f"extFields[{key}]: {p}"
            return None
        p = self.translation.learn_phys(int(a), int(b))
        return f"extFields[{key}]: {p}" if p else None

    def compare_body(self, code: int, exp: dict[str, Any], ours: RemotingCommand) -> list[str]:
        expected = body_bytes(exp["id"])
        mine = bytes(ours.body or b"")
        kind = exp["body_format"]
        if not expected:
            return [] if not mine else [f"body: expected none, ours {len(mine)} bytes"]
        if not mine:
            return [f"body: expected {kind} ({len(expected)} bytes), ours none"]
        if kind == "stored-messages":
            return self.compare_records(decode_messages(expected), decode_messages(mine))
        if kind == "json-text":
            return compare_json(code, expected, mine)
        if kind == "text" and code == RequestCode.GET_BROKER_CONFIG:
            return compare_broker_config(expected, mine)
        if kind == "text":
            a = set(string_to_properties(expected.decode("utf-8")))
            b = set(string_to_properties(mine.decode("utf-8")))
            if a != b:
                return [f"properties body keys: missing {sorted(a - b)}, extra {sorted(b - a)}"]
            return []
        return [] if expected == mine else [f"{kind} body differs"]

    def compare_records(self, expected: list[MessageExt], mine: list[MessageExt]) -> list[str]:
        if len(expected) != len(mine):
            return [f"records: expected {len(expected)}, ours {len(mine)} "
                    f"(expected keys {[m.properties.get('KEYS') for m in expected]}, ours "
                    f"{[m.properties.get('KEYS') for m in mine]})"]
        problems: list[str] = []
        for i, (a, b) in enumerate(zip(expected, mine, strict=True)):
            where = f"record {i} ({a.topic}/{a.queue_id}/{a.queue_offset})"
            for field in ("topic", "queue_id", "queue_offset", "flag", "sys_flag",
                          "reconsume_times", "body", "body_crc", "store_size"):
                va, vb = getattr(a, field), getattr(b, field)
                if va != vb:
                    problems.append(f"{where} {field}: expected {_short(va)}, ours {_short(vb)}")
            born = self.translation.born.get(a.born_timestamp)
            if born != b.born_timestamp:
                problems.append(f"{where} born timestamp: captured {a.born_timestamp} sent as "
                                f"{born}, ours {b.born_timestamp}")
            if _uniq(a.properties) != _uniq(b.properties):
                problems.append(f"{where} UNIQ_KEY: expected {_uniq(a.properties)}, "
                                f"ours {_uniq(b.properties)}")
                continue
            p = self.translation.learn_phys(a.commit_log_offset, b.commit_log_offset)
            if p:
                problems.append(f"{where}: {p}")
            if a.prepared_transaction_offset or b.prepared_transaction_offset:
                p = self.translation.learn_phys(a.prepared_transaction_offset,
                                                b.prepared_transaction_offset)
                if p:
                    problems.append(f"{where} prepared transaction offset: {p}")
            pa, pb = dict(a.properties), dict(b.properties)
            if set(pa) != set(pb):
                problems.append(f"{where} property keys: missing {sorted(set(pa) - set(pb))}, "
                                f"extra {sorted(set(pb) - set(pa))}")
            for key in sorted(set(pa) & set(pb)):
                if pa[key] == pb[key]:
                    continue
                if key in MSG_ID_PROPERTIES:
                    p = self.compare_offsets("msgId", pa[key], pb[key])
                    if p:
                        problems.append(f"{where} property {key}: {p}")
                    continue
                problems.append(f"{where} property {key}: expected {pa[key]!r}, ours {pb[key]!r}")
        return problems


def _compare_properties(where: str, a: dict[str, str], b: dict[str, str]) -> list[str]:
    problems = []
    if set(a) != set(b):
        problems.append(f"{where} keys: missing {sorted(set(a) - set(b))}, "
                        f"extra {sorted(set(b) - set(a))}")
    for key in sorted(set(a) & set(b) - VOLATILE_PROPERTIES):
        if a[key] != b[key]:
            problems.append(f"{where}[{key}]: expected {a[key]!r}, ours {b[key]!r}")
    return problems


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def _code_name_response(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


# -- fixture and tests --------------------------------------------------------------------


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplayResult]:
    tmp: Path = tmp_path_factory.mktemp("replay")
    started: list[ServerProcess] = []
    try:
        namesrv = namesrv_process(tmp).start()
        started.append(namesrv)
        broker = broker_process(tmp, namesrv.address, name="broker-a", conf=BROKER_CONF)
        started.append(broker)
        broker.start()

        async def run() -> Replay:
            r = Replay(broker.address)
            try:
                await r.run()
            finally:
                await r.shutdown()
            return r

        t0 = time.monotonic()
        r = asyncio.run(run())
        expected = Counter(f["scenario"] for f in r.frames if f["conn"] == BROKER_TO_CLIENT)
        moved = {k: v for k, v in r.translation.phys.items() if k != v}
        r.notes.append(f"commit-log offsets mapped: {len(r.translation.phys)}, "
                       f"differing from the capture: {moved}")
        result = ReplayResult(r.diffs, r.compared, expected, r.fill_ins, r.notes,
                              time.monotonic() - t0)
        print(f"replay: {result.elapsed:.1f}s, fill-ins {result.fill_ins}")
        print("\n".join(result.notes))
        yield result
    finally:
        for proc in reversed(started):
            proc.stop()
            print(f"---- {proc.log_path} ----\n{proc.log_tail(100)}")


def test_every_broker_scenario_is_replayed() -> None:
    found = []
    for f in load_frames():
        if f["conn"] in (CLIENT_TO_BROKER, BROKER_TO_CLIENT) and f["scenario"] not in found:
            found.append(f["scenario"])
    assert tuple(found) == SCENARIOS


def test_fill_ins_rebuild_the_deduplicated_harness_runs() -> None:
    frames = [f for f in load_frames() if f["conn"] in (CLIENT_TO_BROKER, BROKER_TO_CLIENT)]
    for scenario in DEDUPLICATED:
        fills = build_fill_ins(frames, scenario)
        kept = [f for f in frames if f["scenario"] == scenario
                and f["code"] == RequestCode.SEND_MESSAGE_V2 and not f["is_response"]]
        # 20 sync + 10 async + 10 oneway sends per run (vectors README).
        assert len(fills) + len(kept) == 40
        assert sum(fi.command.is_oneway for fi in fills) + sum(f["oneway"] for f in kept) == 10


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_replay_matches_capture(replay: ReplayResult, scenario: str) -> None:
    diffs = [d for d in replay.diffs if d.scenario == scenario]
    assert replay.compared[scenario] == replay.expected[scenario], (
        f"{scenario}: compared {replay.compared[scenario]} of "
        f"{replay.expected[scenario]} captured broker frames")
    assert not diffs, f"{len(diffs)} difference(s) in {scenario}:\n" + "\n".join(
        map(str, diffs))
