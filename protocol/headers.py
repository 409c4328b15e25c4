"""Typed custom headers: ``RemotingCommand.ext_fields`` <-> slotted dataclasses.

Contract (docs/PROTOCOL.md 2.6, upstream ``RemotingCommand.decodeCommandCustomHeader`` /
``makeCustomHeaderToNet`` and the header classes under
``common/.../protocol/header/**``):

* ``H.from_ext_fields(ext) -> H`` reads each declared field from its wire key;
  ``h.to_ext_fields() -> dict[str, str]`` writes every non-``None`` field with Java's
  ``String.valueOf`` (``true``/``false``, decimal integers), then ``h.extra``.
* Attributes are snake_case; the wire key is the camelCase of the attribute
  (``consumer_group`` -> ``consumerGroup``) unless the field says otherwise with
  ``field(metadata={"wire": "clientID"})``.
* Field types are ``str``, ``Int32`` (Java ``Integer``/``int``), ``Int64`` (Java
  ``Long``/``long``), ``bool`` and ``float`` (Java ``Double``), each possibly ``| None``.
  Numbers are parsed like ``Integer.parseInt`` / ``Long.parseLong`` (ASCII digits, an
  optional sign, the Java range); booleans like ``Boolean.parseBoolean`` (case-insensitive
  ``"true"`` is true, anything else false).
* A field without a default is required (Java ``@CFNotNull``): its absence raises
  ``HeaderError("the custom field <consumerGroup> is null")``, upstream's text. An
  unparsable number raises ``HeaderError`` naming the field and the value. Upstream
  4.9.x logs both and carries on with a null field, which later fails as an NPE and a
  ``SYSTEM_ERROR`` response; we fail at the edge with the reason instead. Where the
  stock handler answers a null field otherwise (the ACL admin headers), the field is
  optional here and the handler answers as stock does.
* Keys the class does not declare (ACL ``AccessKey``/``Signature``, ``ReqT``,
  ``TRACE_ON``, ``MSG_REGION``, ...) are kept in ``extra`` in arrival order and written
  back after the declared fields; a declared field wins over an ``extra`` entry of the
  same key.
* ``bname`` (4.9.5+ ``RpcRequestHeader``) is declared last on the headers docs/PROTOCOL.md
  marks "(+bname)".

The four upstream ``FastCodesHeader`` classes (``SendMessageRequestHeaderV2``,
``SendMessageResponseHeader``, ``PullMessageRequestHeader``,
``PullMessageResponseHeader``) are the hot path: they override both methods with
hand-written code and write their keys in the fixed order upstream's binary encoder
uses (docs/PROTOCOL.md 2.6), which is therefore the ROCKETMQ wire order;
``RemotingCommand`` reorders JSON headers itself. ``from_ext_fields_generic`` /
``to_ext_fields_generic`` stay available on them, and the tests hold both paths equal.

Every other header writes its declared fields in declaration order. Java writes the
ROCKETMQ map of those headers in ``HashMap`` order (``java_hashmap_order``); no reader
depends on that order.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Self, TypeVar, dataclass_transform

from aiorocketmq import refuse_extension

from .codes import RequestCode
from .command import RemotingCommand
from .errors import HeaderError
from .javautil import camel_case

__all__ = [
    "Int32",
    "Int64",
    "CommandHeader",
    "command_header",
    "wire",
    "decode_header",
    "decode_send_request_header",
    # send
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "ReplyMessageRequestHeader",
    # pull, offsets
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
    "UpdateConsumerOffsetResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    # query / view
    "ViewMessageRequestHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    # client registration, retry, transactions
    "UnregisterClientRequestHeader",
    "UnregisterClientResponseHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerListByGroupResponseHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "EndTransactionRequestHeader",
    "CheckTransactionStateRequestHeader",
    # admin (broker)
    "CreateTopicRequestHeader",
    "DeleteTopicRequestHeader",
    "GetAllTopicConfigResponseHeader",
    "GetBrokerConfigResponseHeader",
    "GetTopicStatsInfoRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetAllProducerInfoRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "ResetOffsetRequestHeader",
    "GetConsumerStatusRequestHeader",
    "CloneGroupOffsetRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "QueryCorrectionOffsetHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "QueryConsumeQueueRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
    "ResumeCheckHalfMessageRequestHeader",
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    # nameserver
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader",
    "GetRouteInfoRequestHeader",
    "PutKVConfigRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "DeleteKVConfigRequestHeader",
    "GetKVListByNamespaceRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "GetTopicsByClusterRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
]

# Java's integer widths, kept in the annotation so the codec can range-check like
# Integer.parseInt / Long.parseLong; to a type checker both are plain ``int``.
_INT32_TAG = "java.lang.Integer"
_INT64_TAG = "java.lang.Long"
Int32 = Annotated[int, _INT32_TAG]
Int64 = Annotated[int, _INT64_TAG]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Integer.parseInt accepts an optional sign and digits, nothing else (no blanks, no "_").
_int_match = re.compile(r"[+-]?[0-9]+").fullmatch
# Double.parseDouble: decimal or exponent form with an optional f/d suffix, NaN, Infinity
# (Java also trims blanks and accepts hex floats; no RocketMQ peer sends those).
_float_match = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?|NaN|Infinity)"
).fullmatch


def _missing(wire: str) -> HeaderError:
    return HeaderError(f"the custom field <{wire}> is null")


def _bad_value(wire: str, value: str, java_type: str) -> HeaderError:
    return HeaderError(f"the custom field <{wire}> has value {value!r}, not a valid {java_type}")


def _parse_int32(value: str, wire: str) -> int:
    # isdigit() alone would admit non-ASCII digits, which int() also reads; Java does not
    if (value.isdigit() and value.isascii()) or _int_match(value) is not None:
        n = int(value)
        if _INT32_MIN <= n <= _INT32_MAX:
            return n
    raise _bad_value(wire, value, "Integer")


def _parse_int64(value: str, wire: str) -> int:
    if (value.isdigit() and value.isascii()) or _int_match(value) is not None:
        n = int(value)
        if _INT64_MIN <= n <= _INT64_MAX:
            return n
    raise _bad_value(wire, value, "Long")


def _parse_bool(value: str, wire: str) -> bool:
    return value.lower() == "true"


def _parse_float(value: str, wire: str) -> float:
    if _float_match(value) is None:
        raise _bad_value(wire, value, "Double")
    if value[-1] in "fFdD":
        value = value[:-1]
    if value.endswith("Infinity"):
        return -math.inf if value[0] == "-" else math.inf
    if value.endswith("NaN"):
        return math.nan
    return float(value)


def _format_bool(value: Any) -> str:
    return "true" if value else "false"


def _format_int(value: Any) -> str:
    return str(int(value))


def _format_str(value: Any) -> str:
    return value if type(value) is str else str(value)


def _format_float(value: Any) -> str:
    """``Double.toString``: plain decimal in [1e-3, 1e7), else ``d.dddE[-]n``."""
    v = float(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0.0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    a = abs(v)
    if 1e-3 <= a < 1e7:
        return repr(v)  # Python's shortest repr is fixed-point in this range, with ".0"
    _, digits, exponent = Decimal(repr(a)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    sci_exp = len(digits) + int(exponent) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return ("-" if v < 0 else "") + mantissa + "E" + str(sci_exp)


_Parser = Callable[[str, str], Any]
_Formatter = Callable[[Any], str]

# kind name -> (parser, formatter); a parser of None means the string is used as is.
_KINDS: dict[str, tuple[_Parser | None, _Formatter]] = {
    "str": (None, _format_str),
    "int32": (_parse_int32, _format_int),
    "int64": (_parse_int64, _format_int),
    "bool": (_parse_bool, _format_bool),
    "float": (_parse_float, _format_float),
}


_UnionType = type(int | None)


def _kind_of(hint: Any, where: str) -> str:
    """Map a resolved annotation (``Int32 | None`` etc.) to a codec kind name."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, _UnionType):
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) != 1:
            raise TypeError(f"{where}: unsupported union {hint!r}")
        hint = non_none[0]
        args = typing.get_args(hint)
    if typing.get_origin(hint) is Annotated:
        base, *meta = args
        if base is int and _INT32_TAG in meta:
            return "int32"
        if base is int and _INT64_TAG in meta:
            return "int64"
        raise TypeError(f"{where}: unsupported annotation {hint!r}")
    if hint is str:
        return "str"
    if hint is bool:
        return "bool"
    if hint is float:
        return "float"
    if hint is int:
        raise TypeError(f"{where}: say Int32 (Java Integer) or Int64 (Java Long), not int")
    raise TypeError(f"{where}: unsupported field type {hint!r}")



