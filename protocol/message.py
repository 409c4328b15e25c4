"""The message codec: properties string, Message/MessageExt, stored records, batch bodies, ids.

Contract (docs/PROTOCOL.md 5; upstream ``MessageDecoder``, ``Message``, ``MessageExt``,
``MessageClientExt``, ``MessageClientIDSetter``, ``CommitLog.DefaultAppendMessageCallback``):

* ``encode_properties`` / ``decode_properties`` are ``messageProperties2String`` /
  ``string2messageProperties`` (5.1): no trailing ``\\x02``; segments without a non-empty
  key and a non-empty value are dropped; the last value of a repeated key wins.
* ``encode_stored_record`` writes one v1 commit-log record (5.2), the broker store's hot
  path: one ``struct`` pack of the fixed part and one join. ``decode_message`` reads
  v1 and v2 records (by magic code) with IPv4 or IPv6 hosts (by sysflag bits 5.3);
  ``decode_messages`` reads pull / query / view bodies back to back to the end.
* ``encode_batch`` / ``decode_batch`` are ``encodeMessages`` / ``decodeMessages`` (5.5).
* Offset message ids and UNIQ_KEYs (5.4), tag hash codes (6.1), zlib bodies (5.3).
* ``Message.of(obj, codec, topic=...)`` / ``msg.decode()``: an object as a msgpack or JSON
  body, its content type in the ``contentType`` user property (``body_codec``).

Decoders take bytes from a peer: anything that does not follow the layout raises
``MessageDecodeError`` (a ``ProtocolError``); any other exception escaping them is a bug.
Encoders raise ``MessageEncodeError`` (also a ``ValueError``) for arguments that cannot
be encoded, and its subclass ``MessageTooLargeError`` for the wire's length limits.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import struct
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiorocketmq import refuse_extension

from . import body_codec
from .codes import MessageConst, MessageSysFlag
from .errors import MQClientError, ProtocolError, RocketMQError
from .javautil import java_string_hash

try:
    refuse_extension("aiorocketmq.protocol._message")
    from ._message import decode_records as _decode_records
except ImportError:  # no C compiler, or AIOROCKETMQ_NO_EXTENSIONS: records read in Python
    _decode_records = None  # type: ignore[assignment]
try:
    refuse_extension("aiorocketmq.protocol._message")
    from ._message import encode_batch as _encode_batch_c
except ImportError:  # as above, or a _message built before it had encode_batch
    _encode_batch_c = None  # type: ignore[assignment]

__all__ = [
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "BLANK_MAGIC_CODE",
    "QUEUE_OFFSET_POS",
    "PHYSICAL_OFFSET_POS",
    "SYSFLAG_POS",
    "BORN_TIMESTAMP_POS",
    "BORN_HOST_POS",
    "COMPRESS_MSG_BODY_OVER",
    "MAX_TOPIC_LENGTH",
    "MAX_PROPERTIES_LENGTH",
    "MessageDecodeError",
    "UnsupportedCompressionError",
    "MessageEncodeError",
    "MessageTooLargeError",
    "Message",
    "MessageExt",
    "encode_properties",
    "decode_properties",
    "socket_address_to_bytes",
    "socket_address_from_bytes",
    "store_timestamp_pos",
    "record_size",
    "encode_stored_record",
    "pack_stored_record",
    "encode_message",
    "decode_message",
    "decode_messages",
    "encode_batch",
    "encode_batch_py",
    "decode_batch",
    "create_offset_msg_id",
    "decode_offset_msg_id",
    "UniqIdGenerator",
    "create_uniq_id",
    "uniq_id_timestamp",
    "tags_to_tags_code",
    "compress_body",
    "decompress_body",
]

# --- record layout (docs/PROTOCOL.md 5.2) --------------------------------------------

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, v1: 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, v2 (5.x): 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, commit-log end-of-file filler

QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
SYSFLAG_POS = 36
BORN_TIMESTAMP_POS = 40
BORN_HOST_POS = 48

# Producer default ``compressMsgBodyOverHowmuch`` (DefaultMQProducer).
COMPRESS_MSG_BODY_OVER = 4096
# v1 stores the topic length as a signed byte; properties length is a signed short.
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767

_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_COMPRESSED = MessageSysFlag.COMPRESSED_FLAG

# Fixed part of a v1 record, TOTALSIZE .. BODY length, one Struct per (born v6, store v6).
_FIXED: dict[tuple[bool, bool], struct.Struct] = {
    (b6, s6): struct.Struct(
        ">iiiiiqqiq" + ("20s" if b6 else "8s") + "q" + ("20s" if s6 else "8s") + "iqi"
    )
    for b6 in (False, True)
    for s6 in (False, True)
}
_FIXED_PACK = {k: s.pack for k, s in _FIXED.items()}

# Decoding: the first 48 bytes (TOTALSIZE .. BORNTIMESTAMP), then the host-dependent
# middle (BORNHOST .. BODY length), selected by the two V6 sysflag bits.
_HEAD = struct.Struct(">iiiiiqqiq")
_HEAD_UNPACK = _HEAD.unpack_from
_MIDDLE: dict[int, struct.Struct] = {
    flags: struct.Struct(
        ">" + ("16s" if flags & _BORN_V6 else "4s") + "iq" + ("16s" if flags & _STORE_V6 else "4s")
        + "iiqi"
    )
    for flags in (0, _BORN_V6, _STORE_V6, _BORN_V6 | _STORE_V6)
}
_MIDDLE_UNPACK = {k: s.unpack_from for k, s in _MIDDLE.items()}
_MIDDLE_SIZE = {k: s.size for k, s in _MIDDLE.items()}
_V6_MASK = _BORN_V6 | _STORE_V6
# TOTALSIZE .. BODY length of a v1 record with IPv4 hosts (88 bytes, within _MIN_RECORD_SIZE)
_V4_FIXED_UNPACK = struct.Struct(">iiiiiqqiq4siq4siiqi").unpack_from

_MIN_RECORD_SIZE = 91  # v1, IPv4 hosts, empty body, topic and properties

_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_SHORT_PACK = _SHORT.pack
_SHORT_UNPACK = _SHORT.unpack_from
_INT_UNPACK = _INT.unpack_from
_BYTE_PACK = struct.Struct(">b").pack
_PORT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_BATCH_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length
_BATCH_HEAD_UNPACK = _BATCH_HEAD.unpack_from
_BATCH_MIN = _BATCH_HEAD.size + 2

_NV = MessageConst.NAME_VALUE_SEPARATOR
_PS = MessageConst.PROPERTY_SEPARATOR
_EMPTY_VALUE = _NV + _PS  # "k\x01" then the next segment
_EMPTY_KEY = _PS + _NV  # a segment that starts with \x01
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_SYSTEM_KEYS = MessageConst.SYSTEM_KEYS
_EMPTY_BA = bytearray()
# Java String.trim() strips every char <= U+0020.
_JAVA_TRIM = "".join(map(chr, range(0x21)))


# --- errors --------------------------------------------------------------------------


class MessageDecodeError(ProtocolError):
    """A stored record, batch body or message id that does not follow the layout."""


class UnsupportedCompressionError(MessageDecodeError):
    """A body compressed with a codec the standard library lacks (LZ4, ZSTD)."""


class MessageEncodeError(RocketMQError, ValueError):
    """Arguments that cannot be encoded into a record (bad host bytes, bad address)."""


class MessageTooLargeError(MessageEncodeError):
    """A field over the wire's length limit: topic > 127 bytes, properties > 32767 bytes."""


