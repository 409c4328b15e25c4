"""protocol.message against the captured 4.9.7 vectors, plus round-trip and fuzz properties."""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag
from aiorocketmq.protocol.errors import MQClientError, ProtocolError, RocketMQError
from aiorocketmq.protocol.javautil import java_string_hash
from aiorocketmq.protocol.message import (
    BLANK_MAGIC_CODE,
    BORN_HOST_POS,
    BORN_TIMESTAMP_POS,
    COMPRESS_MSG_BODY_OVER,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    SYSFLAG_POS,
    Message,
    MessageDecodeError,
    MessageEncodeError,
    MessageExt,
    MessageTooLargeError,
    UniqIdGenerator,
    UnsupportedCompressionError,
    compress_body,
    create_offset_msg_id,
    create_uniq_id,
    decode_batch,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    decode_properties,
    decompress_body,
    encode_batch,
    encode_message,
    encode_properties,
    encode_stored_record,
    record_size,
    socket_address_from_bytes,
    socket_address_to_bytes,
    store_timestamp_pos,
    tags_to_tags_code,
    uniq_id_timestamp,
)
from tests.vectors import body_bytes, frame, frames_where, load_frames, vector_file

UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
BROKER = "127.0.0.1:10911"


def _stored_bodies() -> list[tuple[int, bytes]]:
    return [
        (f["id"], bytes.fromhex(f["body_hex"]))
        for f in load_frames()
        if f.get("body_format") == "stored-messages"
    ]


def _raw_properties(record: bytes) -> bytes:
    """The PROPERTIES bytes of a v1 record, sliced by the layout (not via our decoder)."""
    p = _props_len_pos(record)
    props_len = int.from_bytes(record[p : p + 2], "big")
    assert p + 2 + props_len == len(record)
    return record[p + 2 :]


def _props_len_pos(record: bytes) -> int:
    sys_flag = int.from_bytes(record[SYSFLAG_POS : SYSFLAG_POS + 4], "big")
    p = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    body_len = int.from_bytes(record[p : p + 4], "big")
    p += 4 + body_len
    return p + 1 + record[p]


# --- the three pull bodies of tests/data/vectors/pull_response_messages.md ------------


def test_frame_374_props_message_every_field() -> None:
    body = body_bytes(374)
    assert len(body) == 310
    msgs = decode_messages(body)
    assert len(msgs) == 1
    m = msgs[0]
    assert m.store_size == 310
    assert body[4:8] == bytes.fromhex("daa320a7")
    assert m.body_crc == 1761280522 == zlib.crc32(body[88:119]) & 0x7FFFFFFF
    assert m.queue_id == 1
    assert m.flag == 0
    assert m.queue_offset == 0
    assert m.commit_log_offset == 20380
    assert m.sys_flag == 0
    assert m.born_timestamp == 1795318960714
    assert m.born_host == "127.0.0.1:50192"
    assert m.store_timestamp == 1795318960733
    assert m.store_host == BROKER
    assert m.reconsume_times == 0
    assert m.prepared_transaction_offset == 0
    assert m.body == "hello props ü€ 1795318960200".encode()
    assert m.topic == "VecPropsTopic"
    assert m.properties == {
        "color": "red",
        "size": "L",
        "KEYS": "vkey1 vkey2",
        "unicode": "héllo-世界",
        "UNIQ_KEY": "FD0000000000000000000000000000024DC35FFD2B276CF16A4A0000",
        "CLUSTER": "DefaultCluster",
        "TAGS": "TagA",
        "vecRun": "1795318960200",
    }
    assert list(m.properties) == ["color", "size", "KEYS", "unicode", "UNIQ_KEY", "CLUSTER", "TAGS", "vecRun"]
    assert m.offset_msg_id == "7F00000100002A9F0000000000004F9C"
    assert m.msg_id == "FD0000000000000000000000000000024DC35FFD2B276CF16A4A0000"
    assert m.tags == "TagA"
    assert m.keys == "vkey1 vkey2"
    assert m.tags_code == 2598919  # the codeSet entry of TagA in the captured heartbeat
    assert b"2598919" in vector_file("heartbeat_body.json")