class _FieldSpec(typing.NamedTuple):
    attr: str
    wire: str
    kind: str
    parse: _Parser | None
    fmt: _Formatter
    required: bool


@dataclass(slots=True, kw_only=True)
class CommandHeader:
    """Base of every typed custom header (upstream ``CommandCustomHeader``).

    ``extra`` holds the ext fields the class does not declare, in arrival order.
    """

    extra: dict[str, str] = field(default_factory=dict)

    # Filled by ``command_header`` for each concrete class.
    _specs: ClassVar[tuple[_FieldSpec, ...]] = ()
    _wire_keys: ClassVar[frozenset[str]] = frozenset()
    #: True for upstream FastCodesHeader classes: ``to_ext_fields`` order is the wire order.
    FAST_CODES: ClassVar[bool] = False

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str] | None) -> Self:
        """Decode from ``RemotingCommand.ext_fields`` (``None`` reads as empty).

        Raises:
            HeaderError: a required field is missing or a number does not parse.
        """
        return cls.from_ext_fields_generic(ext)

    def to_ext_fields(self) -> dict[str, str]:
        """Encode to a fresh ext-fields dict: declared fields, then ``extra``."""
        return self.to_ext_fields_generic()

    @classmethod
    def required_fields(cls) -> tuple[tuple[str, str], ...]:
        """``(wire key, kind)`` of each required field (``@CFNotNull``), in declaration
        order; kind is ``str``, ``int32``, ``int64``, ``bool`` or ``float``."""
        return tuple((s.wire, s.kind) for s in cls._specs if s.required)

    @classmethod
    def from_ext_fields_generic(cls, ext: Mapping[str, str] | None) -> Self:
        """The field-table decoder (upstream's reflective path)."""
        if ext is None:
            ext = {}
        kwargs: dict[str, Any] = {}
        get = ext.get
        for spec in cls._specs:
            value = get(spec.wire)
            if value is None:
                if spec.required:
                    raise _missing(spec.wire)
                continue
            kwargs[spec.attr] = value if spec.parse is None else spec.parse(value, spec.wire)
        if len(ext) > len(kwargs):
            known = cls._wire_keys
            kwargs["extra"] = {k: v for k, v in ext.items() if k not in known}
        return cls(**kwargs)

    def to_ext_fields_generic(self) -> dict[str, str]:
        """The field-table encoder (upstream ``makeCustomHeaderToNet``)."""
        out: dict[str, str] = {}
        for spec in self._specs:
            value = getattr(self, spec.attr)
            if value is not None:
                out[spec.wire] = spec.fmt(value)
        if self.extra:
            _merge_extra(out, self.extra)
        return out


