"""The JSON bodies that nameserver, broker, clients and mqadmin exchange (docs/PROTOCOL.md 4.3-4.11).

Each body is a slotted dataclass with snake_case attributes; a table of fields maps
them to the Java property names (getter-derived camelCase, e.g. ``clientID``,
``lockOKMQSet``, ``droped``). Every body class has:

* ``to_json() -> dict``: a JSON-ready value whose keys are in fastjson's bean order
  (alphabetical by property name) with ``None`` fields omitted; ``MessageQueue`` map keys
  become :class:`~protocol.fastjson.ObjectKey`, enums become names;
* ``from_json(obj)``: missing or ``null`` keys give the Java default, unknown keys are
  ignored (5.x additions are harmless), numbers given as strings are accepted as fastjson
  accepts them, and a value of the wrong JSON type raises ``ProtocolError``;
* ``encode(*, standard=False) -> bytes`` / ``decode(data)``: through :mod:`protocol.fastjson`.

Java ``Set`` properties are Python lists: the order read is the order written back, which
makes re-encoding a captured body byte-identical; readers that need set semantics build
a set. Maps keep their insertion order for the same reason (fastjson writes ``HashMap``s
in hash order, which the vectors capture). Identity strings that Java leaves ``null``
until set (topic, broker and group names) are ``""`` by default; genuinely optional
strings are ``None``.

Upstream classes: ``common/.../protocol/{body,route,heartbeat}/*``, ``common/.../admin/*``,
``common/.../subscription/SubscriptionGroupConfig``, ``TopicConfig``, ``DataVersion``,
``message/MessageQueue``, ``filter/FilterAPI``, ``MixAll.properties2String``.
"""

from __future__ import annotations

import random
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, TypeVar

from .codes import LanguageCode, MixAll, Perm
from .errors import ProtocolError
from .fastjson import ObjectKey, dumps, java_double_str, loads
from .javautil import java_string_hash

__all__ = [
    "MessageQueue",
    "DataVersion",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "RegisterBrokerBody",
    "QueueData",
    "BrokerData",
    "TopicRouteData",
    "ClusterInfo",
    "TopicList",
    "KVTable",
    "SubscriptionData",
    "build_subscription_data",
    "ConsumerData",
    "ProducerData",
    "HeartbeatData",
    "ConsumerListBody",
    "GetConsumerListByGroupResponseBody",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "UnlockBatchRequestBody",
    "Connection",
    "ConsumerConnection",
    "ProducerConnection",
    "OffsetWrapper",
    "ConsumeStats",
    "ConsumeStatsList",
    "ConsumeQueueData",
    "QueryConsumeQueueResponseBody",
    "TopicOffset",
    "TopicStatsTable",
    "GroupList",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "ConsumerOffsetSerializeWrapper",
    "ResetOffsetBody",
    "ProcessQueueInfo",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "ConsumeMessageDirectlyResult",
    "GetConsumerStatusBody",
    "QueueTimeSpan",
    "QueryConsumeTimeSpanBody",
    "QueryCorrectionOffsetBody",
    "CheckClientRequestBody",
    "BrokerStatsItem",
    "BrokerStatsData",
    "ProducerInfo",
    "properties_to_string",
    "string_to_properties",
]

_B = TypeVar("_B", bound="_Body")
_T = TypeVar("_T")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------------------
# Value converters. Decoders take a parsed JSON value (never None: a null or missing key
# keeps the default) and raise ProtocolError for the wrong type.


def _bad(what: str, v: Any) -> ProtocolError:
    text = repr(v)
    if len(text) > 80:
        text = text[:77] + "..."
    return ProtocolError(f"expected {what}, got {type(v).__name__} {text}")


def _d_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_double_str(v)
    raise _bad("a string", v)