def test_frame_60_eleven_messages() -> None:
    body = body_bytes(60)
    assert len(body) == 2803
    msgs = decode_messages(body)
    table = [
        (252, 0, 0, 0), (252, 0, 1, 1008), (252, 0, 2, 2016), (254, 0, 3, 3028),
        (254, 0, 4, 4044), (255, 0, 5, 5060), (255, 0, 6, 5825), (255, 0, 7, 7100),
        (258, 0, 8, 7610), (258, 0, 9, 8642), (258, 0, 10, 9674),
    ]
    assert [(m.store_size, m.queue_id, m.queue_offset, m.commit_log_offset) for m in msgs] == table
    assert all(m.sys_flag == 0 and m.topic == "TestTopic" for m in msgs)
    first = msgs[0]
    assert first.body_crc == 1026288024
    assert first.flag == 0
    assert first.born_timestamp == 1795318952439
    assert first.born_host == "127.0.0.1:52668"
    assert first.store_timestamp == 1795318952477
    assert first.store_host == BROKER
    assert first.reconsume_times == 0
    assert first.prepared_transaction_offset == 0
    assert first.body == b"hello vecjson-sync-0"
    assert first.properties == {
        "KEYS": "vecjson-sync-0",
        "runId": "vecjson",
        "UNIQ_KEY": "FD0000000000000000000000000000024C725FFD2B276CF149F60000",
        "CLUSTER": "DefaultCluster",
        "TAGS": "sync",
    }
    assert first.offset_msg_id == "7F00000100002A9F0000000000000000"


def test_frame_439_compressed_message() -> None:
    body = body_bytes(439)
    assert len(body) == 698
    m, end = decode_message(body)
    assert end == 698 == m.store_size
    assert m.body_crc == 407528625 == zlib.crc32(body[88 : 88 + 447]) & 0x7FFFFFFF
    assert (m.queue_id, m.flag, m.queue_offset, m.commit_log_offset) == (0, 0, 0, 20690)
    assert m.sys_flag == 769 == MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB
    assert m.born_timestamp == 1795318968547
    assert m.born_host == "127.0.0.1:50222"
    assert m.store_timestamp == 1795318968558
    assert m.store_host == BROKER
    assert m.topic == "VecCompressTopic"
    assert len(m.body) == 8206
    assert m.body.startswith(b"line 0: the quick brown fox jumps over the lazy dog\nline 1: ")
    assert m.properties == {
        "KEYS": "bigkey-1795318968041",
        "UNIQ_KEY": "FD0000000000000000000000000000024DFC5FFD2B276CF188DF0000",
        "CLUSTER": "DefaultCluster",
        "TAGS": "Big",
        "vecRun": "1795318968041",
    }
    assert m.offset_msg_id == "7F00000100002A9F00000000000050D2"
    raw, _ = decode_message(body, decompress=False)
    assert len(raw.body) == 447 and raw.body[:2] == b"\x78\x5e"
    # Python's zlib at level 5 reproduces the Java producer's bytes (send frame 395) ...
    assert compress_body(m.body) == raw.body == body_bytes(395)
    assert frame(395)["header"]["extFields"]["f"] == "769"
    # ... so MessageDecoder.encode(msg, needCompress=true) gives the record back.
    assert encode_message(m, compress=True) == body
    assert len(m.body) >= COMPRESS_MSG_BODY_OVER


# --- every stored record in the capture ----------------------------------------------


def test_every_stored_record_decodes_and_reencodes() -> None:
    records = 0
    via_encode_message = 0
    for frame_id, body in _stored_bodies():
        msgs = decode_messages(body, decompress=False)
        pos = 0
        for m in msgs:
            record = body[pos : pos + m.store_size]
            pos += m.store_size
            records += 1
            assert record[4:8] == MESSAGE_MAGIC_CODE.to_bytes(4, "big", signed=True)
            assert m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF, frame_id
            props = _raw_properties(record)
            topic_b = m.topic.encode()
            assert m.store_size == record_size(len(topic_b), len(m.body), len(props)), frame_id
            rebuilt = encode_stored_record(
                topic=m.topic,
                queue_id=m.queue_id,
                flag=m.flag,
                queue_offset=m.queue_offset,
                physical_offset=m.commit_log_offset,
                sys_flag=m.sys_flag,
                born_timestamp=m.born_timestamp,
                born_host=socket_address_to_bytes(m.born_host),
                store_timestamp=m.store_timestamp,
                store_host=socket_address_to_bytes(m.store_host),
                reconsume_times=m.reconsume_times,
                prepared_transaction_offset=m.prepared_transaction_offset,
                body=m.body,
                properties=props,
            )
            assert isinstance(rebuilt, bytearray)
            assert rebuilt == record, frame_id
            assert int.from_bytes(record[store_timestamp_pos(m.sys_flag) :][:8], "big") == (
                m.store_timestamp
            )
            # A property string with a repeated key (batch members, 5.5) cannot survive a
            # trip through the map; every other record re-encodes from the MessageExt.
            if encode_properties(decode_properties(props.decode())).encode() == props:
                assert encode_message(m) == record, frame_id
                via_encode_message += 1
        assert pos == len(body), frame_id
        # The checking decoder agrees on every record.
        pos = 0
        while pos < len(body):
            _, pos = decode_message(body, pos, check_crc=True, read_body=False)
    assert records == 306
    assert via_encode_message >= 300