def _merge_extra(out: dict[str, str], extra: Mapping[str, str]) -> None:
    for k, v in extra.items():
        if k not in out and v is not None:
            out[k] = v


_H = TypeVar("_H", bound=CommandHeader)


@dataclass_transform(kw_only_default=True, field_specifiers=(field,))
def command_header(cls: type[_H]) -> type[_H]:
    """Class decorator for a ``CommandHeader`` subclass: make it a slotted keyword-only
    dataclass and compile its field table once, at import.

    Raises:
        TypeError: a field type the codec does not support (plain ``int`` included:
            say ``Int32`` or ``Int64``, as Java does).
    """
    cls = dataclass(slots=True, kw_only=True)(cls)
    hints = typing.get_type_hints(cls, include_extras=True)
    specs = []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name == "extra":
            continue
        kind = _kind_of(hints[f.name], f"{cls.__name__}.{f.name}")
        parse, fmt = _KINDS[kind]
        required = f.default is MISSING and f.default_factory is MISSING
        wire = f.metadata.get("wire") or camel_case(f.name)
        specs.append(_FieldSpec(f.name, wire, kind, parse, fmt, required))
    cls._specs = tuple(specs)
    cls._wire_keys = frozenset(s.wire for s in specs)
    return cls


def wire(key: str) -> dict[str, str]:
    """Field metadata naming a wire key that is not the camelCase of the attribute."""
    return {"wire": key}


def decode_header(cls: type[_H], request: RemotingCommand) -> _H:
    """``request``'s header as a ``cls``: the one the server's edge decoded from the code's
    spec (``request.header``, ``protocol.validation.guard``), else
    ``cls.from_ext_fields(request.ext_fields)`` now (a request no edge saw, or one whose
    edge decoded another class). Processors call this, never ``from_ext_fields``, so a
    request's header is decoded once.

    Raises:
        HeaderError: decoded now, and a required field is missing or a number does not parse.
    """
    try:
        header = request.header
    except AttributeError:
        return cls.from_ext_fields(request.ext_fields)
    if type(header) is cls:
        return header  # type: ignore[return-value]  # exactly cls, checked above
    return cls.from_ext_fields(request.ext_fields)


# ----------------------------------------------------------------------------------------
# Send (docs/PROTOCOL.md 4.1)


@command_header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) / SEND_REPLY_MESSAGE (324): long field names (+bname)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int32
    queue_id: Int32
    sys_flag: Int32
    born_timestamp: Int64
    flag: Int32
    properties: str | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: Int32 | None = None
    bname: str | None = None


_V2_KEYS = frozenset("abcdefghijklmn") | {"bname"}