def _d_int(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise _bad("an integer", v)


def _d_bool(v: Any) -> bool:
    if v is True or v is False:
        return v
    if isinstance(v, str):
        low = v.strip().lower()
        if low == "true":
            return True
        if low == "false":
            return False
    elif isinstance(v, int):
        return v != 0
    raise _bad("a boolean", v)


def _d_float(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    raise _bad("a number", v)


def _d_list(dec: Callable[[Any], _T]) -> Callable[[Any], list[_T]]:
    def decode_list(v: Any) -> list[_T]:
        if not isinstance(v, (list, tuple)):
            raise _bad("an array", v)
        return [dec(x) for x in v if x is not None]

    return decode_list


def _d_map(kdec: Callable[[Any], Any], vdec: Callable[[Any], Any]) -> Callable[[Any], dict[Any, Any]]:
    def decode_map(v: Any) -> dict[Any, Any]:
        if not isinstance(v, dict):
            raise _bad("an object", v)
        return {kdec(k): vdec(x) for k, x in v.items() if x is not None}

    return decode_map


def _d_lang(v: Any) -> LanguageCode:
    if isinstance(v, str):
        return LanguageCode.__members__.get(v, LanguageCode.OTHER)
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return LanguageCode(v)
        except ValueError:
            return LanguageCode.OTHER
    raise _bad("a language name", v)


def _e_lang(v: int) -> str:
    try:
        return LanguageCode(v).name
    except ValueError:
        return LanguageCode.OTHER.name


def _e_obj(v: Any) -> Any:
    return v.to_json()


def _e_list_obj(v: Iterable[Any]) -> list[Any]:
    return [x.to_json() for x in v]


def _e_map_obj(v: Mapping[Any, Any]) -> dict[Any, Any]:
    return {k: x.to_json() for k, x in v.items()}


def _e_mq_map(venc: Callable[[Any], Any] | None) -> Callable[[Mapping[MessageQueue, Any]], dict[Any, Any]]:
    if venc is None:
        return lambda v: {mq.to_object_key(): x for mq, x in v.items()}
    return lambda v: {mq.to_object_key(): venc(x) for mq, x in v.items()}


def _e_copy_list(v: Iterable[Any]) -> list[Any]:
    return list(v)


def _e_copy_map(v: Mapping[Any, Any]) -> dict[Any, Any]:
    return dict(v)


# ---------------------------------------------------------------------------------------
# The field table and the generic body behaviour.


class _Field(NamedTuple):
    attr: str
    name: str
    enc: Callable[[Any], Any] | None  # None: the value is already JSON-ready
    dec: Callable[[Any], Any] | None  # None: written only (a derived getter)
    aliases: tuple[str, ...] = ()


def _spec(*fields: _Field) -> tuple[_Field, ...]:
    """Fields in fastjson's bean order: sorted by property name (ASCII, as String.compareTo)."""
    return tuple(sorted(fields, key=lambda f: f.name))


def _F(
    attr: str,
    name: str,
    dec: Callable[[Any], Any] | None,
    enc: Callable[[Any], Any] | None = None,
    aliases: tuple[str, ...] = (),
) -> _Field:
    return _Field(attr, name, enc, dec, aliases)


def _as_mapping(cls: type, obj: Any) -> Mapping[Any, Any]:
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, ObjectKey):
        return obj.as_dict()
    if isinstance(obj, Mapping):
        return obj
    raise _bad(f"a JSON object for {cls.__name__}", obj)


class _Body:
    """Generic ``to_json`` / ``from_json`` / ``encode`` / ``decode`` driven by ``_SPEC``."""

    __slots__ = ()
    _SPEC: ClassVar[tuple[_Field, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr, name, enc, _dec, _aliases in self._SPEC:
            v = getattr(self, attr)
            if v is None:
                continue
            out[name] = v if enc is None else enc(v)
        return out

    @classmethod
    def from_json(cls: type[_B], obj: Any) -> _B:
        m = _as_mapping(cls, obj)
        kwargs: dict[str, Any] = {}
        for attr, name, _enc, dec, aliases in cls._SPEC:
            if dec is None:
                continue
            v = m.get(name)
            if v is None:
                for alias in aliases:
                    v = m.get(alias)
                    if v is not None:
                        break
                else:
                    continue
            kwargs[attr] = dec(v)
        return cls(**kwargs)

    def encode(self, *, standard: bool = False) -> bytes:
        """This body as fastjson writes it (``standard``: BrowserCompatible form)."""
        return dumps(self.to_json(), standard=standard)

    @classmethod
    def decode(cls: type[_B], data: bytes | bytearray | memoryview | str) -> _B:
        """Parse a body; raises ``ProtocolError`` if it is not JSON or not this shape."""
        return cls.from_json(loads(data))


# ---------------------------------------------------------------------------------------
# MessageQueue: the key of many maps.


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """``MessageQueue``: (topic, brokerName, queueId), hashable, ordered like Java ``compareTo``.

    Ordering compares code points where Java compares UTF-16 units; the two differ only
    for characters beyond U+FFFF, which topic and broker names cannot contain.
    """

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    def to_object_key(self) -> ObjectKey:
        """This queue as a fastjson object map key."""
        return ObjectKey.presorted(
            (("brokerName", self.broker_name), ("queueId", self.queue_id), ("topic", self.topic))
        )

    @classmethod
    def from_json(cls, obj: Any) -> MessageQueue:
        if isinstance(obj, MessageQueue):
            return obj
        m = _as_mapping(cls, obj)
        topic = m.get("topic")
        broker = m.get("brokerName")
        qid = m.get("queueId")
        return cls(
            "" if topic is None else _d_str(topic),
            "" if broker is None else _d_str(broker),
            0 if qid is None else _d_int(qid),
        )

    def encode(self, *, standard: bool = False) -> bytes:
        return dumps(self.to_json(), standard=standard)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> MessageQueue:
        return cls.from_json(loads(data))


def _d_mq(v: Any) -> MessageQueue:
    """A MessageQueue from an object key, an object, or a quoted key holding its JSON text
    (what BrowserCompatible output would carry)."""
    if isinstance(v, str) and v.startswith("{"):
        v = loads(v)
    return MessageQueue.from_json(v)


def _e_mq(v: MessageQueue) -> dict[str, Any]:
    return v.to_json()


def _e_mq_list(v: Iterable[MessageQueue]) -> list[dict[str, Any]]:
    return [mq.to_json() for mq in v]


# ---------------------------------------------------------------------------------------
# Topic configuration and registration (docs/PROTOCOL.md 4.4)


@dataclass(slots=True)
class DataVersion(_Body):
    """``DataVersion``: equal when both ``timestamp`` and ``counter`` are equal."""

    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("timestamp", "timestamp", _d_int),
        _F("counter", "counter", _d_int),
    )

    def next_version(self, now_ms: int | None = None) -> None:
        """``nextVersion()``: stamp the current time and bump the counter, in place."""
        self.timestamp = _now_ms() if now_ms is None else now_ms
        self.counter += 1

    def assign_new_one(self, other: DataVersion) -> None:
        self.timestamp = other.timestamp
        self.counter = other.counter


@dataclass(slots=True)
class TopicConfig(_Body):
    """``TopicConfig`` with the Java defaults (16/16 queues, perm RW, SINGLE_TAG)."""

    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = Perm.READ | Perm.WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("topic_name", "topicName", _d_str),
        _F("read_queue_nums", "readQueueNums", _d_int),
        _F("write_queue_nums", "writeQueueNums", _d_int),
        _F("perm", "perm", _d_int, int),
        _F("topic_filter_type", "topicFilterType", _d_str),
        _F("topic_sys_flag", "topicSysFlag", _d_int, aliases=("topicSynFlag",)),
        _F("order", "order", _d_bool),
    )

    def encode_compact(self) -> str:
        """``TopicConfig.encode()``: ``name read write perm filterType`` (compressed register)."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{int(self.perm)} {self.topic_filter_type}"
        )

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        """``TopicConfig.decode(String)``; ``topicSysFlag`` and ``order`` keep their defaults."""
        parts = text.split(" ")
        while parts and parts[-1] == "":
            parts.pop()  # Java's split drops trailing empty strings
        if len(parts) != 5:
            raise ProtocolError(f"compact topic config needs 5 fields, got {text!r}")
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        except ValueError:
            raise ProtocolError(f"compact topic config has a bad number: {text!r}") from None


@dataclass(slots=True)
class TopicConfigSerializeWrapper(_Body):
    """``TopicConfigSerializeWrapper`` (GET_ALL_TOPIC_CONFIG body, part of REGISTER_BROKER)."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("topic_config_table", "topicConfigTable", _d_map(_d_str, TopicConfig.from_json), _e_map_obj),
        _F("data_version", "dataVersion", DataVersion.from_json, _e_obj),
    )