def test_layout_constants_match_a_record() -> None:
    body = body_bytes(374)
    assert int.from_bytes(body[QUEUE_OFFSET_POS:][:8], "big") == 0
    assert int.from_bytes(body[PHYSICAL_OFFSET_POS:][:8], "big") == 20380
    assert int.from_bytes(body[BORN_TIMESTAMP_POS:][:8], "big") == 1795318960714
    assert socket_address_from_bytes(body[BORN_HOST_POS : BORN_HOST_POS + 8]) == "127.0.0.1:50192"
    assert store_timestamp_pos(0) == 56
    assert store_timestamp_pos(MessageSysFlag.BORNHOST_V6_FLAG) == 68
    assert MESSAGE_MAGIC_CODE == -626843481 and MESSAGE_MAGIC_CODE_V2 == -626843477
    assert BLANK_MAGIC_CODE == -875286124
    assert record_size(0, 0, 0) == 91
    assert record_size(1, 2, 3, born_v6=True, store_v6=True) == 91 + 6 + 24


def test_decode_message_read_body_false_skips_body() -> None:
    body = body_bytes(60)
    m, end = decode_message(body, 252, read_body=False)
    assert end == 504 and m.body == b"" and m.queue_offset == 1
    assert m.topic == "TestTopic" and UNIQ in m.properties


def test_decode_accepts_memoryview_and_bytearray() -> None:
    body = body_bytes(60)
    expect = [encode_message(m) for m in decode_messages(body)]
    for buf in (bytearray(body), memoryview(body)):
        assert [encode_message(m) for m in decode_messages(buf)] == expect


def test_check_transaction_state_body() -> None:
    f = frame(823)
    ext = f["header"]["extFields"]
    (m,) = decode_messages(body_bytes(823))
    assert m.topic == "VecTxTopic" and m.queue_id == 3
    assert m.commit_log_offset == int(ext["commitLogOffset"]) == 27513
    assert m.queue_offset == int(ext["tranStateTableOffset"])
    assert m.offset_msg_id == ext["offsetMsgId"]
    assert m.msg_id == ext["msgId"] == ext["transactionId"] == m.properties[UNIQ]
    assert decode_offset_msg_id(ext["offsetMsgId"]) == (BROKER, 27513)
    assert m.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert m.wait_store_msg_ok is False


def test_batch_members_stored_with_batch_properties() -> None:
    msgs = decode_messages(body_bytes(503))
    assert [m.queue_offset for m in msgs] == [0, 1, 2]
    members = decode_batch(body_bytes(466))
    for stored, member in zip(msgs, members, strict=True):
        assert stored.body == member.body
        assert stored.properties == {**member.properties, "CLUSTER": "DefaultCluster"}


# --- send requests and responses -----------------------------------------------------


def _sends() -> Iterator[tuple[dict, dict]]:
    for f in load_frames():
        if f["code"] in (310, 320, 325) and not f.get("is_response") and "response_id" in f:
            yield f, frame(f["response_id"])


def test_send_header_properties_decode() -> None:
    count = 0
    for req in load_frames():
        if req["code"] not in (310, 320, 325) or req.get("is_response"):
            continue
        i = req["header"]["extFields"]["i"]
        props = decode_properties(i)
        assert encode_properties(props) == i  # no repeated keys, no trailing separator
        assert not i.endswith("\x02")
        if req["code"] != 320:
            assert UNIQ in props
        count += 1
    assert count == 39
    props = decode_properties(frame(334)["header"]["extFields"]["i"])
    assert props["unicode"] == "héllo-世界"
    assert props["KEYS"] == "vkey1 vkey2" and props["TAGS"] == "TagA"
    assert props["WAIT"] == "true"


def test_offset_ids_equal_send_response_msg_ids() -> None:
    by_uniq: dict[str, list[MessageExt]] = {}
    for _, body in _stored_bodies():
        for m in decode_messages(body, decompress=False):
            if UNIQ in m.properties:
                by_uniq.setdefault(m.properties[UNIQ], []).append(m)
    paired = 0
    for req, resp in _sends():
        ext = req["header"]["extFields"]
        rext = resp["header"].get("extFields") or {}
        if resp["code"] != 0 or "msgId" not in rext:
            continue
        ids = rext["msgId"].split(",")
        if req["code"] == 320:
            uniqs = [m.properties[UNIQ] for m in decode_batch(body_bytes(req["id"]))]
        else:
            uniqs = [decode_properties(ext["i"])[UNIQ]]
        assert len(ids) == len(uniqs)
        for n, (uniq, offset_id) in enumerate(zip(uniqs, ids, strict=True)):
            assert decode_offset_msg_id(offset_id)[0] == BROKER
            for m in by_uniq.get(uniq, []):
                # A delayed message's response names its parked SCHEDULE_TOPIC_XXXX record;
                # the record later delivered (REAL_TOPIC set) is a different one (6.5).
                if (
                    "REAL_TOPIC" not in m.properties
                    and m.topic == ext["b"]
                    and m.queue_id == int(rext["queueId"])
                    and m.queue_offset == int(rext["queueOffset"]) + n
                ):
                    assert m.offset_msg_id == offset_id
                    assert decode_offset_msg_id(offset_id)[1] == m.commit_log_offset
                    paired += 1
    assert paired >= 25