@command_header
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325).

    Letter keys ``a``..``n`` on the wire (FastCodesHeader). ``broker_name`` is ``n``;
    the inherited ``bname`` is declared too, but Java leaves it null on this header.
    """

    FAST_CODES: ClassVar[bool] = True

    producer_group: str = field(metadata=wire("a"))
    topic: str = field(metadata=wire("b"))
    default_topic: str = field(metadata=wire("c"))
    default_topic_queue_nums: Int32 = field(metadata=wire("d"))
    queue_id: Int32 = field(metadata=wire("e"))
    sys_flag: Int32 = field(metadata=wire("f"))
    born_timestamp: Int64 = field(metadata=wire("g"))
    flag: Int32 = field(metadata=wire("h"))
    properties: str | None = field(default=None, metadata=wire("i"))
    reconsume_times: Int32 | None = field(default=None, metadata=wire("j"))
    unit_mode: bool = field(default=False, metadata=wire("k"))
    max_reconsume_times: Int32 | None = field(default=None, metadata=wire("l"))
    batch: bool = field(default=False, metadata=wire("m"))
    broker_name: str | None = field(default=None, metadata=wire("n"))
    bname: str | None = None

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str] | None) -> Self:
        if ext is None:
            ext = {}
        get = ext.get
        return cls(**_send_v2_fields(ext), broker_name=get("n"), bname=get("bname"))

    def to_ext_fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.producer_group is not None:
            out["a"] = self.producer_group
        if self.topic is not None:
            out["b"] = self.topic
        if self.default_topic is not None:
            out["c"] = self.default_topic
        if self.default_topic_queue_nums is not None:
            out["d"] = str(self.default_topic_queue_nums)
        if self.queue_id is not None:
            out["e"] = str(self.queue_id)
        if self.sys_flag is not None:
            out["f"] = str(self.sys_flag)
        if self.born_timestamp is not None:
            out["g"] = str(self.born_timestamp)
        if self.flag is not None:
            out["h"] = str(self.flag)
        if self.properties is not None:
            out["i"] = self.properties
        if self.reconsume_times is not None:
            out["j"] = str(self.reconsume_times)
        if self.unit_mode is not None:
            out["k"] = "true" if self.unit_mode else "false"
        if self.max_reconsume_times is not None:
            out["l"] = str(self.max_reconsume_times)
        if self.batch is not None:
            out["m"] = "true" if self.batch else "false"
        if self.broker_name is not None:
            out["n"] = self.broker_name
        if self.bname is not None:
            out["bname"] = self.bname
        if self.extra:
            _merge_extra(out, self.extra)
        return out

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        """Upstream ``createSendMessageRequestHeaderV2``: ``bname`` becomes ``n``."""
        return cls(
            producer_group=v1.producer_group,
            topic=v1.topic,
            default_topic=v1.default_topic,
            default_topic_queue_nums=v1.default_topic_queue_nums,
            queue_id=v1.queue_id,
            sys_flag=v1.sys_flag,
            born_timestamp=v1.born_timestamp,
            flag=v1.flag,
            properties=v1.properties,
            reconsume_times=v1.reconsume_times,
            unit_mode=v1.unit_mode,
            max_reconsume_times=v1.max_reconsume_times,
            batch=v1.batch,
            broker_name=v1.bname,
            extra=dict(v1.extra),
        )

    def to_v1(self) -> SendMessageRequestHeader:
        """Upstream ``createSendMessageRequestHeaderV1``: ``n`` becomes ``bname``."""
        return SendMessageRequestHeader(
            producer_group=self.producer_group,
            topic=self.topic,
            default_topic=self.default_topic,
            default_topic_queue_nums=self.default_topic_queue_nums,
            queue_id=self.queue_id,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            flag=self.flag,
            properties=self.properties,
            reconsume_times=self.reconsume_times,
            unit_mode=self.unit_mode,
            batch=self.batch,
            max_reconsume_times=self.max_reconsume_times,
            bname=self.broker_name,
            extra=dict(self.extra),
        )


_SEND_RESPONSE_KEYS = frozenset(("msgId", "queueId", "queueOffset", "transactionId"))


@command_header
class SendMessageResponseHeader(CommandHeader):
    """Answer to every send code (FastCodesHeader).

    ``msg_id`` is the offset message id (comma-joined for a batch). The broker adds
    ``MSG_REGION`` and ``TRACE_ON`` as extra keys, which the Java client requires.
    """

    FAST_CODES: ClassVar[bool] = True

    msg_id: str
    queue_id: Int32
    queue_offset: Int64
    transaction_id: str | None = None

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str] | None) -> Self:
        if ext is None:
            ext = {}
        get = ext.get
        msg_id = get("msgId")
        queue_id = get("queueId")
        queue_offset = get("queueOffset")
        if msg_id is None:
            raise _missing("msgId")
        if queue_id is None:
            raise _missing("queueId")
        if queue_offset is None:
            raise _missing("queueOffset")
        return cls(
            msg_id=msg_id,
            queue_id=_parse_int32(queue_id, "queueId"),
            queue_offset=_parse_int64(queue_offset, "queueOffset"),
            transaction_id=get("transactionId"),
            extra=_extra_of(ext, _SEND_RESPONSE_KEYS),
        )

    def to_ext_fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.msg_id is not None:
            out["msgId"] = self.msg_id
        if self.queue_id is not None:
            out["queueId"] = str(self.queue_id)
        if self.queue_offset is not None:
            out["queueOffset"] = str(self.queue_offset)
        if self.transaction_id is not None:
            out["transactionId"] = self.transaction_id
        if self.extra:
            _merge_extra(out, self.extra)
        return out


def _send_v2_fields(ext: Mapping[str, str]) -> dict[str, Any]:
    """The fields SEND_MESSAGE_V2's letters (``a``..``m``) give, checked, by long name."""
    get = ext.get
    a = get("a")
    b = get("b")
    c = get("c")
    d = get("d")
    e = get("e")
    f = get("f")
    g = get("g")
    h = get("h")
    if a is None:
        raise _missing("a")
    if b is None:
        raise _missing("b")
    if c is None:
        raise _missing("c")
    if d is None:
        raise _missing("d")
    if e is None:
        raise _missing("e")
    if f is None:
        raise _missing("f")
    if g is None:
        raise _missing("g")
    if h is None:
        raise _missing("h")
    j = get("j")
    k = get("k")
    l_ = get("l")
    m = get("m")
    return dict(
        producer_group=a,
        topic=b,
        default_topic=c,
        default_topic_queue_nums=_parse_int32(d, "d"),
        queue_id=_parse_int32(e, "e"),
        sys_flag=_parse_int32(f, "f"),
        born_timestamp=_parse_int64(g, "g"),
        flag=_parse_int32(h, "h"),
        properties=get("i"),
        reconsume_times=None if j is None else _parse_int32(j, "j"),
        unit_mode=False if k is None else k.lower() == "true",
        max_reconsume_times=None if l_ is None else _parse_int32(l_, "l"),
        batch=False if m is None else m.lower() == "true",
        extra=_extra_of(ext, _V2_KEYS),
    )


def _extra_of(ext: Mapping[str, str], known: frozenset[str]) -> dict[str, str]:
    if not ext.keys() - known:  # the usual case, decided in C
        return {}
    return {k: v for k, v in ext.items() if k not in known}


@command_header
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> requester; hosts are ``ip:port``."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int32
    queue_id: Int32
    sys_flag: Int32
    born_timestamp: Int64
    flag: Int32
    properties: str | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool = False
    born_host: str
    store_host: str
    store_timestamp: Int64


# ----------------------------------------------------------------------------------------
# Pull (docs/PROTOCOL.md 4.2)

_PULL_REQUEST_KEYS = frozenset(
    (
        "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
        "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion",
        "expressionType", "bname",
    )
)


