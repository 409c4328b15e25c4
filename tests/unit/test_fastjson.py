"""protocol.fastjson: fastjson's map-key dialect, Java number formatting, and the error contract."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.protocol.fastjson import (
    MAX_DEPTH,
    JSONDecodeError,
    ObjectKey,
    dumps,
    java_double_str,
    loads,
)
from tests.vectors import frames_where, vector_file

JSON_BODIES = frames_where(body_format="json-text")


# -- reading -----------------------------------------------------------------------------


def test_bare_int_key_decodes_to_int() -> None:
    assert loads(b'{0:"127.0.0.1:10911",1:"b"}') == {0: "127.0.0.1:10911", 1: "b"}


def test_quoted_key_stays_str() -> None:
    assert loads(b'{"0":"a"}') == {"0": "a"}


def test_object_key_decodes_to_object_key() -> None:
    obj = loads(b'{{"topic":"T","brokerName":"b","queueId":0}:{"maxOffset":5}}')
    (key, value), = obj.items()
    assert isinstance(key, ObjectKey)
    assert key.as_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert key == ObjectKey({"brokerName": "b", "queueId": 0, "topic": "T"})
    assert hash(key) == hash(ObjectKey({"queueId": 0, "topic": "T", "brokerName": "b"}))
    assert key.get("queueId") == 0 and key.get("missing", 7) == 7
    assert value == {"maxOffset": 5}


def test_nested_and_odd_keys() -> None:
    obj = loads('{{"a":[1,{"x":2}]}:1, true:2, null:3, [1,2]:4, -5:5, 1.5:6}')
    assert obj[ObjectKey({"a": (1, ObjectKey({"x": 2}))})] == 1
    assert obj[True] == 2 and obj[None] == 3 and obj[(1, 2)] == 4
    assert obj[-5] == 5 and obj[1.5] == 6


def test_ref_is_returned_as_a_dict() -> None:
    assert loads(b'{"a":{"$ref":"$.b"},"b":{0:1}}') == {"a": {"$ref": "$.b"}, "b": {0: 1}}


def test_inputs_of_every_buffer_type() -> None:
    data = b'{0:"x"}'
    for form in (data, bytearray(data), memoryview(data), data.decode()):
        assert loads(form) == {0: "x"}


def test_invalid_utf8_is_replaced_like_java() -> None:
    assert loads(b'{"k":"\xff"}') == {"k": "\ufffd"}
    assert loads(b'{1:"\xff"}') == {1: "\ufffd"}


@pytest.mark.parametrize(
    "bad",
    [b"", b" ", b"{", b"[1,]", b'{"a":1,}', b"{0:}", b"{1 2}", b'"abc', b"01", b"-", b"NaN",
     b"Infinity", b"nul", b"{}}", b"[1 2]", b"{:1}", b'{"a" 1}', b"\xff", b"1" * 5000],
)
def test_malformed_input_raises_protocol_error(bad: bytes) -> None:
    with pytest.raises(JSONDecodeError):
        loads(bad)


@pytest.mark.parametrize("opener", ["[", "{0:", '{"a":'])
def test_nesting_is_bounded(opener: str) -> None:
    with pytest.raises(JSONDecodeError):
        loads(opener * (MAX_DEPTH + 50))
    with pytest.raises(JSONDecodeError):
        loads(opener * 100_000)


def test_nesting_within_the_bound_parses() -> None:
    deep = "{0:" * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1)
    value: Any = loads(deep)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == 1


# -- writing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0.0"), (-0.0, "-0.0"), (1.5, "1.5"), (0.025, "0.025"), (9.75, "9.75"),
     (1e10, "1.0E10"), (1e-5, "1.0E-5"), (1e7, "1.0E7"), (9999999.0, "9999999.0"),
     (0.001, "0.001"), (0.000999, "9.99E-4"), (123456789.125, "1.23456789125E8"),
     (100.0, "100.0"), (-2.5e-8, "-2.5E-8"), (1e300, "1.0E300"),
     (float("nan"), "null"), (float("inf"), "null")],
)
def test_java_double_format(value: float, text: str) -> None:
    assert java_double_str(value) == text


def test_legacy_map_keys() -> None:
    mq = ObjectKey({"topic": "T", "brokerName": "b", "queueId": 0})
    assert dumps({0: "a", "s": 1}) == b'{0:"a","s":1}'
    assert dumps({mq: 5}) == b'{{"brokerName":"b","queueId":0,"topic":"T"}:5}'
    assert dumps({True: 1, None: 2, 1.5: 3}) == b"{true:1,null:2,1.5:3}"


def test_standard_mode_quotes_and_sorts_keys() -> None:
    assert dumps({10: "x", 2: "y", 0: "z"}, standard=True) == b'{"0":"z","2":"y","10":"x"}'
    assert dumps({"b": 1, "B": 2, "a": 3}, standard=True) == b'{"B":2,"a":3,"b":1}'
    mq = ObjectKey({"topic": "T", "brokerName": "b", "queueId": 0})
    out = dumps({mq: 5}, standard=True)
    assert json.loads(out) == {'{"brokerName":"b","queueId":0,"topic":"T"}': 5}


def test_legacy_mode_keeps_insertion_order() -> None:
    assert dumps({"b": 1, 10: 2, "a": 3}) == b'{"b":1,10:2,"a":3}'


def test_string_escapes() -> None:
    s = 'q"b\\n\nr\rt\tb\bf\f\x01\x1f/é世'
    assert dumps(s) == '"q\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0001\\u001f/é世"'.encode()
    assert dumps(s, standard=True) == b'"q\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0001\\u001f/\\u00e9\\u4e16"'
    assert dumps("\U0001f600", standard=True) == b'"\\ud83d\\ude00"'


def test_null_values_are_omitted_in_maps_but_not_lists() -> None:
    assert dumps({"a": None, "b": 1, "c": None}) == b'{"b":1}'
    assert dumps([None, 1]) == b"[null,1]"


def test_values_of_other_types() -> None:
    class Color(Enum):
        RED = 1

    class Bean:
        def to_json(self) -> dict[str, Any]:
            return {"x": 1, "y": None}

    assert dumps({"e": Color.RED, "b": Bean(), "t": (1, 2), "bool": False}) == (
        b'{"e":"RED","b":{"x":1},"t":[1,2],"bool":false}'
    )
    assert dumps(frozenset({3})) == b"[3]"
    assert dumps(b"\x00\x01") == b'"AAE="'
    with pytest.raises(TypeError):
        dumps(object())


def test_standard_mode_writes_unsafe_longs_as_strings() -> None:
    assert dumps([2**53 - 1, 2**53, -(2**53)], standard=True) == b'[9007199254740991,"9007199254740992","-9007199254740992"]'
    assert dumps([2**53]) == b"[9007199254740992]"


def test_reference_cycle_raises_value_error() -> None:
    a: list[Any] = []
    a.append(a)
    with pytest.raises(ValueError):
        dumps(a)


# -- conformance with the captured 4.9.7 bodies --------------------------------------------


def test_vectors_have_the_expected_json_bodies() -> None:
    assert len(JSON_BODIES) == 285
    assert sum(1 for f in JSON_BODIES if not f["body_is_standard_json"]) == 8


@pytest.mark.parametrize("rec", JSON_BODIES, ids=lambda f: f"frame{f['id']}")
def test_every_captured_json_body_parses_and_rewrites_identically(rec: dict[str, Any]) -> None:
    body = bytes.fromhex(rec["body_hex"])
    value = loads(body)
    assert isinstance(value, dict)
    # Parsed maps keep their order, and bean keys are already alphabetical: fastjson's
    # exact bytes come back in legacy mode.
    assert dumps(value) == body
    if rec["body_is_standard_json"]:
        assert value == json.loads(body)


def test_route_data_files() -> None:
    legacy = loads(vector_file("route_data.json"))
    standard = loads(vector_file("route_data_standard.json"))
    assert legacy["brokerDatas"][0]["brokerAddrs"] == {0: "127.0.0.1:10911"}
    assert standard["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert dumps(legacy, standard=True) == vector_file("route_data_standard.json").strip()
    assert dumps(legacy) == vector_file("route_data.json").strip()


# -- properties ----------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_KEYS = st.text(max_size=8) | st.integers(min_value=-(2**40), max_value=2**40)


def _object_key(children: st.SearchStrategy[Any]) -> st.SearchStrategy[ObjectKey]:
    return st.dictionaries(st.text(max_size=6), children, max_size=3).map(ObjectKey)


_LEAF_KEYS = _KEYS | _object_key(st.integers() | st.text(max_size=6))


def _no_none_values(x: Any) -> Any:
    """What a round trip gives back: None map values are omitted, as fastjson does."""
    if isinstance(x, dict):
        return {k: _no_none_values(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [_no_none_values(v) for v in x]
    return x


_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(_LEAF_KEYS, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(_VALUES)
def test_round_trip_legacy(value: Any) -> None:
    assert loads(dumps(value)) == _no_none_values(value)


def _standardize(x: Any) -> Any:
    """Standard mode quotes every key: the key's plain fastjson text becomes a string."""
    if isinstance(x, dict):
        return {
            (k if isinstance(k, str) else dumps(k).decode()): _standardize(v)
            for k, v in x.items()
            if v is not None
        }
    if isinstance(x, list):
        return [_standardize(v) for v in x]
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2**53 - 1:
        return str(x)
    return x


@settings(max_examples=300)
@given(_VALUES)
def test_round_trip_standard(value: Any) -> None:
    out = dumps(value, standard=True)
    assert out.isascii()
    assert json.loads(out) == _standardize(value)
    assert loads(out) == _standardize(value)


@settings(max_examples=200)
@given(
    st.dictionaries(st.integers(-1000, 1000), st.integers(), max_size=8)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=8)
)
def test_standard_mode_sorts_map_keys(value: dict[Any, int]) -> None:
    # A TreeMap of Longs or of Strings (UTF-16 order; equal to code point order below U+10000).
    keys = list(json.loads(dumps(value, standard=True)))
    expected = [str(k) for k in sorted(value, key=lambda k: k if isinstance(k, int) else k.encode("utf-16-be"))]
    assert keys == expected


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_raise_only_protocol_error(data: bytes) -> None:
    try:
        loads(data)
    except ProtocolError:
        pass


_JSONISH = st.text(alphabet='{}[]:,"0123456789-.eE tfrueanl\\ab', max_size=40)


@settings(max_examples=1000)
@given(_JSONISH)
def test_json_like_text_raises_only_protocol_error(text: str) -> None:
    try:
        loads(text)
    except ProtocolError:
        pass