# --- batch ---------------------------------------------------------------------------


def test_batch_frame_466() -> None:
    body = body_bytes(466)
    msgs = decode_batch(body, topic="VecBatchTopic")
    assert len(msgs) == 3
    for n, m in enumerate(msgs):
        assert m.topic == "VecBatchTopic" and m.flag == 0
        assert m.body == f"batch body {n} 1795318975887".encode()
        assert m.properties == {
            "KEYS": f"batchkey-{n}",
            "idx": str(n),
            "UNIQ_KEY": f"FD0000000000000000000000000000024E7C5FFD2B276CF1A6E4000{n}",
            "WAIT": "true",
            "TAGS": "BatchTag",
            "vecRun": "1795318975887",
        }
        assert body[180 * n : 180 * n + 4] == (180).to_bytes(4, "big")
    assert encode_batch(msgs) == body
    assert frame(466)["header"]["extFields"]["m"] == "true"


def test_batch_garbage_raises_protocol_error() -> None:
    body = body_bytes(466)
    with pytest.raises(MessageDecodeError):
        decode_batch(body[:-1])
    with pytest.raises(MessageDecodeError):
        decode_batch(body + b"\x00")
    bad = bytearray(body)
    bad[3] = 0xB3  # TOTALSIZE one short of the fields
    with pytest.raises(MessageDecodeError):
        decode_batch(bytes(bad))


# --- properties ----------------------------------------------------------------------


def test_properties_java_rules() -> None:
    assert encode_properties({"a": "1", "b": None, "c": "3"}) == "a\x011\x02c\x013"  # type: ignore[dict-item]
    assert encode_properties({}) == ""
    assert decode_properties("") == {}
    # trailing separator of old clients, empty values, empty keys, short segments
    assert decode_properties("a\x011\x02") == {"a": "1"}
    assert decode_properties("a\x01\x02\x01b\x02k\x01v") == {"k": "v"}
    assert decode_properties("ab\x02a\x01") == {}
    assert decode_properties("k\x01v\x01w") == {"k": "v\x01w"}  # split at the first 0x01
    assert decode_properties("k\x011\x02k\x012") == {"k": "2"}  # last value wins


_KEY = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1)
_VAL = _KEY
_PROPS = st.dictionaries(_KEY, _VAL, max_size=8)


@given(_PROPS)
def test_properties_round_trip(props: dict[str, str]) -> None:
    s = encode_properties(props)
    assert not s.endswith("\x02")
    assert decode_properties(s) == props


# --- records: property tests ---------------------------------------------------------

_IPV4 = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)).map(
    lambda t: ".".join(map(str, t))
)
_IPV6 = st.binary(min_size=16, max_size=16).map(lambda b: socket_address_from_bytes(b + b"\0\0\0\0")[:-2])
_PORT = st.integers(0, 65535)
_HOST = st.one_of(
    st.tuples(_IPV4, _PORT).map(lambda t: f"{t[0]}:{t[1]}"),
    st.tuples(_IPV6, _PORT).map(lambda t: f"{t[0]}:{t[1]}"),
)
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_TOPIC = st.text(
    st.characters(codec="utf-8"), min_size=1, max_size=40
).filter(lambda t: len(t.encode()) <= 127)


@st.composite
def _message_ext(draw: st.DrawFn) -> tuple[MessageExt, bool]:
    compressed = draw(st.booleans())
    born = draw(_HOST)
    store = draw(_HOST)
    sys_flag = draw(st.sampled_from([0, 4, 8, 12])) | draw(st.sampled_from([0, 2]))
    if compressed:
        sys_flag |= MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB
    if len(socket_address_to_bytes(born)) == 20:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(socket_address_to_bytes(store)) == 20:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    m = MessageExt(
        draw(_TOPIC),
        draw(st.binary(max_size=300)),
        draw(_I32),
        draw(_PROPS),
        queue_id=draw(_I32),
        queue_offset=draw(_I64),
        sys_flag=sys_flag,
        born_timestamp=draw(_I64),
        born_host=born,
        store_timestamp=draw(_I64),
        store_host=store,
        commit_log_offset=draw(_I64),
        reconsume_times=draw(_I32),
        prepared_transaction_offset=draw(_I64),
    )
    return m, compressed