_INT32 = struct.Struct(">i")
_MAX_INFLATED = 64 * 1024 * 1024


@dataclass(slots=True)
class RegisterBrokerBody(_Body):
    """``RegisterBrokerBody``: JSON, or with ``compressed=True`` the zlib form of docs/PROTOCOL.md 4.4."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F(
            "topic_config_serialize_wrapper",
            "topicConfigSerializeWrapper",
            TopicConfigSerializeWrapper.from_json,
            _e_obj,
        ),
        _F("filter_server_list", "filterServerList", _d_list(_d_str), _e_copy_list),
    )

    def encode(self, *, standard: bool = False, compressed: bool = False) -> bytes:
        """JSON body, or (``compressed``) zlib of ``len+DataVersion JSON``, ``n``,
        n x ``len+TopicConfig.encode_compact()``, ``len+filterServerList JSON``."""
        if not compressed:
            return _Body.encode(self, standard=standard)
        wrapper = self.topic_config_serialize_wrapper
        raw = bytearray()
        dv = wrapper.data_version.encode()
        raw += _INT32.pack(len(dv))
        raw += dv
        raw += _INT32.pack(len(wrapper.topic_config_table))
        for tc in wrapper.topic_config_table.values():
            line = tc.encode_compact().encode("utf-8")
            raw += _INT32.pack(len(line))
            raw += line
        fsl = dumps(self.filter_server_list)
        raw += _INT32.pack(len(fsl))
        raw += fsl
        return zlib.compress(bytes(raw), 9)  # Deflater(BEST_COMPRESSION), zlib wrapper

    @classmethod
    def decode(
        cls, data: bytes | bytearray | memoryview | str, *, compressed: bool = False
    ) -> RegisterBrokerBody:
        """Parse either form; ``compressed`` follows the request header's ``compressed``."""
        if not compressed:
            return cls.from_json(loads(data))
        if isinstance(data, str):
            raise ProtocolError("a compressed register body must be bytes")
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(bytes(data), _MAX_INFLATED)
        except zlib.error as exc:
            raise ProtocolError(f"register body does not inflate: {exc}") from None
        if inflater.unconsumed_tail:
            raise ProtocolError(f"register body inflates beyond {_MAX_INFLATED} bytes")
        pos = 0

        def take(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(raw):
                raise ProtocolError("compressed register body ends early")
            chunk = raw[pos : pos + n]
            pos += n
            return chunk

        def take_int() -> int:
            return int(_INT32.unpack(take(4))[0])

        data_version = DataVersion.decode(take(take_int()))
        table: dict[str, TopicConfig] = {}
        for _ in range(take_int()):
            tc = TopicConfig.decode_compact(take(take_int()).decode("utf-8", "replace"))
            table[tc.topic_name] = tc
        filter_json = take(take_int())
        try:
            filters = [_d_str(x) for x in loads(filter_json) or () if x is not None]
        except (ProtocolError, TypeError):
            filters = []  # Java logs and keeps an empty list
        return cls(TopicConfigSerializeWrapper(table, data_version), filters)


# ---------------------------------------------------------------------------------------
# Route and cluster data (docs/PROTOCOL.md 4.3)


@dataclass(slots=True)
class QueueData(_Body):
    """``QueueData``; reads ``topicSynFlag`` (releases <= 4.8.0) as ``topicSysFlag``."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("broker_name", "brokerName", _d_str),
        _F("read_queue_nums", "readQueueNums", _d_int),
        _F("write_queue_nums", "writeQueueNums", _d_int),
        _F("perm", "perm", _d_int, int),
        _F("topic_sys_flag", "topicSysFlag", _d_int, aliases=("topicSynFlag",)),
    )


@dataclass(slots=True)
class BrokerData(_Body):
    """``BrokerData``: ``broker_addrs`` maps brokerId (0 = master) to ``ip:port``.

    Written with bare numeric keys (legacy) or quoted ones (standard); both are read.
    """

    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("cluster", "cluster", _d_str),
        _F("broker_name", "brokerName", _d_str),
        _F("broker_addrs", "brokerAddrs", _d_map(_d_int, _d_str), _e_copy_map),
    )

    def select_broker_addr(self) -> str | None:
        """The master's address, else a random slave's (``BrokerData.selectBrokerAddr``)."""
        addr = self.broker_addrs.get(MixAll.MASTER_ID)
        if addr is not None:
            return addr
        if not self.broker_addrs:
            return None
        return random.choice(list(self.broker_addrs.values()))


@dataclass(slots=True)
class TopicRouteData(_Body):
    """``TopicRouteData``. ``encode(standard=True)`` is the form for requests with version
    >= V4_9_4 or ``acceptStandardJsonOnly``; the legacy form otherwise (docs/PROTOCOL.md 4.3)."""

    order_topic_conf: str | None = None
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("order_topic_conf", "orderTopicConf", _d_str),
        _F("queue_datas", "queueDatas", _d_list(QueueData.from_json), _e_list_obj),
        _F("broker_datas", "brokerDatas", _d_list(BrokerData.from_json), _e_list_obj),
        _F(
            "filter_server_table",
            "filterServerTable",
            _d_map(_d_str, _d_list(_d_str)),
            lambda v: {k: list(x) for k, x in v.items()},
        ),
    )


@dataclass(slots=True)
class ClusterInfo(_Body):
    """``ClusterInfo`` (GET_BROKER_CLUSTER_INFO), always written in the legacy form."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("broker_addr_table", "brokerAddrTable", _d_map(_d_str, BrokerData.from_json), _e_map_obj),
        _F(
            "cluster_addr_table",
            "clusterAddrTable",
            _d_map(_d_str, _d_list(_d_str)),
            lambda v: {k: list(x) for k, x in v.items()},
        ),
    )

    def retrieve_all_addr_by_cluster(self, cluster: str) -> list[str]:
        """Every broker address (masters and slaves) of ``cluster``."""
        addrs: list[str] = []
        for name in self.cluster_addr_table.get(cluster, ()):
            bd = self.broker_addr_table.get(name)
            if bd is not None:
                addrs.extend(bd.broker_addrs.values())
        return addrs

    def retrieve_all_cluster_names(self) -> list[str]:
        return list(self.cluster_addr_table)