@command_header
class PullMessageRequestHeader(CommandHeader):
    """PULL_MESSAGE (11) / LITE_PULL_MESSAGE (361) (FastCodesHeader, +bname).

    ``sys_flag`` holds ``PullSysFlag`` bits; ``subscription`` is only meaningful with
    the SUBSCRIPTION bit. ``bname`` is part of upstream's hand-written key list (last).
    """

    FAST_CODES: ClassVar[bool] = True

    consumer_group: str
    topic: str
    queue_id: Int32
    queue_offset: Int64
    max_msg_nums: Int32
    sys_flag: Int32
    commit_offset: Int64
    suspend_timeout_millis: Int64
    subscription: str | None = None
    sub_version: Int64
    expression_type: str | None = None
    bname: str | None = None

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str] | None) -> Self:
        if ext is None:
            ext = {}
        if cls is PullMessageRequestHeader:
            # The C twin first (protocol/_command.c, pull_header): the header, None where
            # _pull_fast gives None, NotImplemented for what it leaves to _pull_fast.
            fast: Any = NotImplemented if _c_pull_header is None else \
                _c_pull_header(ext, cls, _PULL_REQUEST_KEYS)
            if fast is NotImplemented:
                fast = _pull_fast(ext)
            if fast is not None:
                return fast  # exactly cls, checked above
        get = ext.get
        consumer_group = get("consumerGroup")
        topic = get("topic")
        queue_id = get("queueId")
        queue_offset = get("queueOffset")
        max_msg_nums = get("maxMsgNums")
        sys_flag = get("sysFlag")
        commit_offset = get("commitOffset")
        suspend = get("suspendTimeoutMillis")
        sub_version = get("subVersion")
        if consumer_group is None:
            raise _missing("consumerGroup")
        if topic is None:
            raise _missing("topic")
        if queue_id is None:
            raise _missing("queueId")
        if queue_offset is None:
            raise _missing("queueOffset")
        if max_msg_nums is None:
            raise _missing("maxMsgNums")
        if sys_flag is None:
            raise _missing("sysFlag")
        if commit_offset is None:
            raise _missing("commitOffset")
        if suspend is None:
            raise _missing("suspendTimeoutMillis")
        if sub_version is None:
            raise _missing("subVersion")
        return cls(
            consumer_group=consumer_group,
            topic=topic,
            queue_id=_parse_int32(queue_id, "queueId"),
            queue_offset=_parse_int64(queue_offset, "queueOffset"),
            max_msg_nums=_parse_int32(max_msg_nums, "maxMsgNums"),
            sys_flag=_parse_int32(sys_flag, "sysFlag"),
            commit_offset=_parse_int64(commit_offset, "commitOffset"),
            suspend_timeout_millis=_parse_int64(suspend, "suspendTimeoutMillis"),
            subscription=get("subscription"),
            sub_version=_parse_int64(sub_version, "subVersion"),
            expression_type=get("expressionType"),
            bname=get("bname"),
            extra=_extra_of(ext, _PULL_REQUEST_KEYS),
        )

    def to_ext_fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.consumer_group is not None:
            out["consumerGroup"] = self.consumer_group
        if self.topic is not None:
            out["topic"] = self.topic
        if self.queue_id is not None:
            out["queueId"] = str(self.queue_id)
        if self.queue_offset is not None:
            out["queueOffset"] = str(self.queue_offset)
        if self.max_msg_nums is not None:
            out["maxMsgNums"] = str(self.max_msg_nums)
        if self.sys_flag is not None:
            out["sysFlag"] = str(self.sys_flag)
        if self.commit_offset is not None:
            out["commitOffset"] = str(self.commit_offset)
        if self.suspend_timeout_millis is not None:
            out["suspendTimeoutMillis"] = str(self.suspend_timeout_millis)
        if self.subscription is not None:
            out["subscription"] = self.subscription
        if self.sub_version is not None:
            out["subVersion"] = str(self.sub_version)
        if self.expression_type is not None:
            out["expressionType"] = self.expression_type
        if self.bname is not None:
            out["bname"] = self.bname
        if self.extra:
            _merge_extra(out, self.extra)
        return out


# The fields _pull_fast sets; checked against the class at import, so a field added to
# PullMessageRequestHeader cannot be left unset by the fast path.
_PULL_HEADER_FIELDS = ("consumer_group", "topic", "queue_id", "queue_offset", "max_msg_nums",
                       "sys_flag", "commit_offset", "suspend_timeout_millis", "subscription",
                       "sub_version", "expression_type", "bname", "extra")
if {f.name for f in fields(PullMessageRequestHeader)} != set(_PULL_HEADER_FIELDS):  # type: ignore[arg-type]
    raise TypeError("PullMessageRequestHeader's fields changed: update _pull_fast")

try:
    refuse_extension("aiorocketmq.protocol._command")
    from ._command import pull_header as _c_pull_header
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: _pull_fast runs
    _c_pull_header = None  # type: ignore[assignment]


def _pull_fast(ext: Mapping[str, str]) -> PullMessageRequestHeader | None:
    """``PullMessageRequestHeader.from_ext_fields`` for what clients send (every pull
    decodes one): the required fields present, queueId, maxMsgNums and sysFlag 1-9 ASCII
    digits (int), the four longs 1-18, which fit their Java type without a range check;
    filled without keyword parsing. ``None`` sends anything else to the general decoder
    (and its errors). The reference of ``_command.pull_header``."""
    get = ext.get
    queue_id = get("queueId")
    queue_offset = get("queueOffset")
    max_msg_nums = get("maxMsgNums")
    sys_flag = get("sysFlag")
    commit_offset = get("commitOffset")
    suspend = get("suspendTimeoutMillis")
    sub_version = get("subVersion")
    try:
        if (queue_id is None or queue_offset is None or max_msg_nums is None or sys_flag is None
                or commit_offset is None or suspend is None or sub_version is None
                or not (0 < len(queue_id) < 10 and 0 < len(max_msg_nums) < 10
                        and 0 < len(sys_flag) < 10 and 0 < len(queue_offset) < 19
                        and 0 < len(commit_offset) < 19 and 0 < len(suspend) < 19
                        and 0 < len(sub_version) < 19)
                or not ((digits := queue_id + queue_offset + max_msg_nums + sys_flag
                         + commit_offset + suspend + sub_version).isdigit()
                        and digits.isascii())):
            return None
    except TypeError:  # a number's value that is not a str: the general decoder's to judge
        return None
    consumer_group = get("consumerGroup")
    topic = get("topic")
    if consumer_group is None or topic is None:
        return None
    hdr: PullMessageRequestHeader = _new_object(PullMessageRequestHeader)
    hdr.consumer_group = consumer_group
    hdr.topic = topic
    hdr.queue_id = int(queue_id)
    hdr.queue_offset = int(queue_offset)
    hdr.max_msg_nums = int(max_msg_nums)
    hdr.sys_flag = int(sys_flag)
    hdr.commit_offset = int(commit_offset)
    hdr.suspend_timeout_millis = int(suspend)
    hdr.subscription = get("subscription")
    hdr.sub_version = int(sub_version)
    hdr.expression_type = get("expressionType")
    hdr.bname = get("bname")
    hdr.extra = _extra_of(ext, _PULL_REQUEST_KEYS)
    return hdr


