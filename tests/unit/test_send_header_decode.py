"""The broker's send-header decode equals the long way (V2 header, then ``to_v1``)."""

from __future__ import annotations

import pytest

from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError
from aiorocketmq.protocol.headers import SendMessageRequestHeaderV2, decode_send_request_header
from tests.vectors import frame_bytes, frames_where


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