@dataclass(slots=True)
class TopicList(_Body):
    """``TopicList`` (206, 224, 304, 311-313; GET_SYSTEM_TOPIC_LIST_FROM_BROKER)."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("topic_list", "topicList", _d_list(_d_str), _e_copy_list),
        _F("broker_addr", "brokerAddr", _d_str),
    )


@dataclass(slots=True)
class KVTable(_Body):
    """``KVTable`` (GET_KVLIST_BY_NAMESPACE, GET_BROKER_RUNTIME_INFO)."""

    table: dict[str, str] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("table", "table", _d_map(_d_str, _d_str), _e_copy_map),
    )


# ---------------------------------------------------------------------------------------
# Client registration (docs/PROTOCOL.md 4.6)


@dataclass(slots=True)
class SubscriptionData(_Body):
    """``SubscriptionData``; ``filterClassSource`` is never serialized, so not kept."""

    SUB_ALL: ClassVar[str] = "*"

    topic: str = ""
    sub_string: str | None = None
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=_now_ms)
    expression_type: str | None = "TAG"
    class_filter_mode: bool = False

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("topic", "topic", _d_str),
        _F("sub_string", "subString", _d_str),
        _F("tags_set", "tagsSet", _d_list(_d_str), _e_copy_list),
        _F("code_set", "codeSet", _d_list(_d_int), _e_copy_list),
        _F("sub_version", "subVersion", _d_int),
        _F("expression_type", "expressionType", _d_str),
        _F("class_filter_mode", "classFilterMode", _d_bool),
    )


_JAVA_TRIM = "".join(chr(c) for c in range(0x21))  # String.trim() strips chars <= U+0020


def build_subscription_data(
    topic: str, sub_string: str | None, expression_type: str | None = None
) -> SubscriptionData:
    """``FilterAPI.build``: parse a TAG expression into tags and their hash codes.

    ``None``, ``""`` and ``"*"`` subscribe to everything (``sub_string`` becomes ``"*"``);
    otherwise the expression is split on ``||``, each part trimmed, empties dropped and
    duplicates ignored; ``code_set`` holds ``String.hashCode()`` of each tag. A non-TAG
    expression (SQL92) is kept verbatim and must not be empty.

    Raises:
        ValueError: an empty non-TAG expression.
    """
    if expression_type is not None and expression_type != "TAG":
        if not sub_string:
            raise ValueError(f"Expression can't be null! {expression_type}")
        return SubscriptionData(topic, sub_string, expression_type=expression_type)
    if sub_string is None or sub_string == "" or sub_string == SubscriptionData.SUB_ALL:
        return SubscriptionData(topic, SubscriptionData.SUB_ALL)
    tags: list[str] = []
    codes: list[int] = []
    for part in sub_string.split("||"):
        tag = part.strip(_JAVA_TRIM)
        if tag and tag not in tags:
            tags.append(tag)
            code = java_string_hash(tag)
            if code not in codes:
                codes.append(code)
    return SubscriptionData(topic, sub_string, tags, codes)


@dataclass(slots=True)
class ConsumerData(_Body):
    """``ConsumerData``; enums by name (``CONSUME_PASSIVELY``, ``CLUSTERING``, ...)."""

    group_name: str = ""
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("group_name", "groupName", _d_str),
        _F("consume_type", "consumeType", _d_str),
        _F("message_model", "messageModel", _d_str),
        _F("consume_from_where", "consumeFromWhere", _d_str),
        _F(
            "subscription_data_set",
            "subscriptionDataSet",
            _d_list(SubscriptionData.from_json),
            _e_list_obj,
        ),
        _F("unit_mode", "unitMode", _d_bool),
    )


@dataclass(slots=True)
class ProducerData(_Body):
    """``ProducerData``."""

    group_name: str = ""

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(_F("group_name", "groupName", _d_str))


@dataclass(slots=True)
class HeartbeatData(_Body):
    """``HeartbeatData`` (HEART_BEAT body); note the capital ``ID`` of ``clientID``."""

    client_id: str = ""
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("client_id", "clientID", _d_str),
        _F("producer_data_set", "producerDataSet", _d_list(ProducerData.from_json), _e_list_obj),
        _F("consumer_data_set", "consumerDataSet", _d_list(ConsumerData.from_json), _e_list_obj),
    )


@dataclass(slots=True)
class ConsumerListBody(_Body):
    """GET_CONSUMER_LIST_BY_GROUP response body ``{"consumerIdList":[...]}``."""

    consumer_id_list: list[str] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("consumer_id_list", "consumerIdList", _d_list(_d_str), _e_copy_list),
    )


GetConsumerListByGroupResponseBody = ConsumerListBody


# ---------------------------------------------------------------------------------------
# Ordered-consumption locks (docs/PROTOCOL.md 4.7)

_MQ_LIST = _d_list(_d_mq)


@dataclass(slots=True)
class LockBatchRequestBody(_Body):
    """LOCK_BATCH_MQ request body."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: list[MessageQueue] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("consumer_group", "consumerGroup", _d_str),
        _F("client_id", "clientId", _d_str),
        _F("mq_set", "mqSet", _MQ_LIST, _e_mq_list),
    )