# --- properties string (docs/PROTOCOL.md 5.1) ----------------------------------------


def encode_properties(props: Mapping[str, str | None]) -> str:
    """``MessageDecoder.messageProperties2String``: ``k\\x01v\\x02k\\x01v``; None values skipped."""
    return _PS.join([k + _NV + v for k, v in props.items() if v is not None])


def decode_properties(s: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: last value of a key wins; empties dropped."""
    if not s:
        return {}
    # The common case in C: every segment is key\x01value with both non-empty (dict()
    # keeps the first place and the last value of a repeated key, as the loop below). An
    # empty key or value is looked for in ``s``, not in the dict: a dropped "k\x01" before
    # a valid "k\x01v" would otherwise give k the dropped segment's place.
    if s[0] == _NV or s[-1] == _NV or _EMPTY_VALUE in s or _EMPTY_KEY in s:
        return _decode_properties_loop(s)
    try:
        return dict([seg.split(_NV, 1) for seg in s.split(_PS)])
    except ValueError:  # a segment without \x01
        return _decode_properties_loop(s)


def _decode_properties_loop(s: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for seg in s.split(_PS):
        if len(seg) >= 3:
            i = seg.find(_NV)
            if 0 < i < len(seg) - 1:
                result[seg[:i]] = seg[i + 1 :]
    return result


# --- host addresses ------------------------------------------------------------------


def socket_address_to_bytes(addr: str) -> bytes:
    """``"ip:port"`` (or ``"[v6]:port"``) -> IP (4 or 16 bytes) + port as int32, as in a record.

    Raises:
        MessageEncodeError: not a literal IPv4/IPv6 address with a port.
    """
    host, sep, port_s = addr.rpartition(":")
    if not sep:
        raise MessageEncodeError(f"socket address {addr!r} has no port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_s)
        if ":" in host:
            ip = socket.inet_pton(socket.AF_INET6, host)
        else:
            ip = socket.inet_pton(socket.AF_INET, host)
        return ip + _PORT.pack(port)
    except (OSError, ValueError, struct.error) as exc:
        raise MessageEncodeError(f"socket address {addr!r} is not ip:port: {exc}") from exc


def _ip_str(ip: bytes) -> str:
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}"
    return socket.inet_ntop(socket.AF_INET6, ip)


# "ip:port" by (ip bytes, port), topics by their bytes: a pull body names a handful of
# hosts and topics many times over.
_HOST_CACHE: dict[tuple[bytes, int], str] = {}
_TOPIC_CACHE: dict[bytes, str] = {}


def _host_str(ip: bytes, port: int) -> str:
    key = (ip, port)
    text = _HOST_CACHE.get(key)
    if text is None:
        if len(_HOST_CACHE) >= 4096:
            _HOST_CACHE.clear()
        text = _HOST_CACHE[key] = f"{_ip_str(ip)}:{port}"
    return text


def socket_address_from_bytes(b: bytes) -> str:
    """IP (4 or 16 bytes) + int32 port -> ``"ip:port"`` (IPv6 in compressed form, no brackets).

    The port is split off at the last ``:``, as upstream ``RemotingHelper.string2SocketAddress``.

    Raises:
        MessageDecodeError: ``b`` is not 8 or 20 bytes long.
    """
    n = len(b)
    if n not in (8, 20):
        raise MessageDecodeError(f"socket address must be 8 or 20 bytes, got {n}")
    return f"{_ip_str(bytes(b[: n - 4]))}:{_INT_UNPACK(b, n - 4)[0]}"


# --- tags, compression ---------------------------------------------------------------


def tags_to_tags_code(tags: str | None) -> int:
    """Consume-queue tags code: Java ``String.hashCode`` of ``TAGS``, 0 without tags (6.1)."""
    if not tags:
        return 0
    return java_string_hash(tags)


def compress_body(body: bytes, level: int = 5) -> bytes:
    """zlib stream with header, as ``java.util.zip.Deflater`` (producer default level 5)."""
    return zlib.compress(body, level)


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Inflate ``body`` when ``sys_flag`` has COMPRESSED, by compression type bits 8-10.

    Type 0 (pre-4.9.4 senders) and 3 are zlib.

    Raises:
        UnsupportedCompressionError: LZ4 or ZSTD (no standard-library codec on 3.11).
        MessageDecodeError: unknown compression type or a corrupt zlib stream.
    """
    if not sys_flag & _COMPRESSED:
        return body
    ctype = (sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK) >> 8
    if ctype == 0 or ctype == 3:
        try:
            return zlib.decompress(body)
        except zlib.error as exc:
            raise MessageDecodeError(f"corrupt zlib message body: {exc}") from exc
    if ctype == 1 or ctype == 2:
        name = "LZ4" if ctype == 1 else "ZSTD"
        raise UnsupportedCompressionError(f"{name}-compressed message bodies are not supported")
    raise MessageDecodeError(f"unknown compression type {ctype} in sysFlag {sys_flag:#x}")


# --- Message, MessageExt -------------------------------------------------------------


class Message:
    """A message as a producer builds it (upstream ``Message``).

    ``properties`` is the property map itself (``TAGS``, ``KEYS``, ``WAIT``, user
    properties ...). The constructor behaves like Java's
    ``Message(topic, tags, keys, flag, body, waitStoreMsgOK)``: it starts from a copy of
    ``properties`` (if given), then sets ``TAGS`` and ``KEYS`` when non-empty and always
    sets ``WAIT``.
    """

    __slots__ = ("topic", "body", "flag", "properties", "transaction_id")

    topic: str
    body: bytes
    flag: int
    properties: dict[str, str]
    transaction_id: str | None

    def __init__(
        self,
        topic: str,
        body: bytes,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        *,
        wait_store_msg_ok: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self.transaction_id = None
        props: dict[str, str] = dict(properties) if properties else {}
        if tags:
            props[MessageConst.PROPERTY_TAGS] = tags
        if keys is not None:
            joined = keys if isinstance(keys, str) else MessageConst.KEY_SEPARATOR.join(keys)
            if joined:
                props[MessageConst.PROPERTY_KEYS] = joined
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        self.properties = props

    @classmethod
    def of(
        cls,
        obj: Any,
        codec: str = "msgpack",
        *,
        topic: str,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> Message:
        """A message whose body is ``obj`` encoded with ``codec`` (``"msgpack"`` or ``"json"``).

        The content type (``application/msgpack`` / ``application/json``) goes into the
        ``contentType`` user property, so ``decode()`` needs no argument and consumers in
        other languages know what they got (``protocol.body_codec``).

        Raises:
            UnknownCodecError: ``codec`` is neither msgpack nor json (a ``ValueError``).
            BodyEncodeError: ``obj`` has no representation in ``codec`` (a ``ValueError``).
        """
        body, content_type = body_codec.encode_body(obj, codec)
        props = dict(properties) if properties else {}
        props[body_codec.CONTENT_TYPE_PROPERTY] = content_type
        return cls(topic, body, tags, keys, flag, wait_store_msg_ok=wait_store_msg_ok,
                   properties=props)

    def decode(self, codec: str | None = None) -> Any:
        """The object in the body, decoded with ``codec`` or else by its ``contentType``.

        ``codec`` is a short name (``"msgpack"``, ``"json"``) or a content type; ``None``
        reads the ``contentType`` property that ``Message.of`` (or another client) set.

        Raises:
            UnknownCodecError: no codec given and no ``contentType`` property, or a codec /
                content type that is neither msgpack nor JSON.
            BodyDecodeError: the body is not valid for that codec (a ``ValueError``).
        """
        if codec is None:
            codec = self.properties.get(body_codec.CONTENT_TYPE_PROPERTY)
            if codec is None:
                raise body_codec.UnknownCodecError(
                    f"message on topic {self.topic!r} has no "
                    f"{body_codec.CONTENT_TYPE_PROPERTY} property; pass decode(codec='msgpack') "
                    f"or decode(codec='json')")
        try:
            return body_codec.decode_body(self.body, codec)
        except body_codec.BodyDecodeError as exc:
            raise body_codec.BodyDecodeError(
                f"message on topic {self.topic!r}{self._id_for_errors()}: {exc}") from exc

    def _id_for_errors(self) -> str:
        uniq = self.properties.get(_UNIQ_KEY)
        return f" (msgId {uniq})" if uniq else ""

    @classmethod
    def _from_wire(cls, topic: str, body: bytes, flag: int, properties: dict[str, str]) -> Message:
        # Decoders build messages with exactly the decoded properties (no WAIT added).
        msg = cls.__new__(cls)
        msg.topic = topic
        msg.body = body
        msg.flag = flag
        msg.properties = properties
        msg.transaction_id = None
        return msg

    # properties
    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def put_user_property(self, name: str, value: str) -> None:
        """Set a user property; system keys and blank names/values are refused (as Java).

        Raises:
            MQClientError: ``name`` is in ``MessageConst.SYSTEM_KEYS`` or either is blank.
        """
        if name in _SYSTEM_KEYS:
            raise MQClientError(f"The Property<{name}> is used by system, input another please")
        if not value or not value.strip(_JAVA_TRIM) or not name or not name.strip(_JAVA_TRIM):
            raise MQClientError("The name or value of property can not be null or blank string!")
        self.properties[name] = value

    def get_user_property(self, name: str) -> str | None:
        return self.properties.get(name)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @tags.setter
    def tags(self, tags: str) -> None:
        self.properties[MessageConst.PROPERTY_TAGS] = tags

    @property
    def keys(self) -> str | None:
        """``KEYS``: business keys separated by a space."""
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @keys.setter
    def keys(self, keys: str | Iterable[str]) -> None:
        if not isinstance(keys, str):
            keys = MessageConst.KEY_SEPARATOR.join(keys)
        self.properties[MessageConst.PROPERTY_KEYS] = keys

    @property
    def delay_time_level(self) -> int:
        value = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        return int(value) if value is not None else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(int(level))

    # Timer messages (5.x ``setDelayTimeSec`` / ``setDelayTimeMs`` / ``setDeliverTimeMs``): a
    # broker with the timing wheel delivers the message at that time (server/store/timer).
    # The broker reads TIMER_DELAY_SEC first, then TIMER_DELAY_MS, then TIMER_DELIVER_MS.

    @property
    def delay_sec(self) -> int:
        """``TIMER_DELAY_SEC``: deliver this many seconds after the broker receives it (0: unset)."""
        return self._timer_value(MessageConst.PROPERTY_TIMER_DELAY_SEC)

    @delay_sec.setter
    def delay_sec(self, seconds: int) -> None:
        self.properties[MessageConst.PROPERTY_TIMER_DELAY_SEC] = str(int(seconds))

    @property
    def delay_ms(self) -> int:
        """``TIMER_DELAY_MS``: deliver this many milliseconds after the broker receives it."""
        return self._timer_value(MessageConst.PROPERTY_TIMER_DELAY_MS)

    @delay_ms.setter
    def delay_ms(self, ms: int) -> None:
        self.properties[MessageConst.PROPERTY_TIMER_DELAY_MS] = str(int(ms))

    @property
    def deliver_time_ms(self) -> int:
        """``TIMER_DELIVER_MS``: deliver at this epoch time in milliseconds (0: unset)."""
        return self._timer_value(MessageConst.PROPERTY_TIMER_DELIVER_MS)

    @deliver_time_ms.setter
    def deliver_time_ms(self, epoch_ms: int) -> None:
        self.properties[MessageConst.PROPERTY_TIMER_DELIVER_MS] = str(int(epoch_ms))

    def _timer_value(self, key: str) -> int:
        value = self.properties.get(key)
        return int(value) if value is not None else 0

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT``: absent means true; otherwise Java ``Boolean.parseBoolean``."""
        value = self.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        return value is None or value.lower() == "true"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, wait: bool) -> None:
        self.properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait else "false"

    @property
    def buyer_id(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_BUYER_ID)

    @buyer_id.setter
    def buyer_id(self, buyer_id: str) -> None:
        self.properties[MessageConst.PROPERTY_BUYER_ID] = buyer_id

    def _body_repr(self) -> str:
        body = self.body
        if len(body) > 64:
            return f"{bytes(body[:64])!r}...({len(body)} bytes)"
        return repr(bytes(body))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(topic={self.topic!r}, flag={self.flag}, "
            f"properties={self.properties!r}, body={self._body_repr()}, "
            f"transaction_id={self.transaction_id!r})"
        )


class MessageExt(Message):
    """A stored message as the broker returns it (upstream ``MessageExt`` / ``MessageClientExt``).

    ``msg_id`` follows ``MessageClientExt.getMsgId()`` when set by ``decode_message``:
    the ``UNIQ_KEY`` if present, else the offset message id. ``offset_msg_id`` is
    always the broker's id computed from ``store_host`` and ``commit_log_offset`` (5.4).
    Hosts are ``"ip:port"`` strings.
    """

    __slots__ = (
        "queue_id",
        "store_size",
        "queue_offset",
        "sys_flag",
        "born_timestamp",
        "born_host",
        "store_timestamp",
        "store_host",
        "msg_id",
        "commit_log_offset",
        "body_crc",
        "reconsume_times",
        "prepared_transaction_offset",
    )

    queue_id: int
    store_size: int
    queue_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    msg_id: str
    commit_log_offset: int
    body_crc: int
    reconsume_times: int
    prepared_transaction_offset: int

    def __init__(
        self,
        topic: str = "",
        body: bytes = b"",
        flag: int = 0,
        properties: Mapping[str, str] | None = None,
        *,
        queue_id: int = 0,
        store_size: int = 0,
        queue_offset: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "127.0.0.1:0",
        store_timestamp: int = 0,
        store_host: str = "127.0.0.1:0",
        msg_id: str = "",
        commit_log_offset: int = 0,
        body_crc: int = 0,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
    ) -> None:
        # Like Java's no-arg MessageExt(): no WAIT is added.
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = dict(properties) if properties else {}
        self.transaction_id = None
        self.queue_id = queue_id
        self.store_size = store_size
        self.queue_offset = queue_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.msg_id = msg_id
        self.commit_log_offset = commit_log_offset
        self.body_crc = body_crc
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset

    @property
    def offset_msg_id(self) -> str:
        """The broker's id: store host + commit-log offset, upper-case hex (5.4)."""
        return create_offset_msg_id(socket_address_to_bytes(self.store_host), self.commit_log_offset)

    @property
    def born_host_bytes(self) -> bytes:
        return socket_address_to_bytes(self.born_host)

    @property
    def store_host_bytes(self) -> bytes:
        return socket_address_to_bytes(self.store_host)

    @property
    def tags_code(self) -> int:
        return tags_to_tags_code(self.properties.get(MessageConst.PROPERTY_TAGS))

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, msg_id={self.msg_id!r}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, commit_log_offset={self.commit_log_offset}, "
            f"store_size={self.store_size}, sys_flag={self.sys_flag}, flag={self.flag}, "
            f"born_timestamp={self.born_timestamp}, born_host={self.born_host!r}, "
            f"store_timestamp={self.store_timestamp}, store_host={self.store_host!r}, "
            f"body_crc={self.body_crc}, reconsume_times={self.reconsume_times}, "
            f"prepared_transaction_offset={self.prepared_transaction_offset}, "
            f"properties={self.properties!r}, body={self._body_repr()})"
        )


# --- stored records (docs/PROTOCOL.md 5.2) -------------------------------------------


def store_timestamp_pos(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP: 56 after an IPv4 born host, 68 after an IPv6 one."""
    return 68 if sys_flag & _BORN_V6 else 56


def record_size(
    topic_len: int, body_len: int, props_len: int, born_v6: bool = False, store_v6: bool = False
) -> int:
    """TOTALSIZE of a v1 record with these encoded lengths (``CommitLog.calMsgLength``)."""
    return (
        _MIN_RECORD_SIZE + body_len + topic_len + props_len
        + (12 if born_v6 else 0) + (12 if store_v6 else 0)
    )


def encode_stored_record(
    *,
    topic: str | bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    properties: str | bytes,
    body_crc: int | None = None,
) -> bytearray:
    """One whole v1 commit-log record, TOTALSIZE through PROPERTIES.

    ``born_host`` / ``store_host`` are ``socket_address_to_bytes`` output (8 or 20
    bytes); the caller sets the matching V6 bits in ``sys_flag``. ``body`` is stored as
    given (already compressed if COMPRESSED is set). BODYCRC is
    ``crc32(body) & 0x7fffffff`` unless ``body_crc`` is given.

    Raises:
        MessageTooLargeError: topic over 127 UTF-8 bytes or properties over 32767.
        MessageEncodeError: host bytes of the wrong size or disagreeing with ``sys_flag``,
            or an integer field out of its wire range.
    """
    try:
        topic_b = topic.encode("utf-8") if isinstance(topic, str) else topic
        props_b = properties.encode("utf-8") if isinstance(properties, str) else properties
    except UnicodeEncodeError as exc:
        raise MessageEncodeError(f"topic or properties not encodable as UTF-8: {exc}") from exc
    topic_len = len(topic_b)
    props_len = len(props_b)
    if topic_len > MAX_TOPIC_LENGTH:
        raise MessageTooLargeError(
            f"topic is {topic_len} bytes in UTF-8, more than {MAX_TOPIC_LENGTH}"
        )
    if props_len > MAX_PROPERTIES_LENGTH:
        raise MessageTooLargeError(
            f"properties are {props_len} bytes, more than {MAX_PROPERTIES_LENGTH}"
        )
    born_v6 = len(born_host) == 20
    store_v6 = len(store_host) == 20
    if not born_v6 and len(born_host) != 8:
        raise MessageEncodeError(f"born host must be 8 or 20 bytes, got {len(born_host)}")
    if not store_v6 and len(store_host) != 8:
        raise MessageEncodeError(f"store host must be 8 or 20 bytes, got {len(store_host)}")
    if born_v6 != bool(sys_flag & _BORN_V6) or store_v6 != bool(sys_flag & _STORE_V6):
        raise MessageEncodeError(
            f"sysFlag {sys_flag:#x} V6 bits disagree with host sizes "
            f"(born {len(born_host)}, store {len(store_host)} bytes)"
        )
    body_len = len(body)
    total = (
        _MIN_RECORD_SIZE + body_len + topic_len + props_len
        + (12 if born_v6 else 0) + (12 if store_v6 else 0)
    )
    if body_crc is None:
        body_crc = zlib.crc32(body) & 0x7FFFFFFF
    try:
        fixed = _FIXED_PACK[(born_v6, store_v6)](
            total, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, physical_offset,
            sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, body_len,
        )
    except struct.error as exc:
        raise MessageEncodeError(f"record field out of range: {exc}") from exc
    return _EMPTY_BA.join(
        (fixed, body, _BYTE_PACK(topic_len), topic_b, _SHORT_PACK(props_len), props_b)
    )


def pack_stored_record(topic_b: bytes, queue_id: int, flag: int, queue_offset: int,
                       physical_offset: int, sys_flag: int, born_timestamp: int,
                       born_host: bytes, store_timestamp: int, store_host: bytes,
                       reconsume_times: int, prepared_transaction_offset: int, body: bytes,
                       props_b: bytes) -> bytearray:
    """``encode_stored_record`` for a caller that has already checked its arguments (the
    commit log's append: lengths checked, V6 bits set from the host sizes), positional and
    without the checks. A field out of its wire range raises ``struct.error``."""
    born_v6 = len(born_host) == 20
    store_v6 = len(store_host) == 20
    body_len = len(body)
    topic_len = len(topic_b)
    props_len = len(props_b)
    fixed = _FIXED_PACK[(born_v6, store_v6)](
        _MIN_RECORD_SIZE + body_len + topic_len + props_len
        + (12 if born_v6 else 0) + (12 if store_v6 else 0),
        MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_host, store_timestamp, store_host,
        reconsume_times, prepared_transaction_offset, body_len,
    )
    return _EMPTY_BA.join(
        (fixed, body, _BYTE_PACK(topic_len), topic_b, _SHORT_PACK(props_len), props_b)
    )


def encode_message(msg: MessageExt, *, compress: bool = False) -> bytes:
    """``MessageDecoder.encode(messageExt, needCompress)``: a record rebuilt from ``msg``.

    TOTALSIZE is recomputed (Java trusts ``storeSize``; we do not), BODYCRC is
    ``msg.body_crc`` as Java writes it. With ``compress`` and COMPRESSED in
    ``sys_flag``, ``msg.body`` (the inflated body) is zlib-compressed again at level 5.
    The V6 sysflag bits are set from the host addresses. Used for
    CHECK_TRANSACTION_STATE and CONSUME_MESSAGE_DIRECTLY bodies.

    Raises:
        MessageEncodeError: see ``encode_stored_record``; also a non-zlib compression type.
    """
    born = socket_address_to_bytes(msg.born_host)
    store = socket_address_to_bytes(msg.store_host)
    sys_flag = msg.sys_flag & ~_V6_MASK
    if len(born) == 20:
        sys_flag |= _BORN_V6
    if len(store) == 20:
        sys_flag |= _STORE_V6
    body = msg.body
    if compress and sys_flag & _COMPRESSED:
        ctype = (sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK) >> 8
        if ctype not in (0, 3):
            raise MessageEncodeError(f"cannot compress with compression type {ctype}")
        body = compress_body(body, 5)
    return bytes(
        encode_stored_record(
            topic=msg.topic,
            queue_id=msg.queue_id,
            flag=msg.flag,
            queue_offset=msg.queue_offset,
            physical_offset=msg.commit_log_offset,
            sys_flag=sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=born,
            store_timestamp=msg.store_timestamp,
            store_host=store,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            body=body,
            properties=encode_properties(msg.properties),
            body_crc=msg.body_crc,
        )
    )


def decode_message(
    buf: Any,
    pos: int = 0,
    *,
    read_body: bool = True,
    decompress: bool = True,
    check_crc: bool = False,
) -> tuple[MessageExt, int]:
    """Decode the record at ``buf[pos:]``; return it and the position after it.

    ``buf`` is bytes, bytearray or memoryview. v1 and v2 records are told apart by
    magic code, IPv4/IPv6 hosts by the sysflag bits. With ``decompress`` a COMPRESSED
    body is inflated (``decompress_body``); without ``read_body`` the body is skipped
    (``b""``). ``msg_id`` is the UNIQ_KEY if present, else the offset id
    (``MessageClientExt``); ``store_size`` is TOTALSIZE. ``check_crc`` verifies BODYCRC
    over the stored bytes.

    Raises:
        MessageDecodeError: a truncated record, an unknown magic code, lengths that do
            not add up to TOTALSIZE, a BODYCRC mismatch (``check_crc``) or a body that
            does not inflate. Never IndexError or struct.error.
    """
    end_buf = len(buf)
    if pos < 0 or end_buf - pos < 4:
        raise MessageDecodeError(f"truncated message record at {pos}: {end_buf - pos} bytes left")
    total = _INT_UNPACK(buf, pos)[0]
    if total < _MIN_RECORD_SIZE or total > end_buf - pos:
        raise MessageDecodeError(
            f"bad message record at {pos}: TOTALSIZE {total}, {end_buf - pos} bytes left"
        )
    end = pos + total
    # Every record is at least 91 bytes: the fixed part of a v1 record with IPv4 hosts
    # (the common case) comes in one unpack; other records are re-read below.
    (
        _total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
        born_ts, born_ip, born_port, store_ts, store_ip, store_port, reconsume_times,
        prepared_offset, body_len,
    ) = _V4_FIXED_UNPACK(buf, pos)
    if magic == MESSAGE_MAGIC_CODE and not sys_flag & _V6_MASK:
        topic_len_size = 1
        p = pos + 88
    else:
        if magic == MESSAGE_MAGIC_CODE:
            topic_len_size = 1
        elif magic == MESSAGE_MAGIC_CODE_V2:
            topic_len_size = 2
        else:
            raise MessageDecodeError(f"bad message record at {pos}: magic code {magic:#x}")
        hosts = sys_flag & _V6_MASK
        p = pos + 48
        if p + _MIDDLE_SIZE[hosts] > end:
            raise MessageDecodeError(f"truncated message record at {pos}: hosts past TOTALSIZE")
        (
            born_ip, born_port, store_ts, store_ip, store_port, reconsume_times,
            prepared_offset, body_len,
        ) = _MIDDLE_UNPACK[hosts](buf, p)
        p += _MIDDLE_SIZE[hosts]
    if body_len < 0 or p + body_len + topic_len_size > end:
        raise MessageDecodeError(f"bad message record at {pos}: body length {body_len}")
    body_start = p
    p += body_len
    if topic_len_size == 1:
        topic_len = buf[p]
        if topic_len > 127:  # a signed byte in Java
            raise MessageDecodeError(f"bad message record at {pos}: topic length {topic_len - 256}")
    else:
        topic_len = _SHORT_UNPACK(buf, p)[0]
    p += topic_len_size
    if topic_len < 0 or p + topic_len + 2 > end:
        raise MessageDecodeError(f"bad message record at {pos}: topic length {topic_len}")
    raw_topic = bytes(buf[p : p + topic_len])
    topic = _TOPIC_CACHE.get(raw_topic)
    if topic is None:
        if len(_TOPIC_CACHE) >= 4096:
            _TOPIC_CACHE.clear()
        topic = _TOPIC_CACHE[raw_topic] = str(raw_topic, "utf-8", "replace")
    p += topic_len
    props_len = _SHORT_UNPACK(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise MessageDecodeError(
            f"bad message record at {pos}: properties length {props_len} does not end at "
            f"TOTALSIZE {total}"
        )
    properties = (
        decode_properties(str(buf[p : p + props_len], "utf-8", "replace")) if props_len else {}
    )
    if check_crc and zlib.crc32(buf[body_start : body_start + body_len]) & 0x7FFFFFFF != body_crc:
        raise MessageDecodeError(f"bad message record at {pos}: BODYCRC {body_crc} does not match")
    if read_body:
        body = bytes(buf[body_start : body_start + body_len])
        if decompress and sys_flag & _COMPRESSED:
            body = decompress_body(body, sys_flag)
    else:
        body = b""

    msg = MessageExt.__new__(MessageExt)
    msg.topic = topic
    msg.body = body
    msg.flag = flag
    msg.properties = properties
    msg.transaction_id = None
    msg.queue_id = queue_id
    msg.store_size = total
    msg.queue_offset = queue_offset
    msg.sys_flag = sys_flag
    msg.born_timestamp = born_ts
    msg.born_host = _host_str(born_ip, born_port)
    msg.store_timestamp = store_ts
    msg.store_host = _host_str(store_ip, store_port)
    msg.commit_log_offset = physical_offset
    msg.body_crc = body_crc
    msg.reconsume_times = reconsume_times
    msg.prepared_transaction_offset = prepared_offset
    uniq = properties.get(_UNIQ_KEY)
    msg.msg_id = (
        uniq
        if uniq is not None
        else (store_ip + _PORT.pack(store_port) + _LONG.pack(physical_offset)).hex().upper()
    )
    return msg, end


def decode_messages(buf: Any, *, decompress: bool = True) -> list[MessageExt]:
    """Every record of a pull / query / view body, back to back to the exact end.

    Bodies of common records (v1, IPv4 hosts, no compressed body, UTF-8 text) are read by
    the C decoder ``_message`` where it is built; the rest here, with the same result.

    Raises:
        MessageDecodeError: any record is bad (``MessageDecoder.decodes`` would silently
            drop it and everything after it; we refuse the whole body).
    """
    if _decode_records is not None:
        decoded = _decode_records(buf, MessageExt)
        if decoded is not None:
            return decoded
    return _decode_messages_py(buf, decompress=decompress)


def _decode_messages_py(buf: Any, *, decompress: bool = True) -> list[MessageExt]:
    """``decode_messages`` in Python (what the C decoder leaves, and its reference)."""
    out: list[MessageExt] = []
    append = out.append
    pos = 0
    n = len(buf)
    while pos < n:
        msg, pos = decode_message(buf, pos, decompress=decompress)
        append(msg)
    return out


# --- batch body (docs/PROTOCOL.md 5.5) -----------------------------------------------


def encode_batch(messages: Sequence[Message]) -> bytes:
    """``MessageDecoder.encodeMessages``: per message TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODY, PROPERTIES.

    In C (``_message.encode_batch``) where it is built and the batch is the common case
    (a list of messages with ``bytes`` bodies and ``str`` properties); otherwise, and for
    every error, ``encode_batch_py``, the reference, with the same result.

    Raises:
        MessageTooLargeError: a message's properties over 32767 bytes.
        MessageEncodeError: properties not UTF-8 encodable, a flag or size out of int32.
    """
    if _encode_batch_c is not None:
        out = _encode_batch_c(messages)
        if out is not None:
            return out
    return encode_batch_py(messages)


def encode_batch_py(messages: Sequence[Message]) -> bytes:
    """``encode_batch`` in Python: the reference the C twin is tested against."""
    parts: list[bytes] = []
    append = parts.append
    pack = _BATCH_HEAD.pack
    for m in messages:
        try:
            props_b = encode_properties(m.properties).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MessageEncodeError(f"properties not encodable as UTF-8: {exc}") from exc
        props_len = len(props_b)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise MessageTooLargeError(
                f"properties are {props_len} bytes, more than {MAX_PROPERTIES_LENGTH}"
            )
        body = m.body
        body_len = len(body)
        try:
            append(pack(_BATCH_MIN + body_len + props_len, 0, 0, m.flag, body_len))
        except struct.error as exc:
            raise MessageEncodeError(f"batch message field out of range: {exc}") from exc
        append(body)
        append(_SHORT_PACK(props_len))
        append(props_b)
    return b"".join(parts)


def decode_batch(body: Any, *, topic: str = "") -> list[Message]:
    """``MessageDecoder.decodeMessages``: the members of a SEND_BATCH_MESSAGE body.

    The topic is not in the body (it is header ``b``); members get ``topic``.

    Raises:
        MessageDecodeError: a member that is truncated or whose lengths do not add up
            to its TOTALSIZE.
    """
    out: list[Message] = []
    pos = 0
    n = len(body)
    while pos < n:
        if n - pos < _BATCH_MIN:
            raise MessageDecodeError(f"truncated batch member at {pos}: {n - pos} bytes left")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD_UNPACK(body, pos)
        end = pos + total
        if total < _BATCH_MIN or end > n or body_len < 0 or body_len > total - _BATCH_MIN:
            raise MessageDecodeError(
                f"bad batch member at {pos}: TOTALSIZE {total}, body length {body_len}, "
                f"{n - pos} bytes left"
            )
        p = pos + _BATCH_HEAD.size
        member_body = bytes(body[p : p + body_len])
        p += body_len
        props_len = _SHORT_UNPACK(body, p)[0]
        p += 2
        if props_len < 0 or p + props_len != end:
            raise MessageDecodeError(
                f"bad batch member at {pos}: properties length {props_len} does not end at "
                f"TOTALSIZE {total}"
            )
        props = decode_properties(str(body[p:end], "utf-8", "replace")) if props_len else {}
        out.append(Message._from_wire(topic, member_body, flag, props))
        pos = end
    return out


# --- message ids (docs/PROTOCOL.md 5.4) ----------------------------------------------


def create_offset_msg_id(store_host: bytes, physical_offset: int) -> str:
    """``MessageDecoder.createMessageId``: store host (8 or 20 bytes) + offset, upper-case hex."""
    return (bytes(store_host) + _LONG.pack(physical_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """``MessageDecoder.decodeMessageId``: ``("ip:port", commit-log offset)``.

    32 hex chars is IPv4, 56 is IPv6.

    Raises:
        MessageDecodeError: not 32 or 56 hex characters, or a port outside 0-65535.
    """
    if len(msg_id) not in (32, 56):
        raise MessageDecodeError(f"offset message id {msg_id!r} is not 32 or 56 hex characters")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageDecodeError(f"offset message id {msg_id!r} is not hex") from exc
    port = _INT_UNPACK(raw, len(raw) - 12)[0]
    if not 0 <= port <= 0xFFFF:
        # InetSocketAddress refuses it upstream: a UNIQ_KEY is the same length, not an offset id.
        raise MessageDecodeError(f"offset message id {msg_id!r} names port {port}, outside "
                                 "0-65535 (a unique key, not an offset message id?)")
    return socket_address_from_bytes(raw[:-8]), _LONG.unpack_from(raw, len(raw) - 8)[0]


def _month_bounds_ms(now_ms: int) -> tuple[int, int]:
    """Start of the current and of the next month in local time, as epoch ms."""
    t = time.localtime(now_ms / 1000.0)
    start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    nxt = time.mktime((t.tm_year, t.tm_mon + 1, 1, 0, 0, 0, 0, 0, -1))
    return int(start) * 1000, int(nxt) * 1000


def _fake_ip() -> bytes:
    # MessageClientIDSetter.createFakeIP: the low 4 bytes of the current time in ms.
    return _LONG.pack(int(time.time() * 1000))[4:]


class UniqIdGenerator:
    """``MessageClientIDSetter.createUniqID``: the client-side message id (UNIQ_KEY).

    Layout, upper-case hex: ip (4 or 16 bytes) + pid (short) + a per-process random int
    (Java: the class loader's hash code) -- a constant prefix -- then the int of
    milliseconds since 00:00 local time on the 1st of the current month, then a short
    counter. ``ip`` defaults to Java's fallback "fake IP" (4 bytes of the clock); a
    client should pass its own address (``socket.inet_pton`` output).
    """

    __slots__ = ("_prefix", "_counter", "_start_ms", "_next_start_ms")

    def __init__(
        self, ip: bytes | None = None, *, pid: int | None = None, loader_hash: int | None = None
    ) -> None:
        if ip is None:
            ip = _fake_ip()
        if len(ip) not in (4, 16):
            raise MessageEncodeError(f"UNIQ_KEY ip must be 4 or 16 bytes, got {len(ip)}")
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(32) if loader_hash is None else loader_hash
        self._prefix = f"{ip.hex().upper()}{pid & 0xFFFF:04X}{loader_hash & 0xFFFFFFFF:08X}"
        self._counter = itertools.count()
        self._start_ms = 0
        self._next_start_ms = 0

    @property
    def prefix(self) -> str:
        """The constant part of every id this generator creates."""
        return self._prefix

    def create(self, now_ms: int | None = None) -> str:
        """A new id; ``now_ms`` (epoch ms) defaults to the wall clock."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        if now_ms >= self._next_start_ms or now_ms < self._start_ms - 86_400_000 * 31:
            self._start_ms, self._next_start_ms = _month_bounds_ms(now_ms)
        diff = (now_ms - self._start_ms) & 0xFFFFFFFF
        # Java casts to int; a small negative span (clock stepped back by NTP) becomes 0.
        if diff >= 0x80000000 and diff - 0x100000000 > -1_000_000:
            diff = 0
        return f"{self._prefix}{diff:08X}{next(self._counter) & 0xFFFF:04X}"

    def create_many(self, n: int, now_ms: int | None = None) -> list[str]:
        """``n`` new ids at one clock reading: ``[create(now_ms) for _ in range(n)]``
        with the time part formatted once (a batch's ids differ in the counter)."""
        if n <= 0:
            return []
        head = self.create(now_ms)
        stem = head[:-4]
        return [head, *[f"{stem}{c & 0xFFFF:04X}"
                        for c in itertools.islice(self._counter, n - 1)]]


_default_generator: UniqIdGenerator | None = None


def create_uniq_id() -> str:
    """An id from the process-wide ``UniqIdGenerator`` (created on first use)."""
    global _default_generator
    gen = _default_generator
    if gen is None:
        gen = _default_generator = UniqIdGenerator()
    return gen.create()


def uniq_id_timestamp(uniq_id: str, now_ms: int | None = None) -> int:
    """``MessageClientIDSetter.getNearlyTimeFromID``: approximate creation time, epoch ms.

    The id holds ms since the start of its month; the month is the current one, or the
    previous one when that would put the time at or after ``now_ms``.

    Raises:
        MessageDecodeError: not a 32- or 56-character hex id.
    """
    if len(uniq_id) not in (32, 56):
        raise MessageDecodeError(f"UNIQ_KEY {uniq_id!r} is not 32 or 56 hex characters")
    ip_hex = 8 if len(uniq_id) == 32 else 32
    try:
        span = int(uniq_id[ip_hex + 12 : ip_hex + 20], 16)
    except ValueError as exc:
        raise MessageDecodeError(f"UNIQ_KEY {uniq_id!r} is not hex") from exc
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    start, _ = _month_bounds_ms(now_ms)
    if start + span >= now_ms:
        t = time.localtime(start / 1000.0 - 1)
        start = int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))) * 1000
    return start + span