_PULL_RESPONSE_KEYS = frozenset(("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"))


@command_header
class PullMessageResponseHeader(CommandHeader):
    """Answer to PULL_MESSAGE (FastCodesHeader).

    All four fields must be present for codes 0, 19, 20 and 21: Java and ali-ons
    clients read them unconditionally.
    """

    FAST_CODES: ClassVar[bool] = True

    suggest_which_broker_id: Int64
    next_begin_offset: Int64
    min_offset: Int64
    max_offset: Int64

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str] | None) -> Self:
        if ext is None:
            ext = {}
        get = ext.get
        suggest = get("suggestWhichBrokerId")
        next_begin = get("nextBeginOffset")
        min_offset = get("minOffset")
        max_offset = get("maxOffset")
        if suggest is None:
            raise _missing("suggestWhichBrokerId")
        if next_begin is None:
            raise _missing("nextBeginOffset")
        if min_offset is None:
            raise _missing("minOffset")
        if max_offset is None:
            raise _missing("maxOffset")
        return cls(
            suggest_which_broker_id=_parse_int64(suggest, "suggestWhichBrokerId"),
            next_begin_offset=_parse_int64(next_begin, "nextBeginOffset"),
            min_offset=_parse_int64(min_offset, "minOffset"),
            max_offset=_parse_int64(max_offset, "maxOffset"),
            extra=_extra_of(ext, _PULL_RESPONSE_KEYS) if len(ext) > 4 else {},
        )

    def to_ext_fields(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.suggest_which_broker_id is not None:
            out["suggestWhichBrokerId"] = str(self.suggest_which_broker_id)
        if self.next_begin_offset is not None:
            out["nextBeginOffset"] = str(self.next_begin_offset)
        if self.min_offset is not None:
            out["minOffset"] = str(self.min_offset)
        if self.max_offset is not None:
            out["maxOffset"] = str(self.max_offset)
        if self.extra:
            _merge_extra(out, self.extra)
        return out


# ----------------------------------------------------------------------------------------
# Offsets (docs/PROTOCOL.md 4.5)


@command_header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    """QUERY_CONSUMER_OFFSET (14) (+bname)."""

    consumer_group: str
    topic: str
    queue_id: Int32
    bname: str | None = None


@command_header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: Int64


@command_header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    """UPDATE_CONSUMER_OFFSET (15), usually oneway (+bname)."""

    consumer_group: str
    topic: str
    queue_id: Int32
    commit_offset: Int64
    bname: str | None = None


@command_header
class UpdateConsumerOffsetResponseHeader(CommandHeader):
    """No fields; a JSON answer carrying it has ``"extFields":{}``."""


@command_header
class GetMaxOffsetRequestHeader(CommandHeader):
    """GET_MAX_OFFSET (30) (+bname)."""

    topic: str
    queue_id: Int32
    bname: str | None = None


@command_header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: Int64


@command_header
class GetMinOffsetRequestHeader(CommandHeader):
    """GET_MIN_OFFSET (31) (+bname)."""

    topic: str
    queue_id: Int32
    bname: str | None = None


@command_header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: Int64


@command_header
class SearchOffsetRequestHeader(CommandHeader):
    """SEARCH_OFFSET_BY_TIMESTAMP (29) (+bname)."""

    topic: str
    queue_id: Int32
    timestamp: Int64
    bname: str | None = None


@command_header
class SearchOffsetResponseHeader(CommandHeader):
    offset: Int64


@command_header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    """GET_EARLIEST_MSG_STORETIME (32) (+bname)."""

    topic: str
    queue_id: Int32
    bname: str | None = None


@command_header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Int64


# ----------------------------------------------------------------------------------------
# Query / view (docs/PROTOCOL.md 4.10)


@command_header
class ViewMessageRequestHeader(CommandHeader):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is a commit-log offset."""

    offset: Int64


@command_header
class QueryMessageRequestHeader(CommandHeader):
    """QUERY_MESSAGE (12).

    ``unique_key_query`` is not a Java field but the extField ``_UNIQUE_KEY_QUERY`` the
    client adds; when true the broker uses its own ``defaultQueryMaxNum``.
    """

    topic: str
    key: str
    max_num: Int32
    begin_timestamp: Int64
    end_timestamp: Int64
    unique_key_query: bool | None = field(default=None, metadata=wire("_UNIQUE_KEY_QUERY"))


@command_header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: Int64
    index_last_update_phyoffset: Int64


# ----------------------------------------------------------------------------------------
# Client registration, retry, transactions (docs/PROTOCOL.md 4.6, 4.8, 4.9)


@command_header
class UnregisterClientRequestHeader(CommandHeader):
    """UNREGISTER_CLIENT (35): one group per call; note the wire key ``clientID``."""

    client_id: str = field(metadata=wire("clientID"))
    producer_group: str | None = None
    consumer_group: str | None = None


@command_header
class UnregisterClientResponseHeader(CommandHeader):
    """No fields; a JSON answer carrying it has ``"extFields":{}``."""


@command_header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_group: str


@command_header
class GetConsumerListByGroupResponseHeader(CommandHeader):
    """No fields; a JSON answer carrying it has ``"extFields":{}``."""


@command_header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker -> client, oneway."""

    consumer_group: str


@command_header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    """CONSUMER_SEND_MSG_BACK (36) (+bname).

    ``offset`` is the consumed record's commit-log offset; ``delay_level`` 0 lets the
    broker choose, -1 sends straight to the DLQ.
    """

    offset: Int64
    group: str
    delay_level: Int32
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: Int32 | None = None
    bname: str | None = None


@command_header
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37), oneway (+bname; omitted when answering a check).

    ``commit_or_rollback``: 0 unknown, 8 commit, 12 rollback (``MessageSysFlag``).
    """

    producer_group: str
    tran_state_table_offset: Int64
    commit_log_offset: Int64
    commit_or_rollback: Int32
    from_transaction_check: bool | None = False
    msg_id: str
    transaction_id: str | None = None
    bname: str | None = None


@command_header
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, oneway (+bname, unset in 4.9.7)."""

    tran_state_table_offset: Int64
    commit_log_offset: Int64
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    bname: str | None = None