@given(_message_ext())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_record_round_trip(case: tuple[MessageExt, bool]) -> None:
    m, compressed = case
    stored_body = compress_body(m.body) if compressed else m.body
    born = socket_address_to_bytes(m.born_host)
    store = socket_address_to_bytes(m.store_host)
    props = encode_properties(m.properties)
    record = encode_stored_record(
        topic=m.topic, queue_id=m.queue_id, flag=m.flag, queue_offset=m.queue_offset,
        physical_offset=m.commit_log_offset, sys_flag=m.sys_flag,
        born_timestamp=m.born_timestamp, born_host=born, store_timestamp=m.store_timestamp,
        store_host=store, reconsume_times=m.reconsume_times,
        prepared_transaction_offset=m.prepared_transaction_offset, body=stored_body,
        properties=props,
    )
    assert len(record) == record_size(
        len(m.topic.encode()), len(stored_body), len(props.encode()), len(born) == 20,
        len(store) == 20,
    )
    got, end = decode_message(bytes(record), check_crc=True)
    assert end == len(record) == got.store_size
    assert got.body == m.body
    assert got.body_crc == zlib.crc32(stored_body) & 0x7FFFFFFF
    for name in (
        "topic", "flag", "properties", "queue_id", "queue_offset", "sys_flag", "born_timestamp",
        "store_timestamp", "commit_log_offset", "reconsume_times", "prepared_transaction_offset",
    ):
        assert getattr(got, name) == getattr(m, name), name
    assert socket_address_to_bytes(got.born_host) == born
    assert socket_address_to_bytes(got.store_host) == store
    assert got.offset_msg_id == create_offset_msg_id(store, m.commit_log_offset)
    assert got.msg_id == m.properties.get(UNIQ, got.offset_msg_id)
    assert len(got.offset_msg_id) == (56 if len(store) == 20 else 32)
    assert decode_offset_msg_id(got.offset_msg_id) == (got.store_host, m.commit_log_offset)
    assert encode_message(got, compress=compressed) == record
    raw, _ = decode_message(record, decompress=False)
    assert raw.body == stored_body
    assert encode_message(raw) == record
    # two records back to back
    assert len(decode_messages(bytes(record) * 2)) == 2


@given(st.lists(st.tuples(st.binary(max_size=100), _I32, _PROPS), max_size=5))
def test_batch_round_trip(items: list[tuple[bytes, int, dict[str, str]]]) -> None:
    msgs = [Message._from_wire("T", body, flag, props) for body, flag, props in items]
    encoded = encode_batch(msgs)
    back = decode_batch(encoded, topic="T")
    assert [(m.body, m.flag, m.properties) for m in back] == items
    assert encode_batch(back) == encoded


_VALID = body_bytes(60) + body_bytes(374) + body_bytes(439)


@given(st.binary(max_size=400))
def test_decode_messages_random_bytes_only_protocol_error(data: bytes) -> None:
    try:
        decode_messages(data)
    except ProtocolError:
        pass


@given(
    st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, len(_VALID)),
)
@settings(max_examples=300)
def test_decode_messages_mutated_bytes_only_protocol_error(
    flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_VALID)
    for index, value in flips:
        data[index] = value
    for buf in (bytes(data), bytes(data[:cut]), bytes(data) + bytes(data[:cut])):
        try:
            for m in decode_messages(buf):
                assert m.store_size >= 91
        except ProtocolError:
            pass


@given(st.binary(max_size=300))
def test_decode_batch_random_bytes_only_protocol_error(data: bytes) -> None:
    try:
        decode_batch(data)
    except ProtocolError:
        pass


@given(st.binary(min_size=1, max_size=200), st.integers(0, 199))
def test_decode_batch_truncated_raises(data: bytes, cut: int) -> None:
    encoded = encode_batch([Message._from_wire("", data, 0, {"k": "v"})])
    assume(cut < len(encoded))
    with pytest.raises(ProtocolError):
        decode_batch(encoded[:cut] if cut else encoded + b"\x00")


# --- decoder rejects ------------------------------------------------------------------


def test_decode_message_rejects() -> None:
    body = body_bytes(374)
    with pytest.raises(MessageDecodeError, match="truncated"):
        decode_message(body[:3])
    with pytest.raises(MessageDecodeError):
        decode_message(body[:-1])
    blank = bytearray(body)
    blank[4:8] = BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)
    with pytest.raises(MessageDecodeError, match="magic"):
        decode_message(bytes(blank))
    bad_crc = bytearray(body)
    bad_crc[88] ^= 1
    decode_message(bytes(bad_crc))  # as Java: the client does not verify BODYCRC
    with pytest.raises(MessageDecodeError, match="BODYCRC"):
        decode_message(bytes(bad_crc), check_crc=True)
    longer = bytearray(body + b"\0")
    longer[0:4] = (311).to_bytes(4, "big")
    with pytest.raises(MessageDecodeError, match="TOTALSIZE"):
        decode_message(bytes(longer))
    corrupt = bytearray(body_bytes(439))
    corrupt[100] ^= 0xFF
    with pytest.raises(MessageDecodeError):
        decode_message(bytes(corrupt))
    decode_message(bytes(corrupt), decompress=False)


