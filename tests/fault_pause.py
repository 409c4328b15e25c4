"""A broker paused (SIGSTOP) under load, then resumed (SIGCONT): the scenario both process
suites run, ``tests/integration/test_fault_pause.py`` on our servers and
``tests/interop/test_stock_fault_pause.py`` on stock RocketMQ 4.9.7's, with our clients.

Two broker groups serve ``PauseTopic`` (4 queues each). Our ``Producer`` sends sync, one
message after another (keys ``p-<n>``; default 3 s timeout, 2 retries, latency fault
strategy off as upstream), and our ``PushConsumer`` consumes from the first offset. Once
both brokers have stored and delivered messages, one broker is stopped for
:data:`PAUSE_SECONDS`; meanwhile

* the producer's sends routed to it time out (their connections are closed: a sync
  timeout closes the socket, ``clientCloseSocketIfTimeout``) and the producer goes on,
  the next send dialling a new connection the kernel accepts for the stopped process;
* :data:`PILED` raw sends (keys ``piled-<n>``) are written to it by a caller that waits
  as long as it takes, and :data:`PILED` more (``abandoned-<n>``) by one that gives up
  after 1 s and closes its connection;
* a probe pulls (long polling) queue 0 at its end with a caller that gives up after 2 s,
  then pulls the same again on the same connection, waiting;
* the consumer's pulls, heartbeats and oneway offset commits to it pile up as well.

After SIGCONT the producer keeps sending until the resumed broker has acknowledged
:data:`AFTER_RESUME` more, then stops; the consumer must catch up and commit. What the run
saw is an :class:`Outcome`; :func:`problems` lists what breaks the rules:

* every SEND_OK message is consumed (at least once), and the record at the acknowledged
  (broker, queue, offset) is that message;
* each queue holds offsets min..max-1 once each, and no key is stored twice (a request
  handled twice, or a send the producer retried after it had been stored, would show);
* the consumer never consumed one (broker, queue, offset) twice: a pull parked before the
  pause is answered after SIGCONT (the piled sends wake it) though its caller timed out
  and pulled again; a client that applied that stale answer would deliver those messages
  twice. The probe makes sure such a late answer happens in every run: it must reach
  the probe's connection and be dropped there (our channels log it), and the re-pull get
  its own answer (FOUND or NOT_FOUND). (The consumer's own parked pull usually fails at
  once instead: a sync request to the stopped broker, a heartbeat or a send of the producer
  sharing its client instance, times out and closes that connection.)
* the committed consumer offsets, polled every 0.5 s from both brokers (the paused one
  after SIGCONT), never move backwards: the commits that piled up during the pause are
  processed after SIGCONT on whatever connection order, and must not overwrite newer
  ones (the consumer cannot move past a paused broker's queues, so none is newer than its
  position at SIGCONT); at the end each equals its queue's max offset;
* every piled send the waiting caller got an answer for is either SUCCESS and stored once,
  or SYSTEM_BUSY (``[TIMEOUT_CLEAN_QUEUE]``/``[PCBUSY_CLEAN_QUEUE]``, the broker's fast
  failure) and not stored; an error or no answer at all is a problem;
* the paused process is alive afterwards and serving (a fresh send and pull), and the same
  producer and consumer, never restarted, get SEND_OK from it and consume what it stored
  after SIGCONT.

How many of the abandoned raw sends and of the producer's timed-out sends were stored
anyway (work done for callers that had given up) is recorded, not judged: both RocketMQ
4.9.7 and we store a send read from a connection its client has closed, and that is a
duplicate at worst (at-least-once), never a corruption.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullStatus,
    PushConsumer,
    SendStatus,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.headers import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from aiorocketmq.protocol.message import decode_messages, encode_properties
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.logs import capture_logs

PAUSE_SECONDS = 30.0  # how long the broker stays stopped (the issue asks for 30 s)
TOPIC = "PauseTopic"
QUEUES = 4
PRODUCER_GROUP = "PausePG"
CONSUMER_GROUP = "PauseCG"
PILED = 8  # raw sends written to the stopped broker by each of the two raw callers
AFTER_RESUME = 100  # SEND_OKs from the resumed broker before the producer stops
WARM_UP = 100  # SEND_OKs from each broker before the pause
SEND_GAP = 0.01  # seconds between two sends of the producer's loop
MAX_SENDS = 20_000  # the producer loop's bound in count ...
PHASE_DEADLINE = 90.0  # ... and each phase's bound in time


class Broker(Protocol):
    """What the scenario needs of a broker process (``tests.procs.ServerProcess`` and
    ``tests.interop.stock.JavaServer`` both are)."""

    address: str

    @property
    def pid(self) -> int: ...

    def alive(self) -> bool: ...


QueueKey = tuple[str, int]  # (broker name, queue id)


@dataclass
class Outcome:
    paused: str
    acked: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # key -> where
    send_failures: dict[str, str] = field(default_factory=dict)  # key -> error text
    acked_after_resume: Counter[str] = field(default_factory=Counter)  # by broker
    consumed: list[tuple[str, int, int, str]] = field(default_factory=list)
    consumed_after_resume_from_paused: int = 0
    committed: dict[QueueKey, list[int]] = field(default_factory=dict)  # polled series
    max_offsets: dict[QueueKey, int] = field(default_factory=dict)
    min_offsets: dict[QueueKey, int] = field(default_factory=dict)
    stored: dict[QueueKey, list[tuple[int, str]]] = field(default_factory=dict)  # (offset, key)
    piled_answers: dict[str, str] = field(default_factory=dict)  # key -> "CODE remark" / error
    abandoned_errors: dict[str, str] = field(default_factory=dict)
    alive_after: bool = False
    serving_after: str = ""  # "" when a fresh send + pull worked, else what failed
    caught_up: bool = False
    late_answers_dropped: int = 0  # answers our clients got after their callers gave up
    stale_pull: str = ""  # the first probe pull (its caller gives up after 2 s)
    re_pull: str = ""  # the same pull again on the same connection, its caller waiting
    notes: list[str] = field(default_factory=list)

    def stored_keys(self) -> Counter[str]:
        return Counter(key for records in self.stored.values() for _, key in records)

    def summary(self) -> str:
        keys = self.stored_keys()
        failed_stored = sum(1 for k in self.send_failures if keys[k])
        abandoned_stored = sum(1 for i in range(PILED) if keys[f"abandoned-{i}"])
        answers = Counter(v.split(" ", 1)[0] for v in self.piled_answers.values())
        return (f"acked={len(self.acked)} send_failures={len(self.send_failures)} "
                f"(stored anyway: {failed_stored}) acked_after_resume={dict(self.acked_after_resume)} "
                f"consumed={len(self.consumed)} "
                f"consumed_after_resume_from_paused={self.consumed_after_resume_from_paused} "
                f"piled_answers={dict(answers)} abandoned_stored={abandoned_stored}/{PILED} "
                f"late_answers_dropped={self.late_answers_dropped} "
                f"stale_pull={self.stale_pull!r} re_pull={self.re_pull!r} "
                f"alive={self.alive_after} serving={self.serving_after or 'yes'} "
                f"caught_up={self.caught_up}" + (f" notes={self.notes}" if self.notes else ""))


def problems(o: Outcome) -> list[str]:
    """What ``o`` breaks of the rules in the module docstring (empty: none)."""
    out: list[str] = []
    consumed_keys = {key for *_, key in o.consumed}
    lost = [k for k in o.acked if k not in consumed_keys]
    if lost:
        out.append(f"{len(lost)} acknowledged messages never consumed, e.g. {lost[:5]}")
    by_place = {(b, q, off): key for (b, q), records in o.stored.items() for off, key in records}
    misplaced = [(k, where) for k, where in o.acked.items() if by_place.get(where) != k]
    if misplaced:
        out.append(f"{len(misplaced)} acknowledged (broker, queue, offset) hold another record, "
                   f"e.g. {misplaced[:3]}")
    for qk, records in sorted(o.stored.items()):
        offsets = [off for off, _ in records]
        want = list(range(o.min_offsets.get(qk, 0), o.max_offsets.get(qk, 0)))
        if offsets != want:
            out.append(f"queue {qk} holds offsets {offsets[:5]}..{offsets[-5:]} (count "
                       f"{len(offsets)}), not {o.min_offsets.get(qk)}..{o.max_offsets.get(qk)}")
    twice = [k for k, n in o.stored_keys().items() if n > 1]
    if twice:
        out.append(f"{len(twice)} keys stored more than once, e.g. {twice[:5]}")
    places = Counter((b, q, off) for b, q, off, _ in o.consumed)
    again = [p for p, n in places.items() if n > 1]
    if again:
        out.append(f"{len(again)} records consumed twice by the one consumer, e.g. {again[:5]}")
    for qk, series in sorted(o.committed.items()):
        back = [(a, b) for a, b in zip(series, series[1:], strict=False) if b < a]
        if back:
            out.append(f"committed offset of {qk} moved backwards: {back[:3]}")
    if not o.caught_up:
        final = {qk: s[-1] if s else None for qk, s in o.committed.items()}
        out.append(f"committed offsets {final} never reached the max offsets {o.max_offsets}")
    keys = o.stored_keys()
    for key, answer in sorted(o.piled_answers.items()):
        code = answer.split(" ", 1)[0]
        if code == "SUCCESS" and keys[key] != 1:
            out.append(f"{key} answered SUCCESS but stored {keys[key]} times")
        elif code == "SYSTEM_BUSY" and keys[key]:
            out.append(f"{key} answered SYSTEM_BUSY but stored")
        elif code not in ("SUCCESS", "SYSTEM_BUSY"):
            out.append(f"{key}: {answer}")
    missing = [f"piled-{i}" for i in range(PILED) if f"piled-{i}" not in o.piled_answers]
    if missing:
        out.append(f"no answer for {missing}")
    if not o.re_pull.startswith(("SUCCESS", "PULL_NOT_FOUND")):
        out.append(f"the re-pull after a stale one got {o.re_pull!r}")
    if o.late_answers_dropped < 1:
        out.append("the stale probe pull's late answer never reached (and was not dropped by) "
                   "its connection")
    if not o.alive_after:
        out.append(f"{o.paused} is not alive after SIGCONT")
    if o.serving_after:
        out.append(f"{o.paused} does not serve after SIGCONT: {o.serving_after}")
    if o.acked_after_resume[o.paused] < AFTER_RESUME:
        out.append(f"the producer got {o.acked_after_resume[o.paused]} SEND_OK from {o.paused} "
                   f"after SIGCONT, wanted {AFTER_RESUME}")
    if o.consumed_after_resume_from_paused == 0:
        out.append(f"the consumer consumed nothing {o.paused} stored after SIGCONT")
    return out


# -- raw requests ---------------------------------------------------------------------------


def _send_request(key: str, queue_id: int) -> RemotingCommand:
    v1 = SendMessageRequestHeader(
        producer_group="PauseRawPG", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=QUEUES, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"KEYS": key, "WAIT": "true"}), reconsume_times=0,
        batch=False)
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2,
                                          SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields(),
                                          f"body-{key}".encode())


async def _raw_send(client: RemotingClient, addr: str, key: str, queue_id: int,
                    timeout: float) -> str:
    try:
        r = await client.invoke(addr, _send_request(key, queue_id), timeout)
    except RocketMQError as exc:
        return f"ERROR {type(exc).__name__}: {exc}"
    try:
        name = ResponseCode(r.code).name
    except ValueError:
        name = str(r.code)
    return f"{name} {r.remark or ''}".strip()


async def _raw_pull(client: RemotingClient, addr: str, queue_id: int, offset: int,
                    timeout: float) -> str:
    """A long-polling PULL_MESSAGE (suspend 20 s) of one queue from ``offset``."""
    header = PullMessageRequestHeader(
        consumer_group="PauseProbeCG", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=32, sys_flag=PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION,
        commit_offset=0, suspend_timeout_millis=20_000, subscription="*", sub_version=0,
        expression_type="TAG")
    request = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
    try:
        r = await client.invoke(addr, request, timeout)
    except RocketMQError as exc:
        return f"ERROR {type(exc).__name__}"
    try:
        name = ResponseCode(r.code).name
    except ValueError:
        name = str(r.code)
    if r.code == ResponseCode.SUCCESS and r.body:
        offsets = [m.queue_offset for m in decode_messages(r.body)]
        return f"{name} offsets {offsets[0]}..{offsets[-1]}"
    return name


# -- the scenario ---------------------------------------------------------------------------


async def _create_topic(namesrv_addr: str, brokers: Mapping[str, Broker]) -> None:
    async with MQAdmin(namesrv_addr, timeout=10.0) as admin:
        for broker in brokers.values():
            await admin.create_topic(broker.address, TopicConfig(
                topic_name=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
        deadline = time.monotonic() + PHASE_DEADLINE
        while True:  # the nameserver learns the topic from each broker's registration
            with contextlib.suppress(RocketMQError):
                route = await admin.topic_route(TOPIC)
                if {qd.broker_name for qd in route.queue_datas} >= set(brokers):
                    return
            assert time.monotonic() < deadline, "the topic's route never named every broker"
            await asyncio.sleep(0.2)


async def _read_queue(admin: MQAdmin, addr: str, mq: MessageQueue
                      ) -> tuple[int, int, list[tuple[int, str]]]:
    low, high = await admin.queue_offsets(addr, mq)
    records: list[tuple[int, str]] = []
    offset = low
    while offset < high:
        result = await admin.pull(addr, mq, offset, 32)
        if result.status is not PullStatus.FOUND:
            break
        records += [(m.queue_offset, m.keys or "") for m in result.msg_found_list]
        offset = result.next_begin_offset
    return low, high, records


async def run(namesrv_addr: str, brokers: Mapping[str, Broker], paused: str,
              pause_seconds: float = PAUSE_SECONDS) -> Outcome:
    """The scenario of the module docstring; ``brokers`` maps broker name -> process, and
    ``paused`` names the one to stop. The process is always continued again on the way out."""
    o = Outcome(paused)
    # Our channels log each answer that arrives for a request whose caller gave up (timed
    # out or cancelled) and drop it: the stale pull answers, among others.
    with capture_logs("aiorocketmq.remoting") as events:
        try:
            return await _run(o, namesrv_addr, brokers, paused, pause_seconds)
        finally:
            o.late_answers_dropped = sum(1 for e in events if e.get("event") in (
                "remoting.response_abandoned", "remoting.response_unmatched"))


async def _run(o: Outcome, namesrv_addr: str, brokers: Mapping[str, Broker], paused: str,
               pause_seconds: float) -> Outcome:
    await _create_topic(namesrv_addr, brokers)
    names_by_addr = {b.address: name for name, b in brokers.items()}
    target = brokers[paused]
    loop = asyncio.get_running_loop()
    phase = "warm-up"  # -> "paused" -> "resumed" -> "done"
    resumed_at = 0.0

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            broker = names_by_addr.get(m.store_host, m.store_host)
            o.consumed.append((broker, m.queue_id, m.queue_offset, m.keys or ""))
            if broker == paused and phase in ("resumed", "done") \
                    and m.store_timestamp / 1000 >= resumed_at:
                o.consumed_after_resume_from_paused += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    producer = Producer(PRODUCER_GROUP, namesrv_addr)
    consumer = PushConsumer(CONSUMER_GROUP, namesrv_addr,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    waiting = RemotingClient()  # the piled sends' caller: waits as long as it takes
    impatient = RemotingClient()  # gives up after 1 s (and closes its connection)
    prober = RemotingClient(close_socket_if_timeout=False)  # pulls; keeps its connection
    admin = MQAdmin(namesrv_addr, timeout=2.0)
    acked_by_broker: Counter[str] = Counter()
    stop_producing = asyncio.Event()
    stop_polling = asyncio.Event()

    async def produce() -> None:
        for n in range(MAX_SENDS):
            if stop_producing.is_set():
                return
            key = f"p-{n}"
            try:
                r = await producer.send(Message(TOPIC, f"body-{key}".encode(), keys=key))
            except RocketMQError as exc:
                o.send_failures[key] = f"{type(exc).__name__}: {exc}"
            else:
                if r.status is SendStatus.SEND_OK:
                    where = (r.message_queue.broker_name, r.message_queue.queue_id, r.queue_offset)
                    o.acked[key] = where
                    acked_by_broker[where[0]] += 1
                    if phase == "resumed":
                        o.acked_after_resume[where[0]] += 1
            await asyncio.sleep(SEND_GAP)

    async def poll_offsets() -> None:
        while not stop_polling.is_set():
            for name, broker in brokers.items():
                if name == paused and phase == "paused":
                    continue
                for q in range(QUEUES):
                    header = QueryConsumerOffsetRequestHeader(
                        consumer_group=CONSUMER_GROUP, topic=TOPIC, queue_id=q)
                    try:
                        value = await admin.api.query_consumer_offset(broker.address, header, 2.0)
                    except RocketMQError:
                        continue
                    series = o.committed.setdefault((name, q), [])
                    if not series or series[-1] != value:
                        series.append(value)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_polling.wait(), 0.5)

    async def until(what: str, condition: object, deadline: float = PHASE_DEADLINE) -> None:
        end = loop.time() + deadline
        while not condition():  # type: ignore[operator]
            if loop.time() > end:
                raise AssertionError(f"{what}: not within {deadline}s; {o.summary()}")
            await asyncio.sleep(0.1)

    stopped = False
    producing: asyncio.Task[None] | None = None
    polling: asyncio.Task[None] | None = None
    raw: list[asyncio.Task[str]] = []
    try:
        await producer.start()
        await consumer.start()
        producing = asyncio.create_task(produce(), name="pause-producer")
        polling = asyncio.create_task(poll_offsets(), name="pause-offsets")
        await until("warm-up", lambda: all(acked_by_broker[n] >= WARM_UP for n in brokers)
                    and len({k for *_, k in o.consumed}) >= WARM_UP)

        # -- the pause --
        probe_offset = await admin.api.get_max_offset(target.address, MessageQueue(TOPIC, paused, 0))
        phase = "paused"
        os.kill(target.pid, signal.SIGSTOP)
        stopped = True
        paused_at = loop.time()
        # A pull whose caller gives up, then the same pull again on the same connection: after
        # SIGCONT the broker answers both (the piled sends wake them); the first answer is
        # stale and must be dropped, the second is the re-pull's own.
        o.stale_pull = await _raw_pull(prober, target.address, 0, probe_offset, 2.0)
        re_pull = asyncio.create_task(_raw_pull(prober, target.address, 0, probe_offset,
                                                pause_seconds + 60.0))
        raw.append(re_pull)
        raw += [asyncio.create_task(_raw_send(waiting, target.address, f"piled-{i}", i % QUEUES,
                                              pause_seconds + 60.0)) for i in range(PILED)]
        raw += [asyncio.create_task(_raw_send(impatient, target.address, f"abandoned-{i}",
                                              i % QUEUES, 1.0)) for i in range(PILED)]
        await asyncio.sleep(max(0.0, paused_at + pause_seconds - loop.time()))  # the fault itself
        resumed_at = time.time()
        phase = "resumed"
        os.kill(target.pid, signal.SIGCONT)
        stopped = False

        answers = await asyncio.gather(*raw[1:])
        o.re_pull = await re_pull
        for i in range(PILED):
            o.piled_answers[f"piled-{i}"] = answers[i]
            o.abandoned_errors[f"abandoned-{i}"] = answers[PILED + i]
        await until("SEND_OK from the resumed broker",
                    lambda: o.acked_after_resume[paused] >= AFTER_RESUME)
        stop_producing.set()
        await producing
        phase = "done"

        # -- catching up --
        with contextlib.suppress(AssertionError):
            await until("consumed", lambda: not any(k not in {c[3] for c in o.consumed}
                                                    for k in o.acked))
        async with MQAdmin(namesrv_addr, timeout=10.0) as reader:
            for name, broker in brokers.items():
                for q in range(QUEUES):
                    mq = MessageQueue(TOPIC, name, q)
                    o.max_offsets[(name, q)] = await reader.api.get_max_offset(broker.address, mq)
        with contextlib.suppress(AssertionError):
            await until("committed", lambda: all(
                o.committed.get(qk, [-1])[-1] >= high for qk, high in o.max_offsets.items()))
        o.caught_up = all(o.committed.get(qk, [-1])[-1] >= high
                          for qk, high in o.max_offsets.items())
        stop_polling.set()
        await polling

        # -- the resumed broker itself --
        o.alive_after = target.alive()
        probe = await _raw_send(waiting, target.address, "probe", 0, 10.0)
        if not probe.startswith("SUCCESS"):
            o.serving_after = f"send: {probe}"
        await consumer.shutdown()
        async with MQAdmin(namesrv_addr, timeout=10.0) as reader:
            for name, broker in brokers.items():
                for q in range(QUEUES):
                    low, high, records = await _read_queue(reader, broker.address,
                                                           MessageQueue(TOPIC, name, q))
                    o.min_offsets[(name, q)], o.max_offsets[(name, q)] = low, high
                    o.stored[(name, q)] = records
        if not o.serving_after and not o.stored_keys()["probe"]:
            o.serving_after = "the probe's send was answered but a pull does not find it"
        return o
    finally:
        if stopped:
            os.kill(target.pid, signal.SIGCONT)
        stop_producing.set()
        stop_polling.set()
        for task in (producing, polling, *raw):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(t for t in (producing, polling, *raw) if t is not None),
                             return_exceptions=True)
        await consumer.shutdown()
        await producer.shutdown()
        await admin.close()
        await waiting.close()
        await impatient.close()
        await prober.close()
