"""Shared checks for the stock RocketMQ 4.9.7 interop suites (issue #17).

A :class:`Spec` names one deterministic message set: the driver's ``Messages.java`` builds
message ``i`` (key, tag, body, user properties) and :meth:`Spec.message` builds the same one
for our client, so either side's deliveries are compared against the same expectation.

Deliveries are compared as *events*: the driver prints one JSON object per delivery, and
:func:`event_of` turns one of our client's ``MessageExt`` into the same shape. A check fails
when a message is missing, duplicated where the scenario allows no redelivery, or altered (body,
key, tag, topic or any user property differs).
"""

from __future__ import annotations

import base64
import dataclasses
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiorocketmq.client import Message, MessageExt
from aiorocketmq.protocol.codes import MessageConst
from tests.interop.stock import (
    DriverResult,
    Event,
    message_body,
    message_key,
    message_tag,
    received_body,
)
from tests.procs import CommandTimeout, run_command

# Broker settings both kinds of broker get in these suites: every delay level is 1 s, and a
# transaction in doubt is checked back after 1 s (stock defaults: 1s 5s 10s ..., 6 s / 60 s).
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)
FAST_BROKER_CONF = {
    "messageDelayLevel": FAST_DELAY_LEVELS,
    "transactionCheckInterval": "1000",
    "transactionTimeOut": "1000",
}


@dataclasses.dataclass(frozen=True)
class Spec:
    """Messages ``start .. start+count-1`` of one topic, as ``Messages.java`` builds them."""

    topic: str
    count: int
    start: int = 0
    key_prefix: str = "k-"
    tags: tuple[str, ...] = ("TagA", "TagB")
    props: Mapping[str, str] = dataclasses.field(default_factory=lambda: {"color": "blue", "size": "7"})
    body_size: int = 0

    @property
    def indexes(self) -> range:
        return range(self.start, self.start + self.count)

    def driver_options(self) -> dict[str, Any]:
        """The driver options that make it send exactly these messages."""
        return {"topic": self.topic, "count": self.count, "start": self.start,
                "key_prefix": self.key_prefix, "tags": list(self.tags), "props": dict(self.props) or None,
                "body_size": self.body_size}

    def key(self, i: int) -> str:
        return message_key(i, self.key_prefix)

    def tag(self, i: int) -> str | None:
        return message_tag(i, self.tags)

    def body(self, i: int) -> bytes:
        return message_body(i, key_prefix=self.key_prefix, body_size=self.body_size)

    def user_properties(self, i: int) -> dict[str, str]:
        return {"idx": str(i), **self.props}

    def message(self, i: int, *, topic: str | None = None) -> Message:
        """Message ``i`` for our client (the same key, tag, body and user properties)."""
        m = Message(topic or self.topic, self.body(i), tags=self.tag(i), keys=self.key(i))
        for k, v in self.user_properties(i).items():
            m.put_user_property(k, v)
        return m

    def with_tag(self, tag: str) -> list[int]:
        return [i for i in self.indexes if self.tag(i) == tag]


def event_of(m: MessageExt, *, broker_name: str | None = None) -> Event:
    """One of our client's deliveries in the driver's ``received`` event shape."""
    idx = m.properties.get("idx")
    return {
        "event": "received",
        "index": int(idx) if idx is not None else None,
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags,
        "keys": m.keys,
        "body": base64.b64encode(m.body or b"").decode(),
        "userProperties": {k: v for k, v in sorted(m.properties.items()) if k not in MessageConst.SYSTEM_KEYS},
        "properties": dict(sorted(m.properties.items())),
        "reconsumeTimes": m.reconsume_times,
        "brokerName": broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset,
        "storeHost": m.store_host,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
    }