# ----------------------------------------------------------------------------------------
# Broker admin (docs/PROTOCOL.md 3.4, 3.5, 4.11)


@command_header
class CreateTopicRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_TOPIC (17); ``topic_filter_type`` is SINGLE_TAG or MULTI_TAG."""

    topic: str
    default_topic: str
    read_queue_nums: Int32
    write_queue_nums: Int32
    perm: Int32
    topic_filter_type: str
    topic_sys_flag: Int32 | None = None
    order: bool


@command_header
class DeleteTopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@command_header
class GetAllTopicConfigResponseHeader(CommandHeader):
    """Answer to GET_ALL_TOPIC_CONFIG (21); no fields."""


@command_header
class GetBrokerConfigResponseHeader(CommandHeader):
    """Answer to GET_BROKER_CONFIG (26): ``version`` is the DataVersion as JSON text."""

    version: str


@command_header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@command_header
class GetConsumeStatsRequestHeader(CommandHeader):
    """GET_CONSUME_STATS (208); without ``topic`` every topic of the group."""

    consumer_group: str
    topic: str | None = None


@command_header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317)."""

    is_order: bool


@command_header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@command_header
class GetProducerConnectionListRequestHeader(CommandHeader):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@command_header
class GetAllProducerInfoRequestHeader(CommandHeader):
    """GET_ALL_PRODUCER_INFO (328); no fields."""


@command_header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@command_header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307): admin -> broker, forwarded broker -> client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@command_header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309): admin -> broker, forwarded with ``broker_name``."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@command_header
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220).

    ``timestamp`` -1 means the max offset; the wire key of ``is_force`` is ``isForce``.
    """

    topic: str
    group: str
    timestamp: Int64
    is_force: bool


@command_header
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str
    group: str
    client_addr: str | None = None


@command_header
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314)."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@command_header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str
    remove_offset: bool = False


@command_header
class QueryCorrectionOffsetHeader(CommandHeader):
    """QUERY_CORRECTION_OFFSET (308); ``filter_groups`` is comma-separated."""

    filter_groups: str | None = None
    compare_group: str
    topic: str


@command_header
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    """QUERY_CONSUME_TIME_SPAN (303)."""

    topic: str
    group: str


@command_header
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE (321); Java primitives, so all but the strings default to 0."""

    topic: str | None = None
    queue_id: Int32 = 0
    index: Int64 = 0
    count: Int32 = 0
    consumer_group: str | None = None


@command_header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315)."""

    stats_name: str
    stats_key: str


@command_header
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    """RESUME_CHECK_HALF_MESSAGE (323)."""

    msg_id: str | None = None


# The ACL admin headers (50, 51, 53) declare no required field. Upstream marks
# ``accessKey`` / ``globalWhiteAddrs`` / ``aclFileFullPath`` @CFNotNull, but 4.9.7's
# decodeCommandCustomHeader only logs a missing one and leaves it null; the stock broker
# then answers from its PlainPermissionManager: 50 and 51 their FAILED code and remark
# with the key shown as "null", 53 its FAILED code without the list, and 53 without a
# path updates the default plain_acl.yml (what ``mqadmin updateGlobalWhiteAddr`` sends
# without ``-p``). Refusing them at the decoder would answer SYSTEM_ERROR instead.


@command_header
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50). ``admin`` is ``Boolean.parseBoolean`` of the raw
    value: case-insensitive ``"true"``, nothing trimmed (``" true"`` is not an admin)."""

    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@command_header
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str | None = None


@command_header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53). ``acl_file_full_path`` ``None`` or empty: the
    broker's default plain_acl.yml."""

    global_white_addrs: str | None = None
    acl_file_full_path: str | None = None


@command_header
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """Answer to GET_BROKER_CLUSTER_ACL_INFO (52)."""

    version: str
    all_acl_file_version: str | None = None
    broker_name: str
    broker_addr: str
    cluster_name: str


# ----------------------------------------------------------------------------------------
# Nameserver (docs/PROTOCOL.md 3.1, 4.3, 4.4, 4.11)


@command_header
class RegisterBrokerRequestHeader(CommandHeader):
    """REGISTER_BROKER (103).

    ``body_crc32`` is ``crc32(body) & 0x7FFFFFFF``; 0 disables the nameserver's check.
    """

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Int64
    compressed: bool = False
    body_crc32: Int32 = 0