@dataclass(slots=True)
class UnlockBatchRequestBody(_Body):
    """UNLOCK_BATCH_MQ request body (same shape as the lock request)."""

    consumer_group: str = ""
    client_id: str = ""
    mq_set: list[MessageQueue] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = LockBatchRequestBody._SPEC


@dataclass(slots=True)
class LockBatchResponseBody(_Body):
    """LOCK_BATCH_MQ response body: the queues now locked by the requester."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("lock_ok_mq_set", "lockOKMQSet", _MQ_LIST, _e_mq_list),
    )


# ---------------------------------------------------------------------------------------
# Admin bodies (docs/PROTOCOL.md 4.11)


@dataclass(slots=True)
class Connection(_Body):
    """``Connection``: one live client of a group; ``language`` travels as its name."""

    client_id: str = ""
    client_addr: str = ""
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("client_id", "clientId", _d_str),
        _F("client_addr", "clientAddr", _d_str),
        _F("language", "language", _d_lang, _e_lang),
        _F("version", "version", _d_int),
    )


@dataclass(slots=True)
class ConsumerConnection(_Body):
    """GET_CONSUMER_CONNECTION_LIST response body."""

    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("connection_set", "connectionSet", _d_list(Connection.from_json), _e_list_obj),
        _F(
            "subscription_table",
            "subscriptionTable",
            _d_map(_d_str, SubscriptionData.from_json),
            _e_map_obj,
        ),
        _F("consume_type", "consumeType", _d_str),
        _F("message_model", "messageModel", _d_str),
        _F("consume_from_where", "consumeFromWhere", _d_str),
    )


@dataclass(slots=True)
class ProducerConnection(_Body):
    """GET_PRODUCER_CONNECTION_LIST response body."""

    connection_set: list[Connection] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("connection_set", "connectionSet", _d_list(Connection.from_json), _e_list_obj),
    )


@dataclass(slots=True)
class OffsetWrapper(_Body):
    """``OffsetWrapper``: one queue's line in ``ConsumeStats``."""

    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("broker_offset", "brokerOffset", _d_int),
        _F("consumer_offset", "consumerOffset", _d_int),
        _F("last_timestamp", "lastTimestamp", _d_int),
    )


@dataclass(slots=True)
class ConsumeStats(_Body):
    """GET_CONSUME_STATS body: ``MessageQueue`` object keys, ``consumeTps`` a double."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("offset_table", "offsetTable", _d_map(_d_mq, OffsetWrapper.from_json), _e_mq_map(_e_obj)),
        _F("consume_tps", "consumeTps", _d_float, float),
    )

    def compute_total_diff(self) -> int:
        """Sum of (brokerOffset - consumerOffset): the group's lag (``computeTotalDiff``)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


def _e_group_stats(v: Iterable[Mapping[str, Iterable[ConsumeStats]]]) -> list[dict[str, Any]]:
    return [{group: [cs.to_json() for cs in stats] for group, stats in m.items()} for m in v]