def check_sent(result: DriverResult, spec: Spec, *, status: str | None = "SEND_OK",
               offset_msg_id: bool = True) -> dict[str, Event]:
    """Every message of ``spec`` was sent once, in any order; ``{key: sent event}``.
    ``status`` None: oneway sends (no result); ``offset_msg_id`` False: a TransactionSendResult
    (stock sendMessageInTransaction does not copy it)."""
    sends = result.of("sent")
    assert sorted(e["index"] for e in sends) == list(spec.indexes), result.describe()
    for e in sends:
        assert e["key"] == spec.key(e["index"]), e
        assert e["tags"] == spec.tag(e["index"]), e
        if status is not None:
            assert e["status"] == status, e
            assert e["msgId"], e
            assert bool(e["offsetMsgId"]) == offset_msg_id, e
    assert len({e["msgId"] for e in sends}) == spec.count, result.describe()
    return {e["key"]: e for e in sends}


def check_message(e: Event, spec: Spec, *, topic: str | None = None) -> None:
    """One delivery is message ``e["index"]`` of ``spec``, unaltered."""
    i = e["index"]
    assert i is not None and i in spec.indexes, e
    assert e["topic"] == (topic or spec.topic), e
    assert e["keys"] == spec.key(i), e
    assert e["tags"] == spec.tag(i), e
    assert received_body(e) == spec.body(i), e
    assert e["userProperties"] == spec.user_properties(i), e


def check_received(events: Sequence[Event], spec: Spec, *, indexes: Iterable[int] | None = None,
                   sent: Mapping[str, Event] | None = None, topic: str | None = None,
                   exact: bool = True) -> dict[int, list[Event]]:
    """The deliveries are exactly the messages ``indexes`` (default: all of ``spec``), each
    unaltered; ``exact``: each exactly once (else at least once). With ``sent`` (``{key: sent
    event}``), each delivery has its send's msgId and, unless redelivered from a retry topic,
    its queue and offset. ``{index: deliveries}``."""
    want = sorted(spec.indexes if indexes is None else indexes)
    by_index: dict[int, list[Event]] = {}
    for e in events:
        check_message(e, spec, topic=topic)
        by_index.setdefault(e["index"], []).append(e)
    missing = sorted(set(want) - set(by_index))
    extra = sorted(set(by_index) - set(want))
    assert not missing and not extra, f"missing {missing}, unexpected {extra}"
    if exact:
        dups = {i: len(v) for i, v in by_index.items() if len(v) > 1}
        assert not dups, f"delivered more than once: {dups}"
    if sent is not None:
        for i, evs in by_index.items():
            s = sent[spec.key(i)]
            for e in evs:
                assert e["msgId"] == s["msgId"], (e, s)
                if e.get("reconsumeTimes", 0) == 0 and s.get("queueOffset") is not None and s.get("status"):
                    assert (e["queueId"], e["queueOffset"]) == (s["queueId"], s["queueOffset"]), (e, s)
                    if s.get("brokerName") and e.get("brokerName"):
                        assert e["brokerName"] == s["brokerName"], (e, s)
    return by_index


def check_orderly(events: Sequence[Event], order_of: Mapping[int, str]) -> None:
    """Per order key, the first deliveries came in send (index) order."""
    seen: dict[str, list[int]] = {}
    firsts: set[int] = set()
    for e in events:
        i = e["index"]
        if i in firsts:
            continue
        firsts.add(i)
        seen.setdefault(order_of[i], []).append(i)
    for key, idx in seen.items():
        assert idx == sorted(idx), f"order key {key}: delivered {idx}"


def counts(events: Iterable[Event], field: str = "index") -> Counter[Any]:
    return Counter(e[field] for e in events)


def our_mqadmin(namesrv: str, command: str, *args: str, timeout: float = 60.0) -> str:
    """``python -m aiorocketmq.client.admin.cli <command> -n <namesrv> args...``: its stdout;
    fails on a non-zero exit or an exception in the output."""
    argv = [sys.executable, "-m", "aiorocketmq.client.admin.cli", command, "-n", namesrv, *args]
    try:
        code, stdout, stderr = run_command(argv, timeout)
    except CommandTimeout as exc:
        raise AssertionError(f"mqadmin {command} {args}: no exit in {timeout}s\n"
                             f"{exc.stdout}\n{exc.stderr}") from None
    assert code == 0 and "Exception" not in stdout, \
        f"mqadmin {command} {args}: exit {code}\n{stdout}\n{stderr}"
    return stdout
