"""The pull-header decode (``PullMessageRequestHeader.from_ext_fields``) equals the generic
decoder, and its C twin (``protocol/_command.c``, ``pull_header``) gives what the Python
fast path ``_pull_fast`` gives (the reference) on the same maps: captured frames,
hand-made edge cases and hypothesis-generated maps (numbers at and past their digit
limits, signs, non-ASCII digits, missing fields, unknown keys); where both give None the
general decoder raises the same HeaderError text whichever ran first.

Also the edge's text check: ``_command.all_text`` against ``validation._all_text_py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol import headers as headers_module
from aiorocketmq.protocol import validation
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError
from aiorocketmq.protocol.headers import PullMessageRequestHeader
from tests.vectors import frame_bytes, frames_where


def _native() -> Any:
    try:
        from aiorocketmq.protocol import _command
    except ImportError as exc:  # pragma: no cover - the suite fails, never skips
        raise AssertionError("aiorocketmq.protocol._command is not built: pip install -e . "
                             "builds it where a C compiler is found") from exc
    return _command


def test_the_decoder_and_the_edge_use_the_c_twins() -> None:
    if NO_EXTENSIONS:
        assert headers_module._c_pull_header is None
        assert validation._all_text is validation._all_text_py
    else:
        assert headers_module._c_pull_header is _native().pull_header
        assert validation._all_text is _native().all_text


def test_captured_pulls_decode_like_the_generic_decoder() -> None:
    requests = [RemotingCommand.decode(frame_bytes(rec["id"])[4:])
                for rec in frames_where(code=RequestCode.PULL_MESSAGE, is_response=False)]
    assert requests
    for req in requests:
        ext = req.ext_fields
        assert ext is not None
        want = PullMessageRequestHeader.from_ext_fields_generic(ext)
        assert PullMessageRequestHeader.from_ext_fields(ext) == want
        assert headers_module._pull_fast(ext) == want  # every captured pull takes it
        _same(ext)


def _same(ext: dict[Any, Any]) -> None:
    """C and Python fast paths agree on ``ext``."""
    want = headers_module._pull_fast(ext)
    got = _native().pull_header(ext, PullMessageRequestHeader, headers_module._PULL_REQUEST_KEYS)
    if got is NotImplemented:
        return
    assert type(got) is type(want)
    if want is None:
        return
    assert got == want
    for name in headers_module._PULL_HEADER_FIELDS:  # int/None types too, not only ==
        assert type(getattr(got, name)) is type(getattr(want, name)), name
    assert list(got.extra) == list(want.extra)


def _outcome(ext: dict[str, str]) -> Any:
    try:
        return PullMessageRequestHeader.from_ext_fields(dict(ext))
    except HeaderError as exc:
        return ("HeaderError", str(exc))


def _generic_outcome(ext: dict[str, str]) -> Any:
    try:
        return PullMessageRequestHeader.from_ext_fields_generic(dict(ext))
    except HeaderError as exc:
        return ("HeaderError", str(exc))


def _same_everywhere(ext: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The decode gives the same header or error with the C twin, with ``_pull_fast`` only,
    and with neither (the hand-written general decoder); valid maps as the generic one."""
    with_c = _outcome(ext)
    with monkeypatch.context() as m:
        m.setattr(headers_module, "_c_pull_header", None)
        assert _outcome(ext) == with_c
        m.setattr(headers_module, "_pull_fast", lambda ext: None)
        assert _outcome(ext) == with_c
    if not isinstance(with_c, tuple):
        assert with_c == _generic_outcome(ext)


BASE = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "123456",
        "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "1700000000000", "expressionType": "TAG",
        "bname": "broker-a"}

EDGES: list[dict[str, str]] = [
    BASE,
    {**BASE, "queueId": "999999999", "maxMsgNums": "000000000",
     "queueOffset": "999999999999999999", "subVersion": "999999999999999999"},
    {**BASE, "queueId": "1234567890"},               # 10 digits: the general range check
    {**BASE, "queueId": "2147483648"},               # past Integer.MAX_VALUE
    {**BASE, "queueOffset": "1234567890123456789"},  # 19 digits
    {**BASE, "commitOffset": "9223372036854775808"},  # past Long.MAX_VALUE
    {**BASE, "commitOffset": "-1"},                  # a sign: the general decoder
    {**BASE, "queueOffset": "+7"},
    {**BASE, "sysFlag": ""},
    {**BASE, "maxMsgNums": "\u0661"},                # an Arabic-Indic digit: not ASCII
    {**BASE, "suspendTimeoutMillis": " 4"},
    {**BASE, "zz": "kept", "\u00e9": "2", "ReqT": "x"},
    {**BASE, "consumerGroup": "\u00e9\u00e9"},
    {k: v for k, v in BASE.items() if k not in ("subscription", "expressionType", "bname")},
    {k: v for k, v in BASE.items() if k != "consumerGroup"},
    {k: v for k, v in BASE.items() if k != "topic"},
    {k: v for k, v in BASE.items() if k != "subVersion"},
    {k: v for k, v in BASE.items() if k != "queueId"},
    {},
]


