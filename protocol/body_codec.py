"""Message body codecs: a Python object <-> body bytes, named by a content type property.

Contract:

* ``CONTENT_TYPE_PROPERTY`` (``"contentType"``) is the user property that names a body's
  MIME type. It is the name Spring Messaging's ``MessageHeaders.CONTENT_TYPE`` takes as a
  RocketMQ user property (rocketmq-spring), so those consumers read it too. RocketMQ itself
  defines no such property; the broker stores and forwards it like any other.
* Two codecs, by name and by content type:

  ===========  =======================  ==================================================
  ``msgpack``  ``application/msgpack``  ``msgpack.packb(use_bin_type=True, datetime=True)``:
                                        str as str, bytes as bin, aware datetimes as the
                                        Timestamp extension (-1); decoded with
                                        ``raw=False, strict_map_key=False`` and timestamps
                                        as aware UTC datetimes
  ``json``     ``application/json``     UTF-8 JSON, compact, ``allow_nan=False`` (standard
                                        JSON, so other languages parse it)
  ===========  =======================  ==================================================

  Reading, parameters after ``;`` are ignored (``application/json;charset=UTF-8``) and
  ``application/x-msgpack`` / ``application/vnd.msgpack`` also mean msgpack.
* ``encode_body(obj, codec)`` -> ``(body, content_type)``; ``decode_body(body, codec)``
  takes a codec name or a content type.
* Errors (all ``ValueError``): ``UnknownCodecError`` (an ``MQClientError``: the caller named
  a codec we do not have), ``BodyEncodeError`` (an ``MQClientError``: the object has no
  representation in that codec), ``BodyDecodeError`` (a ``RocketMQError``: the bytes are not
  what the codec expects); each names the codec and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from .errors import MQClientError, RocketMQError

__all__ = [
    "CONTENT_TYPE_PROPERTY",
    "MSGPACK",
    "JSON",
    "Codec",
    "UnknownCodecError",
    "BodyEncodeError",
    "BodyDecodeError",
    "codec_for",
    "encode_body",
    "decode_body",
]

CONTENT_TYPE_PROPERTY = "contentType"
MSGPACK = "application/msgpack"
JSON = "application/json"


class UnknownCodecError(MQClientError):
    """A codec name or content type that is neither msgpack nor JSON."""


class BodyEncodeError(MQClientError):
    """An object the codec cannot represent (a set in msgpack, bytes in JSON, ...)."""


class BodyDecodeError(RocketMQError, ValueError):
    """A body that is not valid for its codec (truncated msgpack, invalid JSON or UTF-8)."""


def _pack_msgpack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


def _unpack_msgpack(body: bytes) -> Any:
    return msgpack.unpackb(body, raw=False, strict_map_key=False, timestamp=3)


def _dump_json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def _load_json(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


@dataclass(frozen=True, slots=True)
class Codec:
    """One body codec: its short name, the content type it writes, and its two functions."""

    name: str
    content_type: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


_MSGPACK_CODEC = Codec("msgpack", MSGPACK, _pack_msgpack, _unpack_msgpack)
_JSON_CODEC = Codec("json", JSON, _dump_json, _load_json)
_BY_KEY: dict[str, Codec] = {
    "msgpack": _MSGPACK_CODEC,
    MSGPACK: _MSGPACK_CODEC,
    "application/x-msgpack": _MSGPACK_CODEC,
    "application/vnd.msgpack": _MSGPACK_CODEC,
    "json": _JSON_CODEC,
    JSON: _JSON_CODEC,
}


def codec_for(name: str) -> Codec:
    """The codec for a short name (``msgpack``, ``json``) or a content type.

    Raises:
        UnknownCodecError: anything else.
    """
    codec = _BY_KEY.get(name.split(";", 1)[0].strip().lower())
    if codec is None:
        raise UnknownCodecError(
            f"unknown body codec {name!r}: use 'msgpack' or 'json' "
            f"(content types {MSGPACK}, {JSON})")
    return codec


def encode_body(obj: Any, codec: str) -> tuple[bytes, str]:
    """``obj`` as body bytes, and the content type to record with them.

    Raises:
        UnknownCodecError: ``codec`` is not msgpack or json.
        BodyEncodeError: ``obj`` (or something inside it) has no representation in it.
    """
    c = codec_for(codec)
    try:
        return c.encode(obj), c.content_type
    except (TypeError, ValueError, OverflowError) as exc:
        raise BodyEncodeError(f"cannot encode {type(obj).__name__} as {c.name}: {exc}") from exc


def decode_body(body: bytes, codec: str) -> Any:
    """The object in ``body``; ``codec`` is a short name or a content type.

    Raises:
        UnknownCodecError: ``codec`` is not msgpack or json.
        BodyDecodeError: the bytes are not a valid value of that codec.
    """
    c = codec_for(codec)
    try:
        return c.decode(bytes(body))
    except Exception as exc:  # msgpack raises several unrelated types; json ValueError
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise BodyDecodeError(f"body of {len(body)} bytes is not valid {c.name}: {reason}") from exc
