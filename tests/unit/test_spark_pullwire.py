"""The Spark source's pull frames: the C codec (``spark_sink/_pull.c``) against its Python
reference (``pullwire.pull_request_py`` / ``pull_answer_py``) on the same inputs.

* A request frame is byte for byte the reference's, and ``RemotingCommand.decode`` reads
  it back as the PULL_MESSAGE the ``PullMessageRequestHeader`` describes.
* An answer: where the C reads one it equals the reference; on every answer our broker
  and a stock one send (ROCKETMQ headers, the four offsets) it does read it; on anything
  else (other codes, requests, JSON headers, truncated or corrupted frames, values that
  are not Java longs) it answers None and the reference decides.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq import NO_EXTENSIONS
from aiorocketmq.protocol.codes import PullSysFlag, RequestCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from aiorocketmq.spark_sink import pullwire
from aiorocketmq.spark_sink.pullwire import PullTemplate, pull_answer_py, pull_request_py

if pullwire.NATIVE:
    from aiorocketmq.spark_sink import _pull
    C_REQUEST = _pull.pull_request
    C_ANSWER = _pull.pull_answer
else:  # pragma: no cover - the C module is built here (setup.py); see test_c_is_used
    C_REQUEST = pull_request_py
    C_ANSWER = pull_answer_py

INT64 = st.integers(-(2**63), 2**63 - 1)
_text = st.text(st.characters(codec="utf-8"), max_size=30)


def test_c_is_used() -> None:
    assert pullwire.NATIVE is not NO_EXTENSIONS
    assert (pullwire.pull_request is pull_request_py) is NO_EXTENSIONS
    assert (pullwire.pull_answer is pull_answer_py) is NO_EXTENSIONS


def _template(group: str, topic: str, queue_id: int, sub: str, kind: str) -> PullTemplate:
    return PullTemplate(PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=0, max_msg_nums=0,
        sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0,
        subscription=sub, sub_version=0, expression_type=kind, bname="broker-a"))


@settings(max_examples=300)
@given(_text, _text, st.integers(0, 2**31 - 1), _text, st.sampled_from(["TAG", "SQL92"]),
       st.integers(-(2**31), 2**31 - 1), INT64, st.integers(-(2**31), 2**31 - 1))
def test_request_as_the_reference(group: str, topic: str, queue_id: int, sub: str, kind: str,
                                  opaque: int, offset: int, count: int) -> None:
    t = _template(group, topic, queue_id, sub, kind)
    frame = C_REQUEST(t.prefix, opaque, t.fixed, offset, count)
    assert frame == pull_request_py(t.prefix, opaque, t.fixed, offset, count)
    # What the broker reads: the header's own fields, the offsets as decimal text.
    cmd = RemotingCommand.decode(memoryview(frame)[4:])
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.body) == (
        RequestCode.PULL_MESSAGE, opaque, 0, None, None)
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    expected = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=count, sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0,
        suspend_timeout_millis=0, subscription=sub, sub_version=0, expression_type=kind,
        bname="broker-a").to_ext_fields()
    assert cmd.ext_fields == expected
    # The template's signed form is the same request.
    signed = t.command(offset, count)
    assert signed.ext_fields == expected


@pytest.mark.parametrize("impl", [C_REQUEST, pull_request_py], ids=["c", "python"])
def test_request_refuses_a_bad_prefix(impl: object) -> None:
    with pytest.raises(ValueError, match="prefix must be 5 bytes"):
        impl(b"1234", 1, b"", 0, 32)  # type: ignore[operator]


def _answer(code: int, opaque: int, ext: dict[str, str] | None, body: bytes | None,
            remark: str | None = "FOUND", stype: int = SerializeType.ROCKETMQ,
            flag: int = 1) -> bytes:
    cmd = RemotingCommand(code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
                          body=body, serialize_type=stype)
    return cmd.encode()[4:]


def _both(frame: bytes) -> tuple[object, object]:
    c = C_ANSWER(frame)
    ref = pull_answer_py(frame)
    assert c is None or c == ref
    return c, ref


@settings(max_examples=300)
@given(st.sampled_from([0, 19, 20, 21]), st.integers(-(2**31), 2**31 - 1), INT64, INT64,
       INT64, INT64, st.binary(max_size=300), st.sampled_from(["FOUND", "", None]))
def test_answers_of_a_pull_are_read_in_c(code: int, opaque: int, nxt: int, lo: int, hi: int,
                                         suggest: int, body: bytes, remark: str | None) -> None:
    ext = PullMessageResponseHeader(suggest_which_broker_id=suggest, next_begin_offset=nxt,
                                    min_offset=lo, max_offset=hi).to_ext_fields()
    frame = _answer(code, opaque, ext, body or None, remark)
    c, ref = _both(frame)
    assert ref == (opaque, code, nxt, lo, hi, suggest, len(frame) - len(body))
    assert c == ref or not pullwire.NATIVE
    # Mixed into other entries, in any order, the same.
    more = {"zz": "1", **ext, "a": "x"}
    c, ref = _both(_answer(code, opaque, more, body or None, remark))
    assert c == ref or not pullwire.NATIVE


@settings(max_examples=500)
@given(st.integers(-40, 40), st.integers(-(2**31), 2**31 - 1),
       st.dictionaries(st.sampled_from(["nextBeginOffset", "minOffset", "maxOffset",
                                        "suggestWhichBrokerId", "other"]),
                       st.one_of(st.integers(-(2**64), 2**64).map(str),
                                 st.from_regex(r"[+\-]?[0-9]{0,21}", fullmatch=True), _text)),
       st.binary(max_size=40), st.sampled_from([0, 1, 2, 3]),
       st.sampled_from([SerializeType.ROCKETMQ, SerializeType.JSON]), st.one_of(st.none(), _text))
def test_any_answer_as_the_reference(code: int, opaque: int, ext: dict[str, str], body: bytes,
                                     flag: int, stype: int, remark: str | None) -> None:
    _both(_answer(code, opaque, ext, body or None, remark, stype, flag))


@settings(max_examples=500)
@given(st.data())
def test_damaged_answers_as_the_reference(data: st.DataObject) -> None:
    ext = PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=64,
                                    min_offset=0, max_offset=1000).to_ext_fields()
    frame = bytearray(_answer(0, 7, ext, b"x" * 50))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["cut", "flip", "grow"]))
        if kind == "cut" and frame:
            del frame[data.draw(st.integers(0, len(frame) - 1)):]
        elif kind == "flip" and frame:
            i = data.draw(st.integers(0, len(frame) - 1))
            frame[i] = data.draw(st.integers(0, 255))
        else:
            frame[data.draw(st.integers(0, len(frame))):0] = data.draw(st.binary(max_size=8))
    _both(bytes(frame))


def test_what_c_leaves_to_python() -> None:
    ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "64", "minOffset": "0",
           "maxOffset": "1000"}
    json_frame = _answer(0, 1, ext, b"body", stype=SerializeType.JSON)
    assert C_ANSWER(json_frame) is None or not pullwire.NATIVE
    assert pull_answer_py(json_frame) == (1, 0, 64, 0, 1000, 0, len(json_frame) - 4)
    for frame in (_answer(1, 1, ext, None, "boom"),  # SYSTEM_ERROR: the caller raises it
                  _answer(0, 1, ext, b"b", flag=0),  # a request
                  _answer(0, 1, {**ext, "maxOffset": "9223372036854775808"}, None),
                  _answer(0, 1, {**ext, "minOffset": "1e3"}, None),
                  _answer(0, 1, {k: v for k, v in ext.items() if k != "minOffset"}, None)):
        assert C_ANSWER(frame) is None
        assert pull_answer_py(frame) is None
