"""Every request code with arbitrary header values, against a running nameserver and broker.

Hypothesis picks a request code (any ``RequestCode``), fills every field of its request
header with a harmless value (so the request decodes and reaches the handler), then
replaces one to three of them, and adds up to two of any header's wire keys, with
arbitrary text (lone surrogates, control characters, 10 KB names, empty strings) or
arbitrary integers; the body is absent, arbitrary bytes, or one of a few hostile texts, and sends the same request to the broker and to the nameserver. Afterwards: both
still answer, a produce/consume round trip works, every metadata file parses and matches
what the broker answers, and a graceful stop exits 0 without leaving ``abort``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.message import decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.request_specs import REQUEST_HEADERS
from tests.hostile import connect_sync, invoke_sync
from tests.integration.test_broker_send_pull import TIMEOUT, pull_request, send
from tests.procs import broker_process, namesrv_process

pytestmark = pytest.mark.timeout(240)

MAX_EXAMPLES = 600
NO_ANSWER_S = 2.0  # a request unanswered this long is followed by a liveness probe
PROBES = {"broker": RequestCode.GET_BROKER_CONFIG, "namesrv": RequestCode.GET_NAMESRV_CONFIG}


def _wire_keys() -> list[str]:
    keys: set[str] = set("abcdefghijklmn")
    for cls in REQUEST_HEADERS.values():
        keys.update(spec.wire for spec in cls._specs)
    return sorted(keys)


WIRE_KEYS = _wire_keys()
CODES = sorted(int(c) for c in RequestCode)
_PLAIN = {"str": "FuzzT", "bool": "false"}  # anything else is a number
# The codes whose values end up in a table, a file or a loop: drawn more often.
STORING_CODES = sorted(int(c) for c in (
    RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_BROKER_CONFIG, RequestCode.PUT_KV_CONFIG, RequestCode.PULL_MESSAGE,
    RequestCode.HEART_BEAT, RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.SEND_MESSAGE_V2,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
    RequestCode.CLONE_GROUP_OFFSET, RequestCode.GET_TOPIC_STATS_INFO,
    RequestCode.REGISTER_BROKER, RequestCode.QUERY_MESSAGE))


def base_fields(code: int) -> dict[str, str]:
    """Every field of the code's request header with a harmless value: the request decodes,
    so the hostile values reach the handler instead of the header decoder."""
    cls = REQUEST_HEADERS.get(code)
    if cls is None:
        return {}
    return {spec.wire: _PLAIN.get(spec.kind, "1") for spec in cls._specs}


hostile_text = st.one_of(
    st.text(max_size=40),  # any code point, lone surrogates included
    st.sampled_from(["", " ", "G\ud800", "\udfff", "a\x00b", "\n", "%RETRY%", "TBW102",
                     "SCHEDULE_TOPIC_XXXX", "x" * 10240, "\u00e9t\u00e9", "-1", "Fuzz\ud800"]),
    st.text(alphabet="abc%|_-", min_size=120, max_size=300),
)
hostile_int = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 1, 15, 16, 32, 2**31 - 1, 2**31, -(2**31), 2_000_000_000,
                     2**64, 65535, 65536]),
)
header_value = st.one_of(hostile_text, hostile_int.map(str),
                         st.sampled_from(["G\ud800", "2000000000", "32", "-5"]))
bodies = st.one_of(
    st.none(),
    st.binary(max_size=256),
    st.sampled_from([b"{}", b"[]", b'{"groupName":"G\\ud800"}', b"noSuchKey=1\n",
                     b"flushDiskType=SYNC_FLUSH\n", b"mappedFileSizeConsumeQueue=6000\n",
                     b'{"consumerDataSet":[{"groupName":"\\udc00"}]}', b"\xff\xfe"]),
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, dict[str, str], bytes | None]:
    code = draw(st.one_of(st.sampled_from(STORING_CODES), st.sampled_from(sorted(REQUEST_HEADERS)),
                          st.sampled_from(CODES)))
    ext = base_fields(code)
    own = sorted(ext) or WIRE_KEYS
    for key in draw(st.lists(st.sampled_from(own), min_size=1, max_size=3, unique=True)):
        ext[key] = draw(header_value)
    ext.update(draw(st.dictionaries(st.sampled_from(WIRE_KEYS), header_value, max_size=2)))
    return code, ext, draw(bodies)


def metadata_files(root: Path) -> list[Path]:
    config = root / "config"
    return [config / n for n in ("topics.json", "subscriptionGroup.json",
                                 "consumerOffset.json", "delayOffset.json")]


async def round_trip(broker: str, topic: str) -> None:
    client = RemotingClient()
    try:
        r = await send(client, broker, topic, b"after-fuzz", queue_id=0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        got = await client.invoke(broker, pull_request("FuzzCG", topic, 0, 0), TIMEOUT)
        assert got.code == ResponseCode.SUCCESS, got.remark
        assert [m.body for m in decode_messages(got.body or b"")] == [b"after-fuzz"]
    finally:
        await client.close()


def test_hostile_requests_never_poison_either_server(tmp_path: Path) -> None:
    ns = namesrv_process(tmp_path).start()
    br = broker_process(tmp_path, ns.address, conf={"flushConsumerOffsetInterval": "200"})
    try:
        br.start()
        sockets = {"broker": connect_sync(br.address, timeout=NO_ANSWER_S),
                   "namesrv": connect_sync(ns.address, timeout=NO_ANSWER_S)}

        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(request=requests())
        def one_request(request: tuple[int, dict[str, str], bytes | None]) -> None:
            code, ext, body = request
            for name, addr in (("broker", br.address), ("namesrv", ns.address)):
                try:
                    invoke_sync(sockets[name], code, ext, body or b"")
                except (ConnectionError, TimeoutError):
                    # Some requests get no answer by design, as upstream's (END_TRANSACTION
                    # of an unknown type returns null): the server must still answer others.
                    sockets[name].close()
                    sockets[name] = connect_sync(addr, timeout=NO_ANSWER_S)
                    probe = invoke_sync(connect_probe := connect_sync(addr), PROBES[name], None)
                    connect_probe.close()
                    assert probe.code == ResponseCode.SUCCESS, (name, code, probe.remark)

        try:
            one_request()
        finally:
            for sock in sockets.values():
                sock.close()
        asyncio.run(round_trip(br.address, "AfterFuzz"))
        topics_answer = asyncio.run(_all_topics(br.address))
    finally:
        broker_code = br.stop()
        ns_code = ns.stop()
        print(f"---- broker ----\n{br.log_tail(60)}\n---- namesrv ----\n{ns.log_tail(30)}")
    root = tmp_path / "broker-a" / "store"
    assert broker_code == 0 and ns_code == 0
    assert not (root / "abort").exists()
    for path in metadata_files(root):
        if path.exists():
            fastjson.loads(path.read_bytes())
    on_disk = fastjson.loads((root / "config" / "topics.json").read_bytes())["topicConfigTable"]
    assert set(on_disk) == topics_answer
    kv = tmp_path / "namesrv" / "kvConfig.json"
    if kv.exists():
        json.loads(kv.read_text(encoding="utf-8"))
    log = br.log_path.read_text(errors="replace") + ns.log_path.read_text(errors="replace")
    assert "Traceback" not in log


async def _all_topics(broker: str) -> set[str]:
    client = RemotingClient()
    try:
        r = await client.invoke(broker, RemotingCommand.create_request(
            RequestCode.GET_ALL_TOPIC_CONFIG, None), TIMEOUT)
        assert r.code == ResponseCode.SUCCESS
        return set(fastjson.loads(r.body or b"{}")["topicConfigTable"])
    finally:
        await client.close()