@command_header
class RegisterBrokerResponseHeader(CommandHeader):
    """Both fields are set only for a slave whose master is known."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@command_header
class UnRegisterBrokerRequestHeader(CommandHeader):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Int64


@command_header
class GetRouteInfoRequestHeader(CommandHeader):
    """GET_ROUTEINFO_BY_TOPIC (105); ``accept_standard_json_only`` picks the body form."""

    topic: str
    accept_standard_json_only: bool | None = None


@command_header
class PutKVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@command_header
class GetKVConfigRequestHeader(CommandHeader):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@command_header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@command_header
class DeleteKVConfigRequestHeader(CommandHeader):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@command_header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str


@command_header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str


@command_header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: Int32


@command_header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@command_header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: Int32


@command_header
class GetTopicsByClusterRequestHeader(CommandHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


@command_header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_NAMESRV (216); without ``cluster_name`` from every cluster."""

    topic: str
    cluster_name: str | None = None


@command_header
class QueryDataVersionRequestHeader(CommandHeader):
    """QUERY_DATA_VERSION (322); body is the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Int64


@command_header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


# The fields _send_v2_fast sets; checked against the class at import, so a field added to
# SendMessageRequestHeader cannot be left unset by the fast path.
_SEND_HEADER_FIELDS = ("producer_group", "topic", "default_topic", "default_topic_queue_nums",
                       "queue_id", "sys_flag", "born_timestamp", "flag", "properties",
                       "reconsume_times", "unit_mode", "batch", "max_reconsume_times", "bname",
                       "extra")
if {f.name for f in fields(SendMessageRequestHeader)} != set(_SEND_HEADER_FIELDS):  # type: ignore[arg-type]
    raise TypeError("SendMessageRequestHeader's fields changed: update _send_v2_fast")
_new_object = object.__new__

try:
    refuse_extension("aiorocketmq.protocol._command")
    from ._command import send_v2_header as _c_send_v2_header
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: _send_v2_fast runs
    _c_send_v2_header = None  # type: ignore[assignment]


def _send_v2_fast(ext: Mapping[str, str]) -> SendMessageRequestHeader | None:
    """``_send_v2_fields`` for what the Java client sends (SEND_MESSAGE_V2 is the hot path):
    every required letter present, numbers of 1-9 (int) or 1-18 (long) ASCII digits, which
    fit their Java type without a range check; filled without keyword parsing. ``None``
    sends anything else to the general path (and its errors)."""
    get = ext.get
    d = get("d")
    e = get("e")
    f = get("f")
    g = get("g")
    h = get("h")
    j = get("j")
    l_ = get("l")
    if (d is None or e is None or f is None or g is None or h is None
            or not (0 < len(d) < 10 and 0 < len(e) < 10 and 0 < len(f) < 10
                    and 0 < len(h) < 10 and 0 < len(g) < 19)
            or not ((digits := d + e + f + h + g).isdigit() and digits.isascii())
            or (j is not None and not (0 < len(j) < 10 and j.isdigit() and j.isascii()))
            or (l_ is not None and not (0 < len(l_) < 10 and l_.isdigit() and l_.isascii()))):
        return None
    a = get("a")
    b = get("b")
    c = get("c")
    if a is None or b is None or c is None:
        return None
    k = get("k")
    m = get("m")
    hdr: SendMessageRequestHeader = _new_object(SendMessageRequestHeader)
    hdr.producer_group = a
    hdr.topic = b
    hdr.default_topic = c
    hdr.default_topic_queue_nums = int(d)
    hdr.queue_id = int(e)
    hdr.sys_flag = int(f)
    hdr.born_timestamp = int(g)
    hdr.flag = int(h)
    hdr.properties = get("i")
    hdr.reconsume_times = None if j is None else int(j)
    hdr.unit_mode = False if k is None else k.lower() == "true"
    hdr.batch = False if m is None else m.lower() == "true"
    hdr.max_reconsume_times = None if l_ is None else int(l_)
    hdr.bname = get("n")
    hdr.extra = _extra_of(ext, _V2_KEYS)
    return hdr


_V2_SEND_CODES = frozenset(
    (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
)
_V1_SEND_CODES = frozenset((RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE))


def decode_send_request_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """The send header of any send code, as upstream ``parseRequestHeader`` reads it.

    Letters (V2) for SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE_V2,
    converted to the long form; long names for SEND_MESSAGE and SEND_REPLY_MESSAGE.
    The broker takes the batch path from ``batch``, not from the code.

    Raises:
        HeaderError: a required field is missing or a number does not parse, or the
            request code is not a send code.
    """
    code = request.code
    if code in _V2_SEND_CODES:
        # As from_ext_fields(...).to_v1() (``n`` becomes ``bname``) without the V2 object.
        ext = request.ext_fields if request.ext_fields is not None else {}
        # The C twin first (protocol/_command.c, send_v2_header): the header, None where
        # _send_v2_fast gives None, NotImplemented for what it leaves to _send_v2_fast.
        fast = NotImplemented if _c_send_v2_header is None else \
            _c_send_v2_header(ext, SendMessageRequestHeader, _V2_KEYS)
        if fast is NotImplemented:
            fast = _send_v2_fast(ext)
        if fast is not None:
            return fast
        return SendMessageRequestHeader(**_send_v2_fields(ext), bname=ext.get("n"))
    if code in _V1_SEND_CODES:
        return SendMessageRequestHeader.from_ext_fields(request.ext_fields)
    raise HeaderError(f"request code {code} is not a send request")
