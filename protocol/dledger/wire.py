"""DLedger's peer RPCs: request codes, response codes and the fastjson bodies (sans-IO).

On the wire every RPC is a RocketMQ remoting request on the peer port (``dLegerPeers``)
whose code is a ``DLedgerRequestCode`` and whose body is the request object as fastjson
writes it (``JSON.toJSONBytes``: a JSON object, keys in alphabetical order, nulls left
out, ``byte[]`` as base64, enums by name); the remoting response has code 200
(``DLedgerResponseCode.SUCCESS``) whatever happened and carries the response object the
same way, whose own ``code`` says what happened. A transport failure is
``NETWORK_ERROR`` (302) on the caller's side, never on the wire.

fastjson also writes the getter-only properties (``PushEntryRequest``: ``batch``,
``count``, ``firstEntryIndex``, ``lastEntryIndex``, ``totalSize``); readers ignore them,
so ``to_json`` writes them for a byte-identical body and ``from_json`` reads only the
properties that have setters. Unknown keys are ignored, missing ones take the Java field
defaults.

Upstream: ``protocol/*Request.java``, ``protocol/*Response.java``, ``DLedgerRequestCode``,
``DLedgerResponseCode``, ``DLedgerRpcNettyService.processRequest/handleResponse``.
"""

from __future__ import annotations

import base64
import enum
import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiorocketmq.protocol.dledger.entry import DLedgerEntry

__all__ = ["DLedgerRequestCode", "DLedgerResponseCode", "VoteResult", "PushType",
           "RequestOrResponse", "VoteRequest", "VoteResponse", "HeartBeatRequest",
           "HeartBeatResponse", "PushEntryRequest", "PushEntryResponse",
           "LeadershipTransferRequest", "LeadershipTransferResponse", "MetadataRequest",
           "MetadataResponse", "GetEntriesRequest", "GetEntriesResponse", "entry_to_json",
           "entry_from_json", "encode_body", "decode_body", "request_types", "ProtocolBodyError",
           "parse_peers"]


class DLedgerRequestCode(enum.IntEnum):
    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005


class DLedgerResponseCode(enum.IntEnum):
    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    PUSH_REQUEST_IS_FULL = 421
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506


class VoteResult(enum.Enum):
    """``VoteResponse.RESULT``, by name on the wire."""

    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class PushType(enum.Enum):
    """``PushEntryRequest.Type``."""

    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


class ProtocolBodyError(ValueError):
    """A body that is not the JSON object its request code calls for."""


_SUCCESS = int(DLedgerResponseCode.SUCCESS)