@dataclass(slots=True)
class ConsumeStatsList(_Body):
    """GET_BROKER_CONSUME_STATS body (``common/protocol/body/ConsumeStatsList.java``).

    ``consume_stats_list`` holds one single-entry map per subscription group: group name ->
    the ``ConsumeStats`` of each topic it consumes; ``total_diff`` sums their lag.
    """

    broker_addr: str | None = None
    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    total_diff: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("broker_addr", "brokerAddr", _d_str),
        _F("consume_stats_list", "consumeStatsList",
           _d_list(_d_map(_d_str, _d_list(ConsumeStats.from_json))), _e_group_stats),
        _F("total_diff", "totalDiff", _d_int),
    )


@dataclass(slots=True)
class ConsumeQueueData(_Body):
    """One consume-queue unit as QUERY_CONSUME_QUEUE shows it (``ConsumeQueueData``);
    ``str()`` is Java's ``toString`` (what ``mqadmin queryCq`` prints)."""

    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("physic_offset", "physicOffset", _d_int),
        _F("physic_size", "physicSize", _d_int),
        _F("tags_code", "tagsCode", _d_int),
        _F("extend_data_json", "extendDataJson", _d_str),
        _F("bit_map", "bitMap", _d_str),
        _F("eval", "eval", _d_bool),
        _F("msg", "msg", _d_str),
    )

    def __str__(self) -> str:
        def java(v: str | None) -> str:
            return "null" if v is None else v

        return (f"ConsumeQueueData{{physicOffset={self.physic_offset}, physicSize={self.physic_size}, "
                f"tagsCode={self.tags_code}, extendDataJson='{java(self.extend_data_json)}', "
                f"bitMap='{java(self.bit_map)}', eval={'true' if self.eval else 'false'}, "
                f"msg='{java(self.msg)}'}}")


@dataclass(slots=True)
class QueryConsumeQueueResponseBody(_Body):
    """QUERY_CONSUME_QUEUE body: the group's subscription and filter (when one was asked
    for), the queue's bounds and the units read."""

    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: list[ConsumeQueueData] | None = None
    max_queue_index: int = 0
    min_queue_index: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("subscription_data", "subscriptionData", SubscriptionData.from_json, _e_obj),
        _F("filter_data", "filterData", _d_str),
        _F("queue_data", "queueData", _d_list(ConsumeQueueData.from_json), _e_list_obj),
        _F("max_queue_index", "maxQueueIndex", _d_int),
        _F("min_queue_index", "minQueueIndex", _d_int),
    )


@dataclass(slots=True)
class TopicOffset(_Body):
    """``TopicOffset``: one queue's line in ``TopicStatsTable``."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("min_offset", "minOffset", _d_int),
        _F("max_offset", "maxOffset", _d_int),
        _F("last_update_timestamp", "lastUpdateTimestamp", _d_int),
    )


@dataclass(slots=True)
class TopicStatsTable(_Body):
    """GET_TOPIC_STATS_INFO body: ``MessageQueue`` object keys."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("offset_table", "offsetTable", _d_map(_d_mq, TopicOffset.from_json), _e_mq_map(_e_obj)),
    )


@dataclass(slots=True)
class GroupList(_Body):
    """QUERY_TOPIC_CONSUME_BY_WHO body."""

    group_list: list[str] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("group_list", "groupList", _d_list(_d_str), _e_copy_list),
    )


@dataclass(slots=True)
class SubscriptionGroupConfig(_Body):
    """``SubscriptionGroupConfig`` with the Java defaults."""

    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MixAll.MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("group_name", "groupName", _d_str),
        _F("consume_enable", "consumeEnable", _d_bool),
        _F("consume_from_min_enable", "consumeFromMinEnable", _d_bool),
        _F("consume_broadcast_enable", "consumeBroadcastEnable", _d_bool),
        _F("retry_queue_nums", "retryQueueNums", _d_int),
        _F("retry_max_times", "retryMaxTimes", _d_int),
        _F("broker_id", "brokerId", _d_int),
        _F("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly", _d_int),
        _F("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable", _d_bool),
    )