def test_v2_record_two_byte_topic_length() -> None:
    body = body_bytes(374)
    topic_pos = 88 + 31
    v2 = bytearray(body[:topic_pos]) + b"\x00" + body[topic_pos:]
    v2[0:4] = (len(v2)).to_bytes(4, "big")
    v2[4:8] = MESSAGE_MAGIC_CODE_V2.to_bytes(4, "big", signed=True)
    m, end = decode_message(bytes(v2))
    assert end == 311 and m.topic == "VecPropsTopic" and m.store_size == 311
    assert m.properties == decode_messages(body)[0].properties


# --- encoder limits ------------------------------------------------------------------


def _record_args(**over: object) -> dict[str, object]:
    args: dict[str, object] = dict(
        topic="T", queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0,
        born_timestamp=0, born_host=socket_address_to_bytes("127.0.0.1:1"), store_timestamp=0,
        store_host=socket_address_to_bytes(BROKER), reconsume_times=0,
        prepared_transaction_offset=0, body=b"x", properties="",
    )
    args.update(over)
    return args


def test_encode_stored_record_limits() -> None:
    encode_stored_record(**_record_args(topic="t" * 127, properties="p" * 32767))  # type: ignore[arg-type]
    with pytest.raises(MessageTooLargeError):
        encode_stored_record(**_record_args(topic="t" * 128))  # type: ignore[arg-type]
    with pytest.raises(MessageTooLargeError):
        encode_stored_record(**_record_args(topic="é" * 64))  # type: ignore[arg-type]
    with pytest.raises(MessageTooLargeError):
        encode_stored_record(**_record_args(properties=b"p" * 32768))  # type: ignore[arg-type]
    v6 = socket_address_to_bytes("[::1]:10911")
    with pytest.raises(MessageEncodeError, match="V6"):
        encode_stored_record(**_record_args(store_host=v6))  # type: ignore[arg-type]
    rec = encode_stored_record(
        **_record_args(store_host=v6, sys_flag=MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)  # type: ignore[arg-type]
    )
    assert decode_message(rec)[0].store_host == "::1:10911"
    with pytest.raises(MessageEncodeError, match="8 or 20"):
        encode_stored_record(**_record_args(born_host=b"\0" * 7))  # type: ignore[arg-type]
    with pytest.raises(MessageEncodeError, match="range"):
        encode_stored_record(**_record_args(queue_id=2**31))  # type: ignore[arg-type]
    with pytest.raises(MessageEncodeError):
        encode_stored_record(**_record_args(properties="\ud800"))  # type: ignore[arg-type]
    rec = encode_stored_record(**_record_args(body_crc=7))  # type: ignore[arg-type]
    assert decode_message(rec)[0].body_crc == 7
    for exc in (MessageTooLargeError, MessageEncodeError):
        assert issubclass(exc, RocketMQError) and issubclass(exc, ValueError)
    with pytest.raises(MessageTooLargeError):
        encode_batch([Message._from_wire("T", b"", 0, {"k": "v" * 32766})])


# --- hosts and ids ---------------------------------------------------------------------


def test_socket_addresses() -> None:
    assert socket_address_to_bytes("127.0.0.1:10911") == bytes.fromhex("7f00000100002a9f")
    assert socket_address_from_bytes(bytes.fromhex("7f00000100002a9f")) == BROKER
    v6 = socket_address_to_bytes("[fd00::2]:80")
    assert v6 == bytes.fromhex("fd000000000000000000000000000002") + (80).to_bytes(4, "big")
    assert socket_address_from_bytes(v6) == "fd00::2:80"
    assert socket_address_to_bytes("fd00::2:80") == v6
    for bad in ("localhost:1", "1.2.3.4", "1.2.3.4:x", "1.2.3:5"):
        with pytest.raises(MessageEncodeError):
            socket_address_to_bytes(bad)
    with pytest.raises(MessageDecodeError):
        socket_address_from_bytes(b"\0" * 9)