def _int(obj: dict[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ProtocolBodyError(f"{key}={value!r} is not a number")
    try:
        return int(value)
    except ValueError:
        raise ProtocolBodyError(f"{key}={value!r} is not a number") from None


def _str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolBodyError(f"{key}={value!r} is not a string")
    return value


def entry_to_json(entry: DLedgerEntry) -> dict[str, Any]:
    return {"body": base64.b64encode(entry.body).decode("ascii"), "bodyCrc": entry.body_crc,
            "chainCrc": entry.chain_crc, "channel": entry.channel, "index": entry.index,
            "magic": entry.magic, "pos": entry.pos, "size": entry.size, "term": entry.term}


def entry_from_json(obj: Any) -> DLedgerEntry:
    if not isinstance(obj, dict):
        raise ProtocolBodyError(f"entry {obj!r} is not an object")
    raw = obj.get("body")
    if raw is None:
        body = b""
    elif isinstance(raw, str):
        try:
            body = base64.b64decode(raw, validate=True)
        except ValueError:
            raise ProtocolBodyError("entry body is not base64") from None
    else:
        raise ProtocolBodyError("entry body is not base64")
    return DLedgerEntry(index=_int(obj, "index", 0), term=_int(obj, "term", 0),
                        pos=_int(obj, "pos", 0), body=body, magic=_int(obj, "magic", 0),
                        channel=_int(obj, "channel", 0), chain_crc=_int(obj, "chainCrc", 0),
                        body_crc=_int(obj, "bodyCrc", 0))


T = TypeVar("T", bound="RequestOrResponse")


@dataclass(slots=True)
class RequestOrResponse:
    """The fields every request and response has (``RequestOrResponse``)."""

    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    code: int = _SUCCESS
    leader_id: str | None = None
    term: int = -1

    def base_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code}
        if self.group is not None:
            out["group"] = self.group
        if self.leader_id is not None:
            out["leaderId"] = self.leader_id
        if self.local_id is not None:
            out["localId"] = self.local_id
        if self.remote_id is not None:
            out["remoteId"] = self.remote_id
        out["term"] = self.term
        return out

    def to_json(self) -> dict[str, Any]:
        return self.base_json()

    def read_base(self, obj: dict[str, Any]) -> None:
        self.group = _str(obj, "group")
        self.remote_id = _str(obj, "remoteId")
        self.local_id = _str(obj, "localId")
        self.code = _int(obj, "code", _SUCCESS)
        self.leader_id = _str(obj, "leaderId")
        self.term = _int(obj, "term", -1)

    def read_extra(self, obj: dict[str, Any]) -> None:
        """The fields of the subclass (none here)."""

    @classmethod
    def from_json(cls: type[T], obj: Any) -> T:
        if not isinstance(obj, dict):
            raise ProtocolBodyError(f"{cls.__name__} body is not a JSON object")
        out = cls()
        out.read_base(obj)
        out.read_extra(obj)
        return out

    def copy_base(self: T, other: RequestOrResponse) -> T:
        """``copyBaseInfo``."""
        self.group = other.group
        self.term = other.term
        self.code = other.code
        self.local_id = other.local_id
        self.remote_id = other.remote_id
        self.leader_id = other.leader_id
        return self


@dataclass(slots=True)
class VoteRequest(RequestOrResponse):
    ledger_end_index: int = -1
    ledger_end_term: int = -1

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["ledgerEndIndex"] = self.ledger_end_index
        out["ledgerEndTerm"] = self.ledger_end_term
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        self.ledger_end_index = _int(obj, "ledgerEndIndex", -1)
        self.ledger_end_term = _int(obj, "ledgerEndTerm", -1)


@dataclass(slots=True)
class VoteResponse(RequestOrResponse):
    vote_result: VoteResult = VoteResult.UNKNOWN

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["voteResult"] = self.vote_result.value
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        raw = obj.get("voteResult")
        if raw is None:
            self.vote_result = VoteResult.UNKNOWN
            return
        try:
            self.vote_result = VoteResult(raw)
        except ValueError:
            raise ProtocolBodyError(f"voteResult={raw!r}") from None


@dataclass(slots=True)
class HeartBeatRequest(RequestOrResponse):
    pass


@dataclass(slots=True)
class HeartBeatResponse(RequestOrResponse):
    pass


@dataclass(slots=True)
class PushEntryRequest(RequestOrResponse):
    commit_index: int = -1
    type: PushType = PushType.APPEND
    entry: DLedgerEntry | None = None
    batch_entry: list[DLedgerEntry] = field(default_factory=list)

    @property
    def entries(self) -> list[DLedgerEntry]:
        """The entries carried, in index order (a batch, or the one entry)."""
        if self.batch_entry:
            return self.batch_entry
        return [self.entry] if self.entry is not None else []

    @property
    def first_entry_index(self) -> int:
        entries = self.entries
        return entries[0].index if entries else -1

    @property
    def count(self) -> int:
        return len(self.entries)

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        batch = self.batch_entry
        entries = self.entries
        out["batch"] = bool(batch)
        out["batchEntry"] = [entry_to_json(e) for e in batch]
        out["commitIndex"] = self.commit_index
        out["count"] = len(entries)
        if self.entry is not None:
            out["entry"] = entry_to_json(self.entry)
        out["firstEntryIndex"] = entries[0].index if entries else -1
        out["lastEntryIndex"] = entries[-1].index if entries else -1
        out["totalSize"] = sum(e.size for e in batch)
        out["type"] = self.type.value
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        self.commit_index = _int(obj, "commitIndex", -1)
        raw = obj.get("type")
        try:
            self.type = PushType(raw) if raw is not None else PushType.APPEND
        except ValueError:
            raise ProtocolBodyError(f"type={raw!r}") from None
        entry = obj.get("entry")
        self.entry = entry_from_json(entry) if entry is not None else None
        batch = obj.get("batchEntry")
        if batch is not None and not isinstance(batch, list):
            raise ProtocolBodyError("batchEntry is not a list")
        self.batch_entry = [entry_from_json(e) for e in batch or ()]


@dataclass(slots=True)
class PushEntryResponse(RequestOrResponse):
    index: int | None = None
    begin_index: int = 0
    end_index: int = 0
    count: int = 0

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["beginIndex"] = self.begin_index
        out["count"] = self.count
        out["endIndex"] = self.end_index
        if self.index is not None:
            out["index"] = self.index
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        self.index = _int(obj, "index", 0) if obj.get("index") is not None else None
        self.begin_index = _int(obj, "beginIndex", 0)
        self.end_index = _int(obj, "endIndex", 0)
        self.count = _int(obj, "count", 0)


@dataclass(slots=True)
class LeadershipTransferRequest(RequestOrResponse):
    transfer_id: str | None = None
    transferee_id: str | None = None
    take_leadership_ledger_index: int = 0

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["takeLeadershipLedgerIndex"] = self.take_leadership_ledger_index
        if self.transfer_id is not None:
            out["transferId"] = self.transfer_id
        if self.transferee_id is not None:
            out["transfereeId"] = self.transferee_id
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        self.transfer_id = _str(obj, "transferId")
        self.transferee_id = _str(obj, "transfereeId")
        self.take_leadership_ledger_index = _int(obj, "takeLeadershipLedgerIndex", 0)


@dataclass(slots=True)
class LeadershipTransferResponse(RequestOrResponse):
    pass


@dataclass(slots=True)
class MetadataRequest(RequestOrResponse):
    pass


@dataclass(slots=True)
class MetadataResponse(RequestOrResponse):
    peers: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["peers"] = dict(sorted(self.peers.items()))
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        peers = obj.get("peers") or {}
        if not isinstance(peers, dict):
            raise ProtocolBodyError("peers is not an object")
        self.peers = {str(k): str(v) for k, v in peers.items()}


@dataclass(slots=True)
class GetEntriesRequest(RequestOrResponse):
    begin_index: int = 0
    max_size: int = 0

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["beginIndex"] = self.begin_index
        out["maxSize"] = self.max_size
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        self.begin_index = _int(obj, "beginIndex", 0)
        self.max_size = _int(obj, "maxSize", 0)


@dataclass(slots=True)
class GetEntriesResponse(RequestOrResponse):
    entries: list[DLedgerEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = self.base_json()
        out["entries"] = [entry_to_json(e) for e in self.entries]
        return out

    def read_extra(self, obj: dict[str, Any]) -> None:
        raw = obj.get("entries") or []
        if not isinstance(raw, list):
            raise ProtocolBodyError("entries is not a list")
        self.entries = [entry_from_json(e) for e in raw]


_REQUEST_TYPES: dict[DLedgerRequestCode, tuple[type[RequestOrResponse], type[RequestOrResponse]]] = {
    DLedgerRequestCode.VOTE: (VoteRequest, VoteResponse),
    DLedgerRequestCode.HEART_BEAT: (HeartBeatRequest, HeartBeatResponse),
    DLedgerRequestCode.PUSH: (PushEntryRequest, PushEntryResponse),
    DLedgerRequestCode.LEADERSHIP_TRANSFER: (LeadershipTransferRequest, LeadershipTransferResponse),
    DLedgerRequestCode.METADATA: (MetadataRequest, MetadataResponse),
    DLedgerRequestCode.GET: (GetEntriesRequest, GetEntriesResponse),
}


def request_types(code: int) -> tuple[type[RequestOrResponse], type[RequestOrResponse]] | None:
    """The (request, response) classes of a request code, None for codes not served here."""
    try:
        return _REQUEST_TYPES.get(DLedgerRequestCode(code))
    except ValueError:
        return None


def encode_body(obj: RequestOrResponse) -> bytes:
    """The fastjson form of ``obj`` (keys in order, compact)."""
    return json.dumps(obj.to_json(), separators=(",", ":"), sort_keys=True).encode("utf-8")


M = TypeVar("M", bound=RequestOrResponse)


def decode_body(cls: type[M], body: bytes | bytearray | memoryview | None) -> M:
    """Parse a request or response body of class ``cls``.

    Raises:
        ProtocolBodyError: not JSON, not an object, or a field of the wrong type.
    """
    if not body:
        raise ProtocolBodyError(f"empty {cls.__name__} body")
    try:
        obj = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolBodyError(f"{cls.__name__} body is not JSON: {exc}") from None
    return cls.from_json(obj)

def parse_peers(peers: str) -> dict[str, str]:
    """``dLegerPeers`` as ``{selfId: "host:port"}``, in the order given.

    Raises:
        ValueError: an empty list, an item without ``id-host:port``, or a repeated id.
    """
    out: dict[str, str] = {}
    for item in peers.split(";"):
        item = item.strip()
        if not item:
            continue
        node_id, sep, addr = item.partition("-")
        if not sep or not node_id or ":" not in addr:
            raise ValueError(f"dLegerPeers item {item!r} is not id-host:port")
        if node_id in out:
            raise ValueError(f"dLegerPeers names {node_id} twice")
        out[node_id] = addr
    if not out:
        raise ValueError("dLegerPeers is empty")
    return out