@dataclass(slots=True)
class SubscriptionGroupWrapper(_Body):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F(
            "subscription_group_table",
            "subscriptionGroupTable",
            _d_map(_d_str, SubscriptionGroupConfig.from_json),
            _e_map_obj,
        ),
        _F("data_version", "dataVersion", DataVersion.from_json, _e_obj),
    )


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper(_Body):
    """GET_ALL_CONSUMER_OFFSET body: ``"topic@group"`` -> {queueId: offset} (bare int keys)."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F(
            "offset_table",
            "offsetTable",
            _d_map(_d_str, _d_map(_d_int, _d_int)),
            lambda v: {k: dict(x) for k, x in v.items()},
        ),
    )


@dataclass(slots=True)
class ResetOffsetBody(_Body):
    """``ResetOffsetBody`` (INVOKE_BROKER_TO_RESET_OFFSET answer, RESET_CONSUMER_CLIENT_OFFSET).

    ``to_json_for_c`` / ``encode_for_c`` give ``ResetOffsetBodyForC``, the list form the
    broker sends when the admin request's language is CPP; ``from_json`` reads both.
    """

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("offset_table", "offsetTable", _d_map(_d_mq, _d_int), _e_mq_map(None)),
    )

    @classmethod
    def from_json(cls, obj: Any) -> ResetOffsetBody:
        m = _as_mapping(cls, obj)
        table = m.get("offsetTable")
        if isinstance(table, list):
            out: dict[MessageQueue, int] = {}
            for item in table:
                if item is None:
                    continue
                entry = _as_mapping(cls, item)
                offset = entry.get("offset")
                out[MessageQueue.from_json(entry)] = 0 if offset is None else _d_int(offset)
            return cls(out)
        return _Body.from_json.__func__(cls, m)  # type: ignore[attr-defined,no-any-return]

    def to_json_for_c(self) -> dict[str, Any]:
        return {
            "offsetTable": [
                {
                    "brokerName": mq.broker_name,
                    "offset": offset,
                    "queueId": mq.queue_id,
                    "topic": mq.topic,
                }
                for mq, offset in self.offset_table.items()
            ]
        }

    def encode_for_c(self) -> bytes:
        return dumps(self.to_json_for_c())


@dataclass(slots=True)
class ProcessQueueInfo(_Body):
    """``ProcessQueueInfo``: one queue in ``ConsumerRunningInfo.mqTable``."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("commit_offset", "commitOffset", _d_int),
        _F("cached_msg_min_offset", "cachedMsgMinOffset", _d_int),
        _F("cached_msg_max_offset", "cachedMsgMaxOffset", _d_int),
        _F("cached_msg_count", "cachedMsgCount", _d_int),
        _F("cached_msg_size_in_mib", "cachedMsgSizeInMiB", _d_int),
        _F("transaction_msg_min_offset", "transactionMsgMinOffset", _d_int),
        _F("transaction_msg_max_offset", "transactionMsgMaxOffset", _d_int),
        _F("transaction_msg_count", "transactionMsgCount", _d_int),
        _F("locked", "locked", _d_bool),
        _F("try_unlock_times", "tryUnlockTimes", _d_int),
        _F("last_lock_timestamp", "lastLockTimestamp", _d_int),
        _F("dropped", "droped", _d_bool),  # sic: the Java getter is isDroped()
        _F("last_pull_timestamp", "lastPullTimestamp", _d_int),
        _F("last_consume_timestamp", "lastConsumeTimestamp", _d_int),
    )


@dataclass(slots=True)
class ConsumeStatus(_Body):
    """``ConsumeStatus``: one topic in ``ConsumerRunningInfo.statusTable`` (doubles)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("pull_rt", "pullRT", _d_float, float),
        _F("pull_tps", "pullTPS", _d_float, float),
        _F("consume_rt", "consumeRT", _d_float, float),
        _F("consume_ok_tps", "consumeOKTPS", _d_float, float),
        _F("consume_failed_tps", "consumeFailedTPS", _d_float, float),
        _F("consume_failed_msgs", "consumeFailedMsgs", _d_int),
    )


@dataclass(slots=True)
class ConsumerRunningInfo(_Body):
    """GET_CONSUMER_RUNNING_INFO reply body (``properties`` is a string map)."""

    PROP_NAMESERVER_ADDR: ClassVar[str] = "PROP_NAMESERVER_ADDR"
    PROP_THREADPOOL_CORE_SIZE: ClassVar[str] = "PROP_THREADPOOL_CORE_SIZE"
    PROP_CONSUME_ORDERLY: ClassVar[str] = "PROP_CONSUMEORDERLY"
    PROP_CONSUME_TYPE: ClassVar[str] = "PROP_CONSUME_TYPE"
    PROP_CLIENT_VERSION: ClassVar[str] = "PROP_CLIENT_VERSION"
    PROP_CONSUMER_START_TIMESTAMP: ClassVar[str] = "PROP_CONSUMER_START_TIMESTAMP"

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("properties", "properties", _d_map(_d_str, _d_str), _e_copy_map),
        _F("subscription_set", "subscriptionSet", _d_list(SubscriptionData.from_json), _e_list_obj),
        _F("mq_table", "mqTable", _d_map(_d_mq, ProcessQueueInfo.from_json), _e_mq_map(_e_obj)),
        _F("status_table", "statusTable", _d_map(_d_str, ConsumeStatus.from_json), _e_map_obj),
        _F("jstack", "jstack", _d_str),
    )


@dataclass(slots=True)
class ConsumeMessageDirectlyResult(_Body):
    """CONSUME_MESSAGE_DIRECTLY reply body; ``consume_result`` is a ``CMResult`` name."""

    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None
    remark: str | None = None
    spent_time_mills: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("order", "order", _d_bool),
        _F("auto_commit", "autoCommit", _d_bool),
        _F("consume_result", "consumeResult", _d_str),
        _F("remark", "remark", _d_str),
        _F("spent_time_mills", "spentTimeMills", _d_int),
    )


@dataclass(slots=True)
class GetConsumerStatusBody(_Body):
    """GET_CONSUMER_STATUS_FROM_CLIENT / INVOKE_BROKER_TO_GET_CONSUMER_STATUS body."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("message_queue_table", "messageQueueTable", _d_map(_d_mq, _d_int), _e_mq_map(None)),
        _F(
            "consumer_table",
            "consumerTable",
            _d_map(_d_str, _d_map(_d_mq, _d_int)),
            lambda v: {k: {mq.to_object_key(): o for mq, o in x.items()} for k, x in v.items()},
        ),
    )


def _format_java_date(ms: int) -> str:
    # UtilAll.formatDate(date, "yyyy-MM-dd#HH:mm:ss:SSS") in the local time zone.
    secs, millis = divmod(ms, 1000)
    try:
        return time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(secs)) + f":{millis:03d}"
    except (OverflowError, OSError, ValueError):
        return ""


