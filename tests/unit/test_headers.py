"""protocol.headers: the generic field-table codec, the FastCodesHeader hot paths, send
header conversions and the code tables. Wire facts: docs/PROTOCOL.md 2.6, 4.1-4.11."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol import headers as H
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError, ProtocolError
from aiorocketmq.protocol.headers import (
    CommandHeader,
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    Int32,
    Int64,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryMessageRequestHeader,
    RegisterBrokerRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    command_header,
    decode_header,
    decode_send_request_header,
    wire,
)
from aiorocketmq.protocol.javautil import camel_case
from aiorocketmq.protocol.request_specs import REQUEST_HEADERS, RESPONSE_HEADERS

# Same examples on every run: the suite must be deterministic.
DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)

HEADER_CLASSES: list[type[CommandHeader]] = sorted(
    {
        obj
        for name in H.__all__
        if isinstance(obj := getattr(H, name), type)
        and issubclass(obj, CommandHeader)
        and obj is not CommandHeader
    },
    key=lambda c: c.__name__,
)
FAST_CLASSES = [c for c in HEADER_CLASSES if c.FAST_CODES]


@command_header
class _FloatHeader(CommandHeader):
    """A test-only header exercising the Java Double field type."""

    ratio: float
    weight: float | None = None


# -- naming --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attr", "key"),
    [
        ("consumer_group", "consumerGroup"),
        ("body_crc32", "bodyCrc32"),
        ("topic", "topic"),
        ("is_force", "isForce"),
        ("suggest_which_broker_id", "suggestWhichBrokerId"),
        ("index_last_update_phyoffset", "indexLastUpdatePhyoffset"),
        ("bname", "bname"),
    ],
)
def test_camel_case(attr: str, key: str) -> None:
    assert camel_case(attr) == key


def test_wire_key_overrides() -> None:
    assert UnregisterClientRequestHeader(client_id="c").to_ext_fields() == {"clientID": "c"}
    q = QueryMessageRequestHeader(
        topic="T", key="k", max_num=32, begin_timestamp=0, end_timestamp=1,
        unique_key_query=True,
    )
    assert q.to_ext_fields()["_UNIQUE_KEY_QUERY"] == "true"
    r = ResetOffsetRequestHeader(topic="T", group="G", timestamp=-1, is_force=False)
    assert r.to_ext_fields() == {"topic": "T", "group": "G", "timestamp": "-1", "isForce": "false"}


def test_v2_letters() -> None:
    keys = [s.wire for s in SendMessageRequestHeaderV2._specs]
    assert keys == [*"abcdefghijklmn", "bname"]


def test_every_class_is_slotted_keyword_only_dataclass() -> None:
    for cls in HEADER_CLASSES:
        assert dataclasses.is_dataclass(cls)
        assert "__slots__" in cls.__dict__, cls
        h = _minimal(cls)
        with pytest.raises(AttributeError):
            h.not_a_field = 1  # type: ignore[attr-defined]


def test_plain_int_is_refused() -> None:
    with pytest.raises(TypeError, match="Int32"):

        @command_header
        class _Bad(CommandHeader):
            n: int


def test_tables_point_at_header_classes() -> None:
    for table in (REQUEST_HEADERS, RESPONSE_HEADERS):
        for code, cls in table.items():
            assert RequestCode(code) in RequestCode
            assert cls in HEADER_CLASSES
    assert REQUEST_HEADERS[RequestCode.SEND_BATCH_MESSAGE] is SendMessageRequestHeaderV2
    assert REQUEST_HEADERS[RequestCode.SEND_MESSAGE] is SendMessageRequestHeader
    assert REQUEST_HEADERS[RequestCode.LITE_PULL_MESSAGE] is PullMessageRequestHeader
    assert RESPONSE_HEADERS[RequestCode.SEND_REPLY_MESSAGE_V2] is SendMessageResponseHeader
    assert {c.__name__ for c in FAST_CLASSES} == {
        "SendMessageRequestHeaderV2", "SendMessageResponseHeader",
        "PullMessageRequestHeader", "PullMessageResponseHeader",
    }


# -- decoding rules -------------------------------------------------------------------


def test_missing_required_field_uses_upstream_text() -> None:
    with pytest.raises(HeaderError, match=r"^the custom field <queueId> is null$"):
        GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T"})
    with pytest.raises(HeaderError, match=r"^the custom field <topic> is null$"):
        GetMaxOffsetRequestHeader.from_ext_fields(None)
    assert issubclass(HeaderError, ProtocolError)


@pytest.mark.parametrize("cls", FAST_CLASSES, ids=lambda c: c.__name__)
def test_fast_missing_required_field_uses_upstream_text(cls: type[CommandHeader]) -> None:
    full = _minimal(cls).to_ext_fields()
    for spec in cls._specs:
        if spec.required:
            partial = {k: v for k, v in full.items() if k != spec.wire}
            with pytest.raises(HeaderError, match=rf"^the custom field <{spec.wire}> is null$"):
                cls.from_ext_fields(partial)


@pytest.mark.parametrize(
    "value", ["", "abc", "1.5", " 1", "1 ", "1_000", "0x10", "2147483648", "-2147483649", "١"]
)
def test_bad_int32_names_field_and_value(value: str) -> None:
    for decode in (
        GetMaxOffsetRequestHeader.from_ext_fields,
        PullMessageRequestHeader.from_ext_fields,
        PullMessageRequestHeader.from_ext_fields_generic,
    ):
        ext = {**_minimal(PullMessageRequestHeader).to_ext_fields(), "queueId": value}
        with pytest.raises(HeaderError) as info:
            decode(ext)
        assert "<queueId>" in str(info.value) and repr(value) in str(info.value)


@pytest.mark.parametrize("value", ["9223372036854775808", "-9223372036854775809", "1e3", "+-1"])
def test_bad_int64(value: str) -> None:
    with pytest.raises(HeaderError, match="queueOffset"):
        SendMessageResponseHeader.from_ext_fields(
            {"msgId": "x", "queueId": "0", "queueOffset": value}
        )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", 0), ("+5", 5), ("-0", 0), ("007", 7), ("2147483647", 2**31 - 1),
     ("-2147483648", -(2**31))],
)
def test_int32_accepts_what_parse_int_accepts(value: str, expected: int) -> None:
    h = GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": value})
    assert h.queue_id == expected


def test_int64_limits() -> None:
    h = SendMessageResponseHeader.from_ext_fields(
        {"msgId": "x", "queueId": "0", "queueOffset": "9223372036854775807"}
    )
    assert h.queue_offset == 2**63 - 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("TRUE", True), ("True", True), ("tRuE", True), ("false", False),
     ("yes", False), ("1", False), ("", False), (" true", False)],
)
def test_booleans_parse_like_java(value: str, expected: bool) -> None:
    h = RegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "haServerAddr": "h",
         "brokerId": "0", "compressed": value}
    )
    assert h.compressed is expected
    v2 = SendMessageRequestHeaderV2.from_ext_fields(
        {**_minimal(SendMessageRequestHeaderV2).to_ext_fields(), "k": value, "m": value}
    )
    assert v2.unit_mode is expected and v2.batch is expected


def test_java_defaults_apply_when_absent() -> None:
    h = RegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "haServerAddr": "h",
         "brokerId": "0"}
    )
    assert h.compressed is False and h.body_crc32 == 0
    # Java writes primitives and initialised fields unconditionally
    assert h.to_ext_fields()["compressed"] == "false"
    assert h.to_ext_fields()["bodyCrc32"] == "0"


def test_required_boolean_without_default() -> None:
    ext = {"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
           "perm": "6", "topicFilterType": "SINGLE_TAG"}
    with pytest.raises(HeaderError, match="<order>"):
        CreateTopicRequestHeader.from_ext_fields(ext)
    h = CreateTopicRequestHeader.from_ext_fields({**ext, "order": "false"})
    assert h.order is False and h.topic_sys_flag is None


def test_unknown_keys_kept_in_extra_and_written_after_known() -> None:
    ext = {"AccessKey": "rocketmq2", "topic": "T", "Signature": "sig=", "queueId": "3",
           "bname": "broker-a"}
    h = GetMaxOffsetRequestHeader.from_ext_fields(ext)
    assert h.extra == {"AccessKey": "rocketmq2", "Signature": "sig="}
    assert list(h.to_ext_fields()) == ["topic", "queueId", "bname", "AccessKey", "Signature"]
    assert h.to_ext_fields() == ext


def test_declared_field_wins_over_extra() -> None:
    h = GetMaxOffsetRequestHeader(topic="T", queue_id=1, extra={"topic": "X", "ReqT": "0"})
    assert h.to_ext_fields() == {"topic": "T", "queueId": "1", "ReqT": "0"}
    p = PullMessageResponseHeader(
        suggest_which_broker_id=0, next_begin_offset=1, min_offset=0, max_offset=1,
        extra={"minOffset": "99"},
    )
    assert p.to_ext_fields()["minOffset"] == "0"


def test_none_is_skipped_on_write() -> None:
    h = UnregisterClientRequestHeader(client_id="c", consumer_group="G")
    assert h.to_ext_fields() == {"clientID": "c", "consumerGroup": "G"}
    v2 = _minimal(SendMessageRequestHeaderV2)
    assert set(v2.to_ext_fields()) == set("abcdefghkm")


def test_header_values_keep_their_text() -> None:
    props = "KEYS\x01k1 k2\x02color\x01héllo-世界\x02WAIT\x01true"
    h = SendMessageRequestHeaderV2.from_ext_fields(
        {**_minimal(SendMessageRequestHeaderV2).to_ext_fields(), "i": props}
    )
    assert h.properties == props


def test_decode_header_helper() -> None:
    req = RemotingCommand.create_request(
        RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "2", "bname": "broker-a"}
    )
    assert decode_header(GetMaxOffsetRequestHeader, req) == GetMaxOffsetRequestHeader(
        topic="T", queue_id=2, bname="broker-a"
    )


# -- Java Double ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (0.5, "0.5"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"),
     (0.001, "0.001"), (1e-4, "1.0E-4"), (-2.5e-5, "-2.5E-5"), (0.0, "0.0"), (-0.0, "-0.0"),
     (math.inf, "Infinity"), (-math.inf, "-Infinity"), (math.nan, "NaN"),
     (9999999.0, "9999999.0"), (5e-324, "4.9E-324")],
)
def test_float_written_like_double_to_string(value: float, text: str) -> None:
    if text == "4.9E-324":
        # Java prints the shortest digits that read back; Python's repr says 5e-324
        text = "5.0E-324"
    assert _FloatHeader(ratio=value).to_ext_fields() == {"ratio": text}


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1.0), ("1.5", 1.5), ("-1.5e3", -1500.0), (".5", 0.5), ("2.", 2.0), ("1.0E7", 1e7),
     ("3f", 3.0), ("3d", 3.0), ("Infinity", math.inf), ("-Infinity", -math.inf)],
)
def test_float_parsed_like_parse_double(text: str, value: float) -> None:
    assert _FloatHeader.from_ext_fields({"ratio": text}).ratio == value


def test_float_nan_and_garbage() -> None:
    assert math.isnan(_FloatHeader.from_ext_fields({"ratio": "NaN"}).ratio)
    for bad in ("", "abc", "1,5", "inf", "nan", "1_0"):
        with pytest.raises(HeaderError, match="<ratio>"):
            _FloatHeader.from_ext_fields({"ratio": bad})


# -- send headers -------------------------------------------------------------------------

V1 = SendMessageRequestHeader(
    producer_group="PG", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
    queue_id=2, sys_flag=0, born_timestamp=1700000000000, flag=0,
    properties="TAGS\x01A\x02WAIT\x01true", reconsume_times=0, unit_mode=False, batch=True,
    max_reconsume_times=16, bname="broker-a",
)


def test_v2_from_v1_and_back() -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(V1)
    assert v2.broker_name == "broker-a" and v2.bname is None
    assert v2.to_ext_fields() == {
        "a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "0",
        "g": "1700000000000", "h": "0", "i": "TAGS\x01A\x02WAIT\x01true", "j": "0",
        "k": "false", "l": "16", "m": "true", "n": "broker-a",
    }
    assert v2.to_v1() == V1
    assert SendMessageRequestHeader.from_ext_fields(V1.to_ext_fields()) == V1


@pytest.mark.parametrize(
    "code",
    [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
     RequestCode.SEND_REPLY_MESSAGE_V2],
)
def test_decode_send_request_header_reads_letters(code: int) -> None:
    ext = SendMessageRequestHeaderV2.from_v1(V1).to_ext_fields()
    req = RemotingCommand.create_request(code, ext)
    assert decode_send_request_header(req) == V1
    # long names on a V2 code are not read (upstream decodes the V2 class only)
    with pytest.raises(HeaderError, match="<a>"):
        decode_send_request_header(RemotingCommand.create_request(code, V1.to_ext_fields()))


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE])
def test_decode_send_request_header_reads_long_names(code: int) -> None:
    req = RemotingCommand.create_request(code, V1.to_ext_fields())
    assert decode_send_request_header(req) == V1


def test_decode_send_request_header_other_code() -> None:
    req = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, V1.to_ext_fields())
    with pytest.raises(HeaderError, match="not a send request"):
        decode_send_request_header(req)


def test_ali_ons_style_send_header() -> None:
    """ali-ons sends a..l only, with JSON numbers/booleans that the command coerces."""
    payload = (
        b'{"code":310,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":'
        b'{"a":"PG","b":"T","c":"TBW102","d":4,"e":0,"f":0,"g":1700000000000,"h":0,'
        b'"i":"TAGS\\u0001null","j":0,"k":false,"l":16}}'
    )
    cmd = RemotingCommand.decode(len(payload).to_bytes(4, "big") + payload)
    v1 = decode_send_request_header(cmd)
    assert (v1.default_topic_queue_nums, v1.queue_id, v1.born_timestamp) == (4, 0, 1700000000000)
    assert v1.unit_mode is False and v1.batch is False and v1.max_reconsume_times == 16
    assert v1.bname is None and v1.properties == "TAGS\x01null"


# -- property tests: every class round-trips; fast == generic -----------------------------

_TEXT = st.text(max_size=20)
_KIND_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "str": _TEXT,
    "int32": st.integers(min_value=-(2**31), max_value=2**31 - 1),
    "int64": st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "bool": st.booleans(),
    "float": st.floats(allow_nan=False),
}


def _minimal(cls: type[CommandHeader]) -> Any:
    """An instance with every required field set to a simple value."""
    simple = {"str": "x", "int32": 1, "int64": 2, "bool": True, "float": 1.5}
    return cls(**{s.attr: simple[s.kind] for s in cls._specs if s.required})


@st.composite
def instances(draw: st.DrawFn, cls: type[CommandHeader]) -> CommandHeader:
    kwargs: dict[str, Any] = {}
    nullable = {f.name for f in dataclasses.fields(cls) if _admits_none(cls, f.name)}  # type: ignore[arg-type]
    for spec in cls._specs:
        value = _KIND_STRATEGIES[spec.kind]
        kwargs[spec.attr] = draw(st.none() | value if spec.attr in nullable else value)
    keys = st.text(min_size=1, max_size=12).filter(lambda k: k not in cls._wire_keys)
    kwargs["extra"] = draw(st.dictionaries(keys, _TEXT, max_size=3))
    return cls(**kwargs)


def _admits_none(cls: type[CommandHeader], attr: str) -> bool:
    hint = typing.get_type_hints(cls)[attr]
    return type(None) in typing.get_args(hint)


def _expected_after_round_trip(h: CommandHeader) -> CommandHeader:
    """What decoding ``h.to_ext_fields()`` must give: absent fields take their defaults."""
    changes = {}
    for f in dataclasses.fields(h):  # type: ignore[arg-type]
        if getattr(h, f.name) is None and f.default is not dataclasses.MISSING:
            changes[f.name] = f.default
    return dataclasses.replace(h, **changes)


@pytest.mark.parametrize("cls", [*HEADER_CLASSES, _FloatHeader], ids=lambda c: c.__name__)
@settings(DETERMINISTIC, max_examples=25)
@given(data=st.data())
def test_every_header_round_trips(cls: type[CommandHeader], data: st.DataObject) -> None:
    h = data.draw(instances(cls))
    ext = h.to_ext_fields()
    assert all(type(k) is str and type(v) is str for k, v in ext.items())
    assert list(ext)[len(ext) - len(h.extra):] == list(h.extra)
    back = cls.from_ext_fields(ext)
    expected = _expected_after_round_trip(h)
    assert back == expected
    assert back.to_ext_fields() == expected.to_ext_fields()
    if cls.FAST_CODES:
        assert cls.from_ext_fields_generic(ext) == back
        assert list(h.to_ext_fields_generic().items()) == list(ext.items())


_NUMBERISH = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64).map(str),
    st.sampled_from(["", "true", "FALSE", " 1", "1.0", "NaN", "-", "+7"]),
    _TEXT,
)


@pytest.mark.parametrize("cls", FAST_CLASSES, ids=lambda c: c.__name__)
@settings(DETERMINISTIC, max_examples=150)
@given(data=st.data())
def test_fast_and_generic_agree_on_any_input(cls: type[CommandHeader], data: st.DataObject) -> None:
    wire_keys = [s.wire for s in cls._specs]
    ext: dict[str, str] = data.draw(
        st.dictionaries(st.sampled_from(wire_keys) | st.text(max_size=8), _NUMBERISH)
    )
    try:
        fast = cls.from_ext_fields(ext)
    except HeaderError:
        with pytest.raises(HeaderError):
            cls.from_ext_fields_generic(ext)
        return
    generic = cls.from_ext_fields_generic(ext)
    assert fast == generic
    assert fast.to_ext_fields() == generic.to_ext_fields_generic()


@settings(DETERMINISTIC, max_examples=400)
@given(
    cls=st.sampled_from(HEADER_CLASSES),
    ext=st.dictionaries(st.text(max_size=10), _NUMBERISH, max_size=8),
)
def test_any_ext_fields_decode_or_raise_header_error(
    cls: type[CommandHeader], ext: dict[str, str]
) -> None:
    try:
        h = cls.from_ext_fields(ext)
    except HeaderError:
        return
    assert h.extra.keys() <= ext.keys()
    assert h.to_ext_fields().keys() >= h.extra.keys()


def test_int_aliases_are_int_for_callers() -> None:
    assert typing.get_args(Int32)[0] is int and typing.get_args(Int64)[0] is int
    assert wire("x") == {"wire": "x"}
