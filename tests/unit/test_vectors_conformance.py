"""Wire conformance against the captured Apache RocketMQ 4.9.7 frames (tests/data/vectors).

Every frame of frames.jsonl must split with ``FrameDecoder`` however the bytes arrive
(whole, one byte at a time, hypothesis-chosen chunks, and as the concatenated stream of
its connection direction), decode to its recorded header and body, re-encode byte for
byte, and, where its code has a typed custom header, decode into that header and
re-encode from it to the same ext fields (and, for ROCKETMQ frames, the same bytes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError
from aiorocketmq.protocol.frame import FrameDecoder
from aiorocketmq.protocol.headers import (
    CommandHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    decode_header,
    decode_send_request_header,
)
from aiorocketmq.protocol.request_specs import REQUEST_HEADERS, RESPONSE_HEADERS
from tests.vectors import body_bytes, frame, frame_bytes, load_frames

# Same examples on every run: the suite must be deterministic.
DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)

FRAMES = load_frames()
ALL_IDS = [f["id"] for f in FRAMES]
FAST_HEADERS = (
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
# ext fields that RPC hooks add to any request (ACL signature, StreamTypeRPCHook)
HOOK_KEYS = frozenset({"AccessKey", "Signature", "ReqT"})
_PULL_ANSWER_CODES = frozenset(
    {ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
     ResponseCode.PULL_OFFSET_MOVED}
)


def _streams() -> dict[tuple[int, str], list[int]]:
    """Frame ids per (TCP connection, direction), in capture order."""
    out: dict[tuple[int, str], list[int]] = defaultdict(list)
    for f in FRAMES:
        out[(f["stream"], f["conn"])].append(f["id"])
    return dict(out)


STREAMS = _streams()
STREAM_KEYS = sorted(STREAMS)


def _stream_bytes(key: tuple[int, str]) -> bytes:
    return b"".join(frame_bytes(i) for i in STREAMS[key])


def _decode_all(chunks: list[bytes]) -> tuple[list[RemotingCommand], int]:
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    for chunk in chunks:
        out.extend(dec.feed_and_decode(chunk))
    return out, dec.buffered


def _decode_one(data: bytes) -> RemotingCommand:
    cmds, left = _decode_all([data])
    assert len(cmds) == 1 and left == 0
    return cmds[0]


def check_each(items: Iterable[Any], check: Callable[[Any], None]) -> None:
    """Run ``check`` on every item and report every failing one, not just the first.

    One test loops over the frames instead of one test per frame: a pytest item per
    frame would pay the suite's per-test ``gc.collect()`` over the whole loaded capture.
    """
    failures: list[str] = []
    for item in items:
        try:
            check(item)
        except AssertionError as exc:  # collected and re-raised below with every id
            failures.append(f"{item}: {exc}".splitlines()[0][:300])
    assert not failures, f"{len(failures)} failed:\n" + "\n".join(failures[:20])


def _typed_header_class(rec: dict[str, Any]) -> type[CommandHeader] | None:
    """The typed header this frame carries, if its code has one and it is filled in."""
    if not rec["is_response"]:
        return REQUEST_HEADERS.get(rec["code"])
    req_code = rec.get("request_code")
    cls = RESPONSE_HEADERS.get(req_code) if req_code is not None else None
    if cls is None:
        return None
    if cls is PullMessageResponseHeader:
        return cls if rec["code"] in _PULL_ANSWER_CODES else None
    return cls if rec["code"] == ResponseCode.SUCCESS else None


TYPED_IDS = [f["id"] for f in FRAMES if _typed_header_class(f) is not None]


def assert_matches_record(
    cmd: RemotingCommand, rec: dict[str, Any], *, key_order: bool = True
) -> None:
    """The decoded command equals the recorded header, body and flags of ``rec``.

    With ``key_order`` the ext fields must also come in the recorded order.
    """
    hdr = rec["header"]
    assert SerializeType(cmd.serialize_type).name == rec["serialize"]
    assert cmd.code == hdr["code"] == rec["code"]
    assert LanguageCode(cmd.language).name == hdr["language"]
    assert cmd.version == hdr["version"]
    assert cmd.opaque == hdr["opaque"] == rec["opaque"]
    assert cmd.flag == hdr["flag"] == rec["flag"]
    assert cmd.remark == hdr.get("remark")
    assert cmd.is_response == rec["is_response"]
    assert cmd.is_oneway == rec["oneway"]
    if rec["serialize"] == "JSON":
        assert set(hdr) <= {
            "code", "extFields", "flag", "language", "opaque", "remark",
            "serializeTypeCurrentRPC", "version",
        }
        assert hdr.get("serializeTypeCurrentRPC", "JSON") == "JSON"
        if "extFields" in hdr:
            assert cmd.ext_fields is not None
            assert all(type(v) is str for v in hdr["extFields"].values())
            assert all(type(v) is str for v in cmd.ext_fields.values())
            assert cmd.ext_fields == hdr["extFields"]
            if key_order:
                assert list(cmd.ext_fields) == list(hdr["extFields"])
        else:
            assert cmd.ext_fields is None
    else:
        assert (cmd.ext_fields or {}) == hdr.get("extFields", {})
        if key_order:
            assert list(cmd.ext_fields or {}) == rec["ext_fields_wire_order"]
    body = cmd.body if cmd.body is not None else b""
    assert len(body) == rec["body_length"]
    assert bytes(body) == body_bytes(rec["id"])
    assert rec["header_length"] == len(bytes.fromhex(rec["header_hex"]))


# -- every frame, every way of arriving --------------------------------------------------


def test_vectors_are_all_present() -> None:
    assert len(FRAMES) == 1348
    assert ALL_IDS == list(range(len(FRAMES)))


def test_every_frame_decodes_to_record_and_reencodes() -> None:
    check_each(ALL_IDS, _check_decode_reencode)


def _check_decode_reencode(frame_id: int) -> None:
    rec = frame(frame_id)
    data = frame_bytes(frame_id)
    cmd = _decode_one(data)
    assert_matches_record(cmd, rec)
    assert cmd.encode() == data
    head, body = cmd.encode_parts()
    assert head + (bytes(body) if body is not None else b"") == data
    assert cmd.encode_header().hex() == rec["header_hex"]


def test_every_frame_one_byte_at_a_time() -> None:
    for rec in FRAMES:
        data = frame_bytes(rec["id"])
        dec = FrameDecoder()
        got: list[RemotingCommand] = []
        for i in range(len(data)):
            dec.feed(data[i : i + 1])
            cmd = dec.next_command()
            if cmd is not None:
                got.append(cmd)
                assert i == len(data) - 1, f"frame {rec['id']} completed early at byte {i}"
        assert len(got) == 1 and dec.buffered == 0, rec["id"]
        assert_matches_record(got[0], rec)


def test_every_frame_with_trailing_partial_frame() -> None:
    """A whole frame followed by the start of the next yields the first and keeps the rest."""
    for a, b in zip(FRAMES, FRAMES[1:], strict=False):
        tail = frame_bytes(b["id"])[:7]
        cmds, left = _decode_all([frame_bytes(a["id"]) + tail])
        assert len(cmds) == 1 and left == len(tail), a["id"]
        assert_matches_record(cmds[0], a)


def test_every_connection_stream_whole_and_bytewise() -> None:
    check_each(STREAM_KEYS, _check_stream_whole_and_bytewise)


def _check_stream_whole_and_bytewise(key: tuple[int, str]) -> None:
    ids = STREAMS[key]
    data = _stream_bytes(key)
    whole, left = _decode_all([data])
    assert left == 0 and len(whole) == len(ids)
    bytewise, left = _decode_all([data[i : i + 1] for i in range(len(data))])
    assert left == 0 and len(bytewise) == len(ids)
    for fid, c1, c2 in zip(ids, whole, bytewise, strict=True):
        assert_matches_record(c1, frame(fid))
        assert_matches_record(c2, frame(fid))
        assert c1.encode() == c2.encode() == frame_bytes(fid)


@settings(DETERMINISTIC, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(STREAM_KEYS),
    sizes=st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=40),
)
def test_connection_stream_in_chosen_chunks(key: tuple[int, str], sizes: list[int]) -> None:
    data = _stream_bytes(key)
    chunks: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        chunks.append(data[pos : pos + n])
        pos += n
        i += 1
    cmds, left = _decode_all(chunks)
    assert left == 0
    ids = STREAMS[key]
    assert [c.opaque for c in cmds] == [frame(i)["opaque"] for i in ids]
    for fid, cmd in zip(ids, cmds, strict=True):
        assert cmd.encode() == frame_bytes(fid)


@settings(DETERMINISTIC, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(frame_id=st.sampled_from(ALL_IDS), data=st.data())
def test_single_frame_in_chosen_chunks(frame_id: int, data: st.DataObject) -> None:
    raw = frame_bytes(frame_id)
    cuts = sorted(
        data.draw(st.sets(st.integers(min_value=1, max_value=max(1, len(raw) - 1)), max_size=12))
    )
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    cmds, left = _decode_all(chunks)
    assert len(cmds) == 1 and left == 0
    assert_matches_record(cmds[0], frame(frame_id))


# -- typed custom headers ----------------------------------------------------------------


def test_request_codes_without_typed_header_carry_only_hook_keys() -> None:
    """Every captured request whose code has no header class carries no header fields."""
    for rec in FRAMES:
        if rec["is_response"] or rec["code"] in REQUEST_HEADERS:
            continue
        keys = set(rec["header"].get("extFields") or {})
        assert keys <= HOOK_KEYS, (rec["id"], rec["code_name"], keys)


def test_typed_headers_cover_the_captured_codes() -> None:
    req_codes = {f["code"] for f in FRAMES if f["id"] in TYPED_IDS and not f["is_response"]}
    assert {
        RequestCode.PULL_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2, RequestCode.REGISTER_BROKER,
        RequestCode.QUERY_MESSAGE, RequestCode.END_TRANSACTION,
        RequestCode.CHECK_TRANSACTION_STATE, RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
    } <= req_codes
    typed_responses = [f for f in FRAMES if f["id"] in TYPED_IDS and f["is_response"]]
    assert len(typed_responses) > 100


def _reencoded(cmd: RemotingCommand, ext: dict[str, str] | None) -> bytes:
    return RemotingCommand(
        cmd.code,
        language=cmd.language,
        version=cmd.version,
        opaque=cmd.opaque,
        flag=cmd.flag,
        remark=cmd.remark,
        ext_fields=ext,
        body=cmd.body,
        serialize_type=cmd.serialize_type,
    ).encode()


def test_typed_headers_round_trip() -> None:
    check_each(TYPED_IDS, _check_typed_header_round_trip)


def _check_typed_header_round_trip(frame_id: int) -> None:
    rec = frame(frame_id)
    cls = _typed_header_class(rec)
    assert cls is not None
    cmd = _decode_one(frame_bytes(frame_id))
    header = decode_header(cls, cmd)
    out = header.to_ext_fields()
    # Every captured header was written by Java, which writes every non-null field, so
    # nothing is lost or invented: the dict comes back exactly.
    assert out == (cmd.ext_fields or {})
    assert type(header).from_ext_fields(out) == header

    # Re-encoding from the typed header: ROCKETMQ frames of the four FastCodesHeader
    # classes come back byte for byte (upstream's fixed key order). Elsewhere Java's key
    # order also depends on HashMap insertion order among keys sharing a bucket, which
    # follows its reflection order, so we hold the values, not that order: same length,
    # same decoded command.
    ext = out if (out or cmd.ext_fields is not None) else None
    again = _reencoded(cmd, ext)
    if cmd.serialize_type == SerializeType.ROCKETMQ and cls.FAST_CODES:
        assert list(out) == rec["ext_fields_wire_order"]
        assert again == frame_bytes(frame_id)
    else:
        assert len(again) == rec["total_length"] + 4
        assert_matches_record(_decode_one(again), rec, key_order=False)


FAST_IDS = [i for i in TYPED_IDS if _typed_header_class(frame(i)) in FAST_HEADERS]


def test_fast_headers_match_generic_codec() -> None:
    check_each(FAST_IDS, _check_fast_matches_generic)


def _check_fast_matches_generic(frame_id: int) -> None:
    cls = _typed_header_class(frame(frame_id))
    assert cls is not None and cls.FAST_CODES
    ext = _decode_one(frame_bytes(frame_id)).ext_fields
    fast = cls.from_ext_fields(ext)
    generic = cls.from_ext_fields_generic(ext)
    assert fast == generic
    assert list(fast.to_ext_fields().items()) == list(generic.to_ext_fields_generic().items())


def test_fast_headers_seen_in_rocketmq_encoding() -> None:
    seen = {
        _typed_header_class(frame(i))
        for i in FAST_IDS
        if frame(i)["serialize"] == "ROCKETMQ"
    }
    assert seen == set(FAST_HEADERS)


def test_empty_answers_decode_as_their_empty_headers() -> None:
    """`"extFields":{}` answers (35, 38, 103) are Java responses with field-less headers."""
    for rec in FRAMES:
        if rec["is_response"] and rec["header"].get("extFields") == {}:
            cls = _typed_header_class(rec)
            if rec.get("request_code") == RequestCode.PULL_MESSAGE:
                # SUBSCRIPTION_NOT_LATEST: the pull header is attached but never filled in
                assert rec["code"] == ResponseCode.SUBSCRIPTION_NOT_LATEST
                with pytest.raises(HeaderError, match="suggestWhichBrokerId"):
                    PullMessageResponseHeader.from_ext_fields({})
                continue
            assert cls is not None, rec["id"]
            assert cls.from_ext_fields({}).to_ext_fields() == {}


SEND_IDS = [
    f["id"]
    for f in FRAMES
    if not f["is_response"]
    and f["code"] in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                      RequestCode.SEND_REPLY_MESSAGE_V2)
]


def test_captured_sends_decode_to_long_form() -> None:
    assert len(SEND_IDS) == 39
    check_each(SEND_IDS, _check_send_long_form)


def _check_send_long_form(frame_id: int) -> None:
    cmd = _decode_one(frame_bytes(frame_id))
    ext = cmd.ext_fields
    assert ext is not None
    v1 = decode_send_request_header(cmd)
    assert isinstance(v1, SendMessageRequestHeader)
    assert v1.producer_group == ext["a"]
    assert v1.topic == ext["b"]
    assert v1.default_topic == ext["c"] == "TBW102"
    assert v1.default_topic_queue_nums == int(ext["d"]) == 4
    assert v1.queue_id == int(ext["e"])
    assert v1.sys_flag == int(ext["f"])
    assert v1.born_timestamp == int(ext["g"])
    assert v1.flag == int(ext["h"])
    assert v1.properties == ext["i"]
    assert v1.reconsume_times == int(ext["j"]) == 0
    assert v1.unit_mode is False
    assert v1.max_reconsume_times is None
    assert v1.batch is (cmd.code == RequestCode.SEND_BATCH_MESSAGE)
    assert v1.bname == ext["n"] == "broker-a"
    assert SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields() == ext