@pytest.mark.parametrize("ext", EDGES)
def test_c_twin_equals_python_fast_path_on_edges(ext: dict[str, str]) -> None:
    _same(ext)


@pytest.mark.parametrize("ext", EDGES)
def test_decode_gives_the_same_header_or_error_on_every_path(
        ext: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _same_everywhere(ext, monkeypatch)


def test_base_map_takes_the_fast_paths() -> None:
    header = headers_module._pull_fast(BASE)
    assert header is not None and header.queue_offset == 123456 and header.extra == {}
    assert header == PullMessageRequestHeader.from_ext_fields_generic(BASE)
    assert _native().pull_header(dict(BASE), PullMessageRequestHeader,
                                 headers_module._PULL_REQUEST_KEYS) == header


def test_c_twin_leaves_what_it_does_not_decide_to_python() -> None:
    c = _native().pull_header
    known = headers_module._PULL_REQUEST_KEYS
    assert c(list(BASE.items()), PullMessageRequestHeader, known) is NotImplemented
    assert c({**BASE, "queueId": 4}, PullMessageRequestHeader, known) is NotImplemented
    assert headers_module._pull_fast({**BASE, "queueId": 4}) is None

    class Dicted:  # not a slots type
        pass
    assert c(dict(BASE), Dicted, known) is NotImplemented


def test_a_subclass_is_decoded_as_itself() -> None:
    class Sub(PullMessageRequestHeader):
        __slots__ = ()
    assert type(Sub.from_ext_fields(dict(BASE))) is Sub


DIGITS = st.text(alphabet="0123456789", min_size=0, max_size=20)
NUMBER = st.one_of(DIGITS, st.text(max_size=12), st.integers(-(2**64), 2**64).map(str))
FIELD_VALUE = {
    "consumerGroup": st.text(max_size=8), "topic": st.text(max_size=8),
    "queueId": NUMBER, "queueOffset": NUMBER, "maxMsgNums": NUMBER, "sysFlag": NUMBER,
    "commitOffset": NUMBER, "suspendTimeoutMillis": NUMBER, "subscription": st.text(max_size=8),
    "subVersion": NUMBER, "expressionType": st.sampled_from(["TAG", "SQL92", ""]),
    "bname": st.text(max_size=8),
}
REQUIRED = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
            "commitOffset", "suspendTimeoutMillis", "subVersion")


@st.composite
def pull_maps(draw: Any) -> dict[str, str]:
    ext: dict[str, str] = {}
    for key, values in FIELD_VALUE.items():
        # the required fields mostly present, so most maps reach the numbers
        if draw(st.integers(0, 19)) < (19 if key in REQUIRED else 10):
            ext[key] = draw(values)
    for key in draw(st.lists(st.text(max_size=6), max_size=3)):
        ext[key] = draw(st.text(max_size=6))
    order = draw(st.permutations(list(ext)))
    return {k: ext[k] for k in order}


@settings(max_examples=600, deadline=None)
@given(pull_maps())
@example({**BASE, "queueId": "123456789", "subVersion": "0"})
def test_c_twin_equals_python_fast_path_generated(ext: dict[str, str]) -> None:
    _same(ext)
    with pytest.MonkeyPatch.context() as m:
        _same_everywhere(ext, m)


# -- the edge's text check: C twin against _all_text_py ------------------------------------

TEXT = st.one_of(st.text(max_size=6), st.sampled_from(["G\ud800", "\udfff", "\u00e9", "x"]))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(TEXT, st.one_of(TEXT, st.none(), st.integers()), max_size=5))
@example({"a": "G\ud800"})
@example({"G\udc00": "a"})
@example({"a": 1})
def test_all_text_c_twin_equals_python(ext: dict[str, Any]) -> None:
    assert _native().all_text(ext) is validation._all_text_py(ext)


def test_all_text_c_twin_refuses_what_is_not_a_dict() -> None:
    assert _native().all_text([("a", "b")]) is False
    assert validation._all_text_py({"a": "b"}) is True
