"""The broker's send-header decode equals the long way (V2 header, then ``to_v1``).

And its C twin (``protocol/_command.c``, ``send_v2_header``) gives what the Python fast
path ``_send_v2_fast`` gives (the reference) on the same maps: captured frames, hand-made
edge cases and hypothesis-generated letter maps (numbers at and past their digit limits,
non-ASCII digits, missing letters, k/m spellings, unknown keys); where both give None the
general path raises the same HeaderError text whichever ran first.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol import headers as headers_module
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError
from aiorocketmq.protocol.headers import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    decode_send_request_header,
)
from tests.vectors import frame_bytes, frames_where


def _native() -> Any:
    try:
        from aiorocketmq.protocol import _command
    except ImportError as exc:  # pragma: no cover - the suite fails, never skips
        raise AssertionError("aiorocketmq.protocol._command is not built: pip install -e . "
                             "builds it where a C compiler is found") from exc
    return _command.send_v2_header


def _v2_requests() -> list[RemotingCommand]:
    out = []
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        for rec in frames_where(code=code, is_response=False):
            out.append(RemotingCommand.decode(frame_bytes(rec["id"])[4:]))
    return out


def test_captured_v2_sends_decode_like_from_ext_fields_then_to_v1() -> None:
    requests = _v2_requests()
    assert requests
    for req in requests:
        assert decode_send_request_header(req) == \
            SendMessageRequestHeaderV2.from_ext_fields(req.ext_fields).to_v1()


def test_unknown_letters_are_kept_and_n_becomes_bname() -> None:
    req = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "12", "h": "0",
        "n": "broker-a", "bname": "ignored", "zz": "kept"})
    header = decode_send_request_header(req)
    assert header.bname == "broker-a" and header.extra == {"zz": "kept"}
    assert header == SendMessageRequestHeaderV2.from_ext_fields(req.ext_fields).to_v1()


def test_missing_or_bad_letters_raise_header_error() -> None:
    req = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {"a": "G"})
    with pytest.raises(HeaderError):
        decode_send_request_header(req)
    req.ext_fields = {"a": "G", "b": "T", "c": "C", "d": "x", "e": "1", "f": "0", "g": "1",
                      "h": "0"}
    with pytest.raises(HeaderError):
        decode_send_request_header(req)


# -- the C twin against _send_v2_fast ------------------------------------------------------

def test_the_decoder_uses_the_c_twin() -> None:
    if NO_EXTENSIONS:
        assert headers_module._c_send_v2_header is None
    else:
        assert headers_module._c_send_v2_header is _native()


def _same(ext: dict[Any, Any]) -> None:
    """C and Python fast paths agree on ``ext``; where neither decides, the general path
    raises (or decodes) the same whichever path ran."""
    want = headers_module._send_v2_fast(ext)
    got = _native()(ext, SendMessageRequestHeader, headers_module._V2_KEYS)
    if got is NotImplemented:
        return
    assert type(got) is type(want)
    if want is None:
        return
    assert got == want
    for name in headers_module._SEND_HEADER_FIELDS:  # bool/int/None types too, not only ==
        assert type(getattr(got, name)) is type(getattr(want, name)), name
    assert list(got.extra) == list(want.extra)


def _request(ext: dict[str, str]) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, dict(ext))


def _outcome(ext: dict[str, str]) -> Any:
    try:
        return decode_send_request_header(_request(ext))
    except HeaderError as exc:
        return ("HeaderError", str(exc))


BASE = {"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0",
        "g": "1700000000000", "h": "0"}

EDGES: list[dict[str, str]] = [
    BASE,
    {**BASE, "d": "999999999", "e": "000000000", "g": "999999999999999999"},
    {**BASE, "d": "1234567890"},            # 10 digits: the general path's range check
    {**BASE, "g": "1234567890123456789"},   # 19 digits
    {**BASE, "g": "9223372036854775808"},   # past Long.MAX_VALUE
    {**BASE, "e": "-1"},                    # a sign: the general path
    {**BASE, "f": ""},
    {**BASE, "h": "\u0661"},                # an Arabic-Indic digit: isdigit, not ASCII
    {**BASE, "d": " 4"},
    {**BASE, "j": "3", "l": "16", "k": "TRUE", "m": "tRuE", "i": "KEYS\x01k\x02", "n": "b"},
    {**BASE, "j": "", "l": "16"},
    {**BASE, "l": "x"},
    {**BASE, "k": "true ", "m": "false"},
    {**BASE, "k": "\u0130", "m": "TRU\u0130"},  # non-ASCII lower()
    {**BASE, "bname": "x", "zz": "1", "\u00e9": "2"},
    {k: v for k, v in BASE.items() if k != "a"},
    {k: v for k, v in BASE.items() if k != "g"},
    {k: v for k, v in BASE.items() if k != "c"},
    {},
]


@pytest.mark.parametrize("ext", EDGES)
def test_c_twin_equals_python_fast_path_on_edges(ext: dict[str, str]) -> None:
    _same(ext)


@pytest.mark.parametrize("ext", EDGES)
def test_decode_gives_the_same_header_or_error_with_and_without_c(
        ext: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    with_c = _outcome(ext)
    monkeypatch.setattr(headers_module, "_c_send_v2_header", None)
    assert _outcome(ext) == with_c


def test_c_twin_leaves_what_it_does_not_decide_to_python() -> None:
    c = _native()
    known = headers_module._V2_KEYS
    assert c(list(BASE.items()), SendMessageRequestHeader, known) is NotImplemented
    assert c({**BASE, "d": 4}, SendMessageRequestHeader, known) is NotImplemented
    assert c({**BASE, "k": True}, SendMessageRequestHeader, known) is NotImplemented

    class Dicted:  # not a slots type
        pass
    assert c(dict(BASE), Dicted, known) is NotImplemented


DIGITS = st.text(alphabet="0123456789", min_size=0, max_size=20)
NUMBER = st.one_of(DIGITS, st.text(max_size=12),
                   st.integers(-(2**64), 2**64).map(str))
LETTER_VALUE = {
    "a": st.text(max_size=8), "b": st.text(max_size=8), "c": st.text(max_size=8),
    "d": NUMBER, "e": NUMBER, "f": NUMBER, "g": NUMBER, "h": NUMBER, "i": st.text(max_size=16),
    "j": NUMBER, "k": st.sampled_from(["true", "TRUE", "True", "false", "", "yes", "\u0130"]),
    "l": NUMBER, "m": st.sampled_from(["true", "TrUe", "false", "1", "tru", "trux", "Tru\u00e9"]),
    "n": st.text(max_size=8),
}


@st.composite
def letter_maps(draw: Any) -> dict[str, str]:
    ext: dict[str, str] = {}
    for key, values in LETTER_VALUE.items():
        # the required letters mostly present, so most maps reach the numbers
        if draw(st.integers(0, 9)) < (9 if key in "abcdefgh" else 4):
            ext[key] = draw(values)
    for key in draw(st.lists(st.text(max_size=6), max_size=3)):
        ext[key] = draw(st.text(max_size=6))
    order = draw(st.permutations(list(ext)))
    return {k: ext[k] for k in order}


@settings(max_examples=600, deadline=None)
@given(letter_maps())
@example({**BASE, "j": "123456789", "l": "0"})
def test_c_twin_equals_python_fast_path_generated(ext: dict[str, str]) -> None:
    _same(ext)
    with_c = _outcome(ext)
    saved = headers_module._c_send_v2_header
    headers_module._c_send_v2_header = None
    try:
        assert _outcome(ext) == with_c
    finally:
        headers_module._c_send_v2_header = saved