def test_offset_msg_ids() -> None:
    host = socket_address_to_bytes(BROKER)
    assert create_offset_msg_id(host, 20380) == "7F00000100002A9F0000000000004F9C"
    assert decode_offset_msg_id("7F00000100002A9F0000000000004F9C") == (BROKER, 20380)
    # the id mqadmin queried, and the offset it then asked the broker for (frame 1024)
    assert frame(1024)["header"]["extFields"]["offset"] == "20380"
    v6 = socket_address_to_bytes("[::1]:10911")
    mid = create_offset_msg_id(v6, 5)
    assert len(mid) == 56 and decode_offset_msg_id(mid) == ("::1:10911", 5)
    for bad in ("", "7F00", "Z" * 32, "0" * 33):
        with pytest.raises(MessageDecodeError):
            decode_offset_msg_id(bad)


@pytest.fixture
def utc() -> Iterator[None]:
    """Local time = UTC, the capture host's zone (docs/PROTOCOL.md 5.4)."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_uniq_id_reproduces_captured_id(utc: None) -> None:
    ext = frame(334)["header"]["extFields"]
    captured = decode_properties(ext["i"])[UNIQ]
    assert captured == "FD0000000000000000000000000000024DC35FFD2B276CF16A4A0000"
    born = int(ext["g"])
    ip = bytes.fromhex("FD000000000000000000000000000002")
    candidates = set()
    for lag in range(5):
        gen = UniqIdGenerator(ip, pid=0x4DC3, loader_hash=0x5FFD2B27)
        candidates.add(gen.create(now_ms=born - lag))
    assert captured in candidates
    created = uniq_id_timestamp(captured, now_ms=born + 1)
    assert born - 4 <= created <= born
    # read early in the following month, the id still points at its own month
    assert uniq_id_timestamp(captured, now_ms=born + 15 * 86_400_000) == created


def test_uniq_id_format_and_counter() -> None:
    gen = UniqIdGenerator(bytes([10, 0, 0, 1]), pid=0x12345, loader_hash=-1)
    assert gen.prefix == "0A0000012345FFFFFFFF"
    ids = [gen.create(now_ms=1795318960714) for _ in range(3)]
    assert all(len(i) == 32 and i.startswith(gen.prefix) for i in ids)
    assert [int(i[-4:], 16) for i in ids] == [0, 1, 2]
    assert len({i[:-4] for i in ids}) == 1
    v6 = UniqIdGenerator(bytes(16)).create()
    assert len(v6) == 56
    a, b = create_uniq_id(), create_uniq_id()
    assert len(a) == len(b) == 32 and a[:20] == b[:20]
    assert (int(b[-4:], 16) - int(a[-4:], 16)) % 65536 == 1
    assert a == a.upper()
    with pytest.raises(MessageEncodeError):
        UniqIdGenerator(b"\0" * 5)


def test_uniq_id_counter_wraps_and_month_rolls(utc: None) -> None:
    gen = UniqIdGenerator(bytes(4), pid=0, loader_hash=0)
    first_of_month = 1793491200000  # 2026-11-01T00:00:00Z
    assert gen.create(now_ms=first_of_month)[-12:] == "00000000" + "0000"
    assert gen.create(now_ms=first_of_month + 1)[-12:-4] == "00000001"
    # 29 days in: past 2**31 ms, written as Java's int cast writes it
    late = first_of_month + 29 * 86_400_000
    assert int(gen.create(now_ms=late)[-12:-4], 16) == 29 * 86_400_000
    # next month restarts the span
    december = 1796083200000  # 2026-12-01T00:00:00Z
    assert gen.create(now_ms=december + 5)[-12:-4] == "00000005"
    for _ in range(65536):
        gen.create(now_ms=december)
    assert gen.create(now_ms=december)[-4:] == "0004"


# --- Message API -----------------------------------------------------------------------


def test_message_constructor_like_java() -> None:
    m = Message("T", b"b", "TagA", ["k1", "k2"], 3)
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}
    assert m.tags == "TagA" and m.keys == "k1 k2" and m.flag == 3
    assert m.wait_store_msg_ok is True
    m2 = Message("T", b"", tags="", keys="", wait_store_msg_ok=False, properties={"x": "1"})
    assert m2.properties == {"x": "1", "WAIT": "false"}
    assert m2.wait_store_msg_ok is False
    m2.clear_property("WAIT")
    assert m2.wait_store_msg_ok is True
    m2.keys = ("a", "b")
    assert m2.keys == "a b"
    m2.keys = "c"
    m2.tags = "t"
    assert m2.get_property("KEYS") == "c" and m2.get_property("TAGS") == "t"
    assert m2.delay_time_level == 0
    m2.delay_time_level = 3
    assert m2.properties["DELAY"] == "3" and m2.delay_time_level == 3
    m2.buyer_id = "buyer"
    assert m2.buyer_id == "buyer"
    m2.wait_store_msg_ok = True
    assert m2.properties["WAIT"] == "true"
    m2.transaction_id = "tx"
    assert "transaction_id='tx'" in repr(m2) and "topic='T'" in repr(m2)
    assert not hasattr(m2, "__dict__")
    assert not hasattr(MessageExt(), "__dict__")
    assert "..." in repr(Message("T", b"x" * 100))


def test_put_user_property_rules() -> None:
    m = Message("T", b"")
    m.put_user_property("color", "red")
    assert m.get_user_property("color") == "red"
    for key in ("TAGS", "UNIQ_KEY", "WAIT", "CLUSTER"):
        with pytest.raises(MQClientError, match="used by system"):
            m.put_user_property(key, "v")
    for name, value in (("", "v"), ("k", ""), ("  ", "v"), ("k", " \t")):
        with pytest.raises(MQClientError, match="blank"):
            m.put_user_property(name, value)
    m.put_property("TAGS", "x")  # the internal setter takes any key
    assert m.tags == "x"


def test_message_ext_ids() -> None:
    m = MessageExt("T", store_host=BROKER, commit_log_offset=20380)
    assert m.offset_msg_id == "7F00000100002A9F0000000000004F9C"
    assert m.properties == {}
    assert m.store_host_bytes == socket_address_to_bytes(BROKER)
    assert m.born_host_bytes == socket_address_to_bytes("127.0.0.1:0")
    assert "MessageExt(" in repr(m)


# --- tags, compression -----------------------------------------------------------------


def test_tags_code() -> None:
    assert tags_to_tags_code(None) == 0
    assert tags_to_tags_code("") == 0
    assert tags_to_tags_code("TagA") == java_string_hash("TagA") == 2598919
    assert tags_to_tags_code("héllo-世界") == java_string_hash("héllo-世界")


def test_compression_types() -> None:
    raw = b"abc" * 1000
    z = compress_body(raw)
    assert decompress_body(z, 0) == z  # not flagged: untouched
    assert decompress_body(z, MessageSysFlag.COMPRESSED_FLAG) == raw  # type 0 = zlib (pre-4.9.4)
    assert decompress_body(z, 0x301) == raw
    with pytest.raises(UnsupportedCompressionError, match="LZ4"):
        decompress_body(z, 0x101)
    with pytest.raises(UnsupportedCompressionError, match="ZSTD"):
        decompress_body(z, 0x201)
    with pytest.raises(MessageDecodeError, match="unknown compression type"):
        decompress_body(z, 0x401)
    with pytest.raises(MessageDecodeError):
        decompress_body(b"not zlib", 0x301)
    assert issubclass(UnsupportedCompressionError, ProtocolError)
    with pytest.raises(MessageEncodeError):
        encode_message(MessageExt("T", raw, sys_flag=0x101), compress=True)


def test_frames_where_covers_all_stored_bodies() -> None:
    # The bodies this file relies on are the ones the vector index names.
    ids = {f["id"] for f in frames_where(body_format="stored-messages")}
    assert {60, 374, 439, 503, 823} <= ids


def test_a_unique_key_is_not_an_offset_msg_id() -> None:
    # Same length as an IPv4 offset id, but its "port" is out of range: decodeMessageId's
    # InetSocketAddress refuses it, and mqadmin queryMsgById then looks it up as a key.
    with pytest.raises(MessageDecodeError, match="port 1367545695"):
        decode_offset_msg_id("7F0000015183175F320076E550520000")
    assert decode_offset_msg_id("7F00000100002A9F0000000000004F9C") == ("127.0.0.1:10911", 20380)


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("ab\x01\x02é "), max_size=24))
@example("A\x01\x02AA\x01A\x02A\x01A")  # a dropped "A\x01" first: A's place is after AA
@example("\x01a\x02b\x01c\x02a\x01d")
def test_decode_properties_fast_path_is_the_loop(s: str) -> None:
    """The dict(split) fast path gives the segment loop's map, order included."""
    from aiorocketmq.protocol.message import _decode_properties_loop

    fast = decode_properties(s)
    assert fast == _decode_properties_loop(s)
    assert list(fast) == list(_decode_properties_loop(s))


@given(st.integers(0, 70_000), st.integers(1_600_000_000_000, 1_900_000_000_000),
       st.integers(0, 0xFFFF))
@settings(max_examples=60, deadline=None)
def test_uniq_create_many_is_create_repeated(n: int, now_ms: int, skip: int) -> None:
    a = UniqIdGenerator(bytes([10, 0, 0, 1]), pid=7, loader_hash=9)
    b = UniqIdGenerator(bytes([10, 0, 0, 1]), pid=7, loader_hash=9)
    for _ in range(skip % 97):  # counters at the same place, not at 0
        a.create(now_ms)
        b.create(now_ms)
    assert a.create_many(n, now_ms) == [b.create(now_ms) for _ in range(n)]
    assert a.create(now_ms) == b.create(now_ms)
