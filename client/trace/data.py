"""Trace records and their text form (upstream 4.9.7 ``TraceContext``, ``TraceBean``,
``TraceDataEncoder``, ``TraceView``, ``TraceConstants``).

A trace message's body is records back to back, each ended by ``FIELD_SPLITOR`` (char 2),
its fields separated by ``CONTENT_SPLITOR`` (char 1); values are written as Java's
``StringBuilder.append`` writes them (``null`` for a missing tag or key, ``true``/``false``):

* ``Pub``: type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost,
  bodyLength, costTime, msgType ordinal, offsetMsgId, success
* ``SubBefore`` (one per message): type, timestamp, regionId, group, requestId, msgId,
  retryTimes, keys
* ``SubAfter`` (one per message): type, requestId, msgId, costTime, success, keys,
  contextCode, timestamp, group
* ``EndTransaction``: type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost,
  msgType ordinal, transactionId, transactionState, fromTransactionCheck

``encode(ctx)`` gives the text and the keys (each bean's msgId and its message keys) the
trace message is indexed under; ``decode(text)`` reads any 4.9.7 trace body back, as
upstream's decoder does (a ``Pub`` of 13 to 15 fields, a ``SubAfter`` of 6 to 9).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from aiorocketmq.protocol.message import create_uniq_id

from ..api import now_ms

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "GROUP_NAME_PREFIX",
    "TRACE_INSTANCE_NAME",
    "TraceType",
    "MessageType",
    "ConsumeReturnType",
    "TraceBean",
    "TraceContext",
    "TraceView",
    "encode",
    "decode",
    "trace_views",
]

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
KEY_SEPARATOR = " "


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """``org.apache.rocketmq.common.message.MessageType``; written as its ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """``ConsumeReturnType``; a SubAfter's contextCode is its ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


def _j(value: Any) -> str:
    """``StringBuilder.append(value)``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


@dataclass(slots=True)
class TraceBean:
    """One message of a trace record (upstream ``TraceBean``)."""

    topic: str | None = ""
    msg_id: str = ""
    offset_msg_id: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    client_host: str | None = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType | None = MessageType.Normal_Msg
    transaction_state: str | None = None
    transaction_id: str | None = None
    from_transaction_check: bool = False


@dataclass(slots=True)
class TraceContext:
    """One trace record (upstream ``TraceContext``)."""

    trace_type: TraceType
    time_stamp: int = field(default_factory=now_ms)
    region_id: str | None = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = field(default_factory=create_uniq_id)
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


def encode(ctx: TraceContext) -> tuple[str, list[str]]:
    """``TraceDataEncoder.encoderFromContextBean``: (text, keys to index the record by)."""
    c, f = CONTENT_SPLITOR, FIELD_SPLITOR
    t = ctx.trace_type
    parts: list[str] = []
    if t is TraceType.Pub:
        b = ctx.beans[0]
        parts.append(c.join(map(_j, (
            t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags,
            b.keys, b.store_host, b.body_length, ctx.cost_time,
            None if b.msg_type is None else int(b.msg_type), b.offset_msg_id, ctx.success))) + f)
    elif t is TraceType.SubBefore:
        for b in ctx.beans:
            parts.append(c.join(map(_j, (
                t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                b.retry_times, b.keys))) + f)
    elif t is TraceType.SubAfter:
        for b in ctx.beans:
            parts.append(c.join(map(_j, (
                t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                ctx.context_code, ctx.time_stamp, ctx.group_name))) + f)
    elif t is TraceType.EndTransaction:
        b = ctx.beans[0]
        parts.append(c.join(map(_j, (
            t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags,
            b.keys, b.store_host, None if b.msg_type is None else int(b.msg_type),
            b.transaction_id, b.transaction_state, b.from_transaction_check))) + f)
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.keys:
            keys.extend(b.keys.split(KEY_SEPARATOR))
    return "".join(parts), keys


def _java_split(s: str, sep: str) -> list[str]:
    """``String.split(sep)``: trailing empty strings removed."""
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _bool(s: str) -> bool:
    return s.lower() == "true"  # Boolean.parseBoolean


def decode(data: str) -> list[TraceContext]:
    """``TraceDataEncoder.decoderFromTraceDataString``; records it cannot read are skipped."""
    out: list[TraceContext] = []
    if not data:
        return out
    for record in _java_split(data, FIELD_SPLITOR):
        line = _java_split(record, CONTENT_SPLITOR)
        try:
            kind = line[0]
            if kind == "Pub":
                bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7],
                                 store_host=line[8], body_length=int(line[9]),
                                 msg_type=MessageType(int(line[11])))
                ctx = TraceContext(TraceType.Pub, int(line[1]), line[2], line[3],
                                   cost_time=int(line[10]), beans=[bean])
                if len(line) == 13:
                    ctx.success = _bool(line[12])
                elif len(line) >= 14:
                    bean.offset_msg_id = line[12]
                    ctx.success = _bool(line[13])
                    if len(line) >= 15:
                        bean.client_host = line[14]
            elif kind == "SubBefore":
                bean = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7])
                ctx = TraceContext(TraceType.SubBefore, int(line[1]), line[2], line[3],
                                   request_id=line[4], beans=[bean])
            elif kind == "SubAfter":
                bean = TraceBean(msg_id=line[2], keys=line[5])
                ctx = TraceContext(TraceType.SubAfter, request_id=line[1], cost_time=int(line[3]),
                                   success=_bool(line[4]), beans=[bean])
                if len(line) >= 7:
                    ctx.context_code = int(line[6])
                if len(line) >= 9:
                    ctx.time_stamp = int(line[7])
                    ctx.group_name = line[8]
            elif kind == "EndTransaction":
                bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7],
                                 store_host=line[8], msg_type=MessageType(int(line[9])),
                                 transaction_id=line[10], transaction_state=line[11],
                                 from_transaction_check=_bool(line[12]))
                ctx = TraceContext(TraceType.EndTransaction, int(line[1]), line[2], line[3],
                                   beans=[bean])
            else:
                continue
        except (IndexError, ValueError):
            continue
        out.append(ctx)
    return out


@dataclass(slots=True)
class TraceView:
    """One record about one message, as ``queryMsgTraceById`` shows it (upstream ``TraceView``)."""

    msg_type: str
    msg_id: str
    group_name: str
    client_host: str
    time_stamp: int
    cost_time: int
    status: str
    topic: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    offset_msg_id: str | None = None


def trace_views(msg_id: str, body: bytes, born_host: str) -> list[TraceView]:
    """``TraceView.decodeFromTraceTransData``: the records of one trace message about ``msg_id``.

    ``born_host`` is the trace message's born host (``getBornHostString``: the IP only).
    """
    out: list[TraceView] = []
    for ctx in decode(body.decode("utf-8", "replace")):
        bean = ctx.beans[0]
        if bean.msg_id != msg_id:
            continue
        out.append(TraceView(ctx.trace_type.value, bean.msg_id, ctx.group_name, born_host,
                             ctx.time_stamp, ctx.cost_time, "success" if ctx.success else "failed",
                             bean.topic, bean.tags, bean.keys, bean.store_host, bean.offset_msg_id))
    return out