@dataclass(slots=True)
class QueueTimeSpan(_Body):
    """``QueueTimeSpan``; the ``*Str`` getters are written (local time) and ignored on read."""

    message_queue: MessageQueue | None = None
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0

    @property
    def min_time_stamp_str(self) -> str:
        return _format_java_date(self.min_time_stamp)

    @property
    def max_time_stamp_str(self) -> str:
        return _format_java_date(self.max_time_stamp)

    @property
    def consume_time_stamp_str(self) -> str:
        return _format_java_date(self.consume_time_stamp)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("message_queue", "messageQueue", _d_mq, _e_mq),
        _F("min_time_stamp", "minTimeStamp", _d_int),
        _F("max_time_stamp", "maxTimeStamp", _d_int),
        _F("consume_time_stamp", "consumeTimeStamp", _d_int),
        _F("delay_time", "delayTime", _d_int),
        _F("min_time_stamp_str", "minTimeStampStr", None),
        _F("max_time_stamp_str", "maxTimeStampStr", None),
        _F("consume_time_stamp_str", "consumeTimeStampStr", None),
    )


@dataclass(slots=True)
class QueryConsumeTimeSpanBody(_Body):
    """QUERY_CONSUME_TIME_SPAN body."""

    consume_time_span_set: list[QueueTimeSpan] = field(default_factory=list)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F(
            "consume_time_span_set",
            "consumeTimeSpanSet",
            _d_list(QueueTimeSpan.from_json),
            _e_list_obj,
        ),
    )


@dataclass(slots=True)
class QueryCorrectionOffsetBody(_Body):
    """QUERY_CORRECTION_OFFSET body: queueId -> offset (bare int keys)."""

    correction_offsets: dict[int, int] = field(default_factory=dict)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("correction_offsets", "correctionOffsets", _d_map(_d_int, _d_int), _e_copy_map),
    )


@dataclass(slots=True)
class CheckClientRequestBody(_Body):
    """CHECK_CLIENT_CONFIG request body."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("client_id", "clientId", _d_str),
        _F("group", "group", _d_str),
        _F("subscription_data", "subscriptionData", SubscriptionData.from_json, _e_obj),
    )


@dataclass(slots=True)
class BrokerStatsItem(_Body):
    """``BrokerStatsItem``."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("sum", "sum", _d_int),
        _F("tps", "tps", _d_float, float),
        _F("avgpt", "avgpt", _d_float, float),
    )


@dataclass(slots=True)
class BrokerStatsData(_Body):
    """VIEW_BROKER_STATS_DATA body."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("stats_minute", "statsMinute", BrokerStatsItem.from_json, _e_obj),
        _F("stats_hour", "statsHour", BrokerStatsItem.from_json, _e_obj),
        _F("stats_day", "statsDay", BrokerStatsItem.from_json, _e_obj),
    )


@dataclass(slots=True)
class ProducerInfo(_Body):
    """``ProducerInfo`` (GET_ALL_PRODUCER_INFO entries)."""

    client_id: str = ""
    remote_ip: str = ""
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = 0

    _SPEC: ClassVar[tuple[_Field, ...]] = _spec(
        _F("client_id", "clientId", _d_str),
        _F("remote_ip", "remoteIP", _d_str),
        _F("language", "language", _d_lang, _e_lang),
        _F("version", "version", _d_int),
        _F("last_update_timestamp", "lastUpdateTimestamp", _d_int),
    )


# ---------------------------------------------------------------------------------------
# Java properties text (GET/UPDATE_BROKER_CONFIG, GET/UPDATE_NAMESRV_CONFIG; docs/PROTOCOL.md 7.11)


def _prop_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return java_double_str(v)
    return str(v)


def properties_to_string(props: Mapping[str, Any]) -> str:
    """``MixAll.properties2String``: ``key=value\\n`` per entry, no escaping, ``None`` skipped."""
    return "".join(f"{k}={_prop_text(v)}\n" for k, v in props.items() if v is not None)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PROP_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break  # a lone trailing backslash is dropped, as Properties.load does
        c = text[i]
        i += 1
        if c == "u":
            hexdigits = text[i : i + 4]
            if len(hexdigits) != 4 or any(h not in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ProtocolError("Malformed \\uxxxx encoding in properties text")
            out.append(chr(int(hexdigits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    pending: str | None = None
    for raw in _LINE_BREAK.split(text):
        line = raw.lstrip(_PROP_WS)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        else:
            line = pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]  # continuation: next line's leading blanks are skipped
            continue
        pending = None
        yield line
    if pending:
        yield pending


def string_to_properties(text: str) -> dict[str, str]:
    """``MixAll.string2Properties`` (``Properties.load``) for text.

    Comment lines start with ``#`` or ``!``; the key ends at the first unescaped ``=``,
    ``:`` or blank; ``\\`` escapes (``\\t \\n \\r \\f \\uXXXX``, others literal) and
    backslash line continuations are honoured; a repeated key keeps its last value.
    Java loads the UTF-8 bytes as ISO-8859-1; we take text, so non-ASCII stays intact.

    Raises:
        ProtocolError: a malformed ``\\uXXXX`` escape (Java returns null for the body).
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        n = len(line)
        i = 0
        key_end = n
        value_start = n
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:":
                key_end, value_start = i, i + 1
                break
            if c in _PROP_WS:
                key_end = i
                j = i
                while j < n and line[j] in _PROP_WS:
                    j += 1
                if j < n and line[j] in "=:":
                    j += 1
                value_start = j
                break
            i += 1
        while value_start < n and line[value_start] in _PROP_WS:
            value_start += 1
        props[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return props
