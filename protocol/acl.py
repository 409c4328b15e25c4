"""ACL 1.0 request signing, shared by the client (which signs) and the broker (which checks).

Contract (upstream 4.9.7 ``acl/common``: ``AclClientRPCHook``, ``AclUtils.combineRequestContent``,
``AclSigner``, ``SessionCredentials``, ``Permission``):

* A signed request carries extFields ``AccessKey``, optionally ``SecurityToken``, and
  ``Signature``. The signed content is the UTF-8 bytes of the values of every other
  extField, concatenated in key order (Java ``TreeMap<String,String>``: UTF-16 code-unit
  order), followed by the body. ``Signature`` = base64(HMAC-SHA1(secretKey, content)).
* The client signs every field but ``Signature``; the broker's check
  (``PlainAccessValidator.parse``) also leaves out ``_UNIQUE_KEY_QUERY``
  (``MixAll.UNIQUE_MSG_QUERY_FLAG``): ``BROKER_EXCLUDED_FIELDS``.
* ``RPCHook`` is upstream's client hook (``doBeforeRequest`` / ``doAfterResponse``):
  ``RemotingClient`` calls ``do_before_request(addr, request)`` on every request it sends.
  ``AclClientRPCHook(SessionCredentials(ak, sk))`` is the signing one; pass any other object
  with the same two methods for custom signing.
* Permission bits and their YAML spellings (``PUB``, ``SUB``, ``PUB|SUB``, ``SUB|PUB``,
  ``DENY``) are ``Permission``'s; an unknown spelling is ``DENY``, as upstream.

Pure functions, no I/O.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "SIGNATURE",
    "SECURITY_TOKEN",
    "ONS_CHANNEL",
    "BROKER_EXCLUDED_FIELDS",
    "AclClientRPCHook",
    "Permission",
    "PlainAccessConfig",
    "RPCHook",
    "SessionCredentials",
    "cal_signature",
    "combine_request_content",
    "sign_request",
]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"  # ali-ons adds it (value ALIYUN); signed like any other field
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
BROKER_EXCLUDED_FIELDS = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))
_CLIENT_EXCLUDED_FIELDS = frozenset((SIGNATURE,))


def _java_string_order(key: str) -> bytes:
    # java.lang.String.compareTo compares UTF-16 code units; big-endian UTF-16 bytes sort
    # the same way (Python's str order differs only past the BMP).
    return key.encode("utf-16-be", "surrogatepass")


def combine_request_content(
    ext_fields: Mapping[str, str] | None,
    body: bytes | bytearray | memoryview | None,
    excluded: Iterable[str] = _CLIENT_EXCLUDED_FIELDS,
) -> bytes:
    """``AclUtils.combineRequestContent``: sorted extField values (minus ``excluded``) + body."""
    skip = excluded if isinstance(excluded, frozenset) else frozenset(excluded)
    text = ""
    if ext_fields:
        text = "".join(str(ext_fields[k]) for k in sorted(ext_fields, key=_java_string_order)
                       if k not in skip)
    head = text.encode("utf-8")
    return head + bytes(body) if body else head


def cal_signature(data: bytes, secret_key: str) -> str:
    """``AclSigner.calSignature``: base64(HMAC-SHA1(secret_key UTF-8, data))."""
    mac = hmac.new(secret_key.encode("utf-8"), data, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


@dataclasses.dataclass(frozen=True, slots=True)
class SessionCredentials:
    """``SessionCredentials``: who signs. The secret never appears in ``repr``."""

    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    security_token: str | None = dataclasses.field(default=None, repr=False)


class RPCHook(Protocol):
    """Upstream ``RPCHook``: called by the client around each request it sends."""

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand) -> None: ...


def sign_request(request: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add ``AccessKey`` (+ ``SecurityToken``) and ``Signature`` as ``AclClientRPCHook`` does."""
    ext = request.ext_fields
    if ext is None:
        ext = request.ext_fields = {}
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    content = combine_request_content(ext, request.body)
    ext[SIGNATURE] = cal_signature(content, credentials.secret_key)


class AclClientRPCHook:
    """``AclClientRPCHook``: signs every request with one ``SessionCredentials``."""

    __slots__ = ("session_credentials",)

    def __init__(self, session_credentials: SessionCredentials) -> None:
        self.session_credentials = session_credentials

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        sign_request(request, self.session_credentials)

    def do_after_response(self, remote_addr: str, request: RemotingCommand,
                          response: RemotingCommand) -> None:
        return None

    def __repr__(self) -> str:
        return f"AclClientRPCHook(access_key={self.session_credentials.access_key!r})"


class Permission:
    """``acl.common.Permission``: bits, their spellings, and the check."""

    DENY = 1
    ANY = 1 << 1
    PUB = 1 << 2
    SUB = 1 << 3

    _BY_NAME = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

    @classmethod
    def parse(cls, text: str | None) -> int:
        """``parsePermFromString``: None or an unknown spelling is DENY."""
        if text is None:
            return cls.DENY
        return cls._BY_NAME.get(text.strip(), cls.DENY)

    @classmethod
    def check(cls, needed: int, owned: int) -> bool:
        """``checkPermission``: DENY wins; ANY asks for PUB or SUB; else any common bit."""
        if owned & cls.DENY:
            return False
        if needed & cls.ANY:
            return bool(owned & (cls.PUB | cls.SUB))
        return bool(needed & owned)

    @classmethod
    def is_valid_spelling(cls, text: str) -> bool:
        """``checkResourcePerms``: DENY itself, or a spelling that does not parse to DENY."""
        text = text.strip()
        return text == "DENY" or cls.parse(text) != cls.DENY


def _text(value: Any) -> str | None:
    """A scalar as fastjson fills a String field (``12345678`` -> ``"12345678"``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    return str(value).strip().lower() == "true"


def _texts(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        value = [value]
    return [str(v) for v in value]


@dataclasses.dataclass(slots=True)
class PlainAccessConfig:
    """``PlainAccessConfig``: one account as in plain_acl.yml, UPDATE_AND_CREATE_ACL_CONFIG
    and the GET_BROKER_CLUSTER_ACL_CONFIG body. The secret never appears in ``repr``."""

    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    @classmethod
    def from_json(cls, obj: Any) -> PlainAccessConfig:
        """From a YAML account or a JSON body element (scalars as fastjson reads them)."""
        if not isinstance(obj, dict):
            raise ValueError(f"an account must be a mapping, got {obj!r}")
        return cls(
            access_key=_text(obj.get("accessKey")),
            secret_key=_text(obj.get("secretKey")),
            white_remote_address=_text(obj.get("whiteRemoteAddress")),
            admin=_flag(obj.get("admin", False)),
            default_topic_perm=_text(obj.get("defaultTopicPerm")),
            default_group_perm=_text(obj.get("defaultGroupPerm")),
            topic_perms=_texts(obj.get("topicPerms")),
            group_perms=_texts(obj.get("groupPerms")),
        )

    def to_json(self) -> dict[str, Any]:
        """fastjson's bean form: keys in alphabetical order, null fields left out."""
        out: dict[str, Any] = {}
        for key, value in (
            ("accessKey", self.access_key), ("admin", self.admin),
            ("defaultGroupPerm", self.default_group_perm),
            ("defaultTopicPerm", self.default_topic_perm), ("groupPerms", self.group_perms),
            ("secretKey", self.secret_key), ("topicPerms", self.topic_perms),
            ("whiteRemoteAddress", self.white_remote_address),
        ):
            if value is not None:
                out[key] = value
        return out
