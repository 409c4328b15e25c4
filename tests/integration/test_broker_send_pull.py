"""Broker send and pull paths against real ``mqnamesrv`` + ``mqbroker`` processes, raw protocol.

Covers docs/PROTOCOL.md 4.1, 4.2, 5.1, 5.5, 6.1, 6.2, 6.7: V1/V2/batch sends in both header
encodings, stored properties (CLUSTER added, WAIT stripped on the single path only),
offset msg ids, topic auto-creation through TBW102 and its route on the nameserver,
upstream error codes and remarks, every pull status row, tag filtering and long polling.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiorocketmq.protocol.bodies import TopicRouteData
from aiorocketmq.protocol.codes import PullSysFlag, RequestCode, ResponseCode, SerializeType
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ConnectionClosedError
from aiorocketmq.protocol.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from aiorocketmq.protocol.message import (
    Message,
    create_offset_msg_id,
    decode_messages,
    decode_offset_msg_id,
    encode_batch,
    encode_properties,
    socket_address_to_bytes,
)
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.procs import ServerProcess

pytestmark = pytest.mark.timeout(120)

TIMEOUT = 10.0
JSON = SerializeType.JSON
ROCKETMQ = SerializeType.ROCKETMQ


# -- raw protocol helpers (shared with the other test_broker_* modules) ------------------


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, *,
               code: int = RequestCode.SEND_MESSAGE_V2, props: dict[str, str] | None = None,
               queue_id: int = 0, serialize_type: int = JSON, default_topic: str = "TBW102",
               queue_nums: int = 4, group: str = "PG", raw_properties: str | None = None,
               reconsume_times: int | None = 0) -> RemotingCommand:
    properties = raw_properties if raw_properties is not None else encode_properties(
        props if props is not None else {"WAIT": "true"})
    batch = code == RequestCode.SEND_BATCH_MESSAGE
    v1 = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic=default_topic,
        default_topic_queue_nums=queue_nums, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0, properties=properties,
        reconsume_times=reconsume_times, batch=batch)
    ext = (v1.to_ext_fields() if code == RequestCode.SEND_MESSAGE
           else SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields())
    request = RemotingCommand.create_request(code, ext, body, serialize_type=serialize_type)
    return await client.invoke(addr, request, TIMEOUT)


def pull_request(group: str, topic: str, queue_id: int, offset: int, *, max_nums: int = 32,
                 sys_flag: int = PullSysFlag.SUBSCRIPTION, subscription: str | None = "*",
                 suspend_ms: int = 0, sub_version: int = 0, commit_offset: int = 0,
                 serialize_type: int = JSON) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=commit_offset,
        suspend_timeout_millis=suspend_ms, subscription=subscription, sub_version=sub_version,
        expression_type="TAG")
    return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields(),
                                          serialize_type=serialize_type)


async def pull(client: RemotingClient, addr: str, group: str, topic: str, queue_id: int,
               offset: int, *, timeout: float = TIMEOUT, **kw: Any) -> RemotingCommand:
    return await client.invoke(addr, pull_request(group, topic, queue_id, offset, **kw), timeout)


def pull_header(response: RemotingCommand) -> PullMessageResponseHeader:
    return PullMessageResponseHeader.from_ext_fields(response.ext_fields)


async def route(client: RemotingClient, namesrv_addr: str, topic: str) -> RemotingCommand:
    request = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return await client.invoke(namesrv_addr, request, TIMEOUT)


async def wait_for_route(client: RemotingClient, namesrv_addr: str, topic: str) -> TopicRouteData:
    """Poll the nameserver (under a deadline) until ``topic`` has a route."""
    deadline = time.monotonic() + 10
    while True:
        response = await route(client, namesrv_addr, topic)
        if response.code == ResponseCode.SUCCESS:
            return TopicRouteData.decode(response.body or b"")
        assert time.monotonic() < deadline, f"no route for {topic}: {response.remark}"
        await asyncio.sleep(0.05)


# -- send and read back ------------------------------------------------------------------


async def test_send_v1_v2_batch_both_encodings_and_read_back(
        broker: ServerProcess, namesrv: ServerProcess, client: RemotingClient) -> None:
    addr = broker.address
    topic = "SendPullTopic"
    sent: list[tuple[str, bytes, str]] = []  # (offset msg id, body, UNIQ_KEY)
    for i, (code, st) in enumerate([
        (RequestCode.SEND_MESSAGE, JSON), (RequestCode.SEND_MESSAGE, ROCKETMQ),
        (RequestCode.SEND_MESSAGE_V2, JSON), (RequestCode.SEND_MESSAGE_V2, ROCKETMQ),
    ]):
        props = {"TAGS": "TagA", "KEYS": f"k{i} common", "UNIQ_KEY": f"U{i:031d}",
                 "WAIT": "true", "héllo": "世界"}
        body = f"body-{i}".encode()
        r = await send(client, addr, topic, body, code=code, props=props, serialize_type=st)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.serialize_type == st
        assert r.ext_fields is not None
        assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and r.ext_fields["TRACE_ON"] == "true"
        h = SendMessageResponseHeader.from_ext_fields(r.ext_fields)
        assert h.queue_id == 0 and h.queue_offset == i
        sent.append((h.msg_id, body, props["UNIQ_KEY"]))

    members = [Message(topic, f"batch-{j}".encode(), properties={
        "TAGS": "TagB", "UNIQ_KEY": f"B{j:031d}", "WAIT": "true"}) for j in range(3)]
    r = await send(client, addr, topic, encode_batch(members), code=RequestCode.SEND_BATCH_MESSAGE,
                   props={"WAIT": "true"}, serialize_type=ROCKETMQ)
    assert r.code == ResponseCode.SUCCESS, r.remark
    bh = SendMessageResponseHeader.from_ext_fields(r.ext_fields)
    batch_ids = bh.msg_id.split(",")
    assert len(batch_ids) == 3 and bh.queue_offset == 4

    for st in (JSON, ROCKETMQ):
        resp = await pull(client, addr, "CG", topic, 0, 0, serialize_type=st)
        assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
        ph = pull_header(resp)
        assert (ph.next_begin_offset, ph.min_offset, ph.max_offset) == (7, 0, 7)
        assert ph.suggest_which_broker_id == 0
        msgs = decode_messages(resp.body)
        assert [m.queue_offset for m in msgs] == list(range(7))

    local = (await client.get_channel(addr)).local_addr
    for m, (msg_id, body, uniq) in zip(msgs[:4], sent, strict=True):
        assert m.body == body and m.topic == topic
        assert m.properties["CLUSTER"] == "DefaultCluster"
        assert "WAIT" not in m.properties  # stripped on the single path
        assert m.properties["UNIQ_KEY"] == uniq and m.properties["héllo"] == "世界"
        assert m.offset_msg_id == msg_id
        assert decode_offset_msg_id(msg_id) == (addr, m.commit_log_offset)
        assert m.store_host == addr and m.born_host == local
    for j, (m, msg_id) in enumerate(zip(msgs[4:], batch_ids, strict=True)):
        assert m.body == f"batch-{j}".encode()
        assert m.properties["WAIT"] == "true" and m.properties["CLUSTER"] == "DefaultCluster"
        assert m.properties["TAGS"] == "TagB"
        assert create_offset_msg_id(socket_address_to_bytes(addr), m.commit_log_offset) == msg_id


async def test_batch_member_properties_layout(broker: ServerProcess, client: RemotingClient) -> None:
    """docs/PROTOCOL.md 5.5: each member stores ``inner + \\x02 + batch-level`` (CLUSTER among them)."""
    addr = broker.address
    members = [Message("BatchLayout", b"x", properties={"TAGS": "T", "WAIT": "true"})]
    r = await send(client, addr, "BatchLayout", encode_batch(members),
                   code=RequestCode.SEND_BATCH_MESSAGE, props={"WAIT": "true"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    resp = await pull(client, addr, "CG", "BatchLayout", 0, 0)
    record = resp.body
    assert record is not None
    inner = encode_properties({"TAGS": "T", "WAIT": "true"}).encode()
    assert inner + b"\x02" in record
    assert b"CLUSTER\x01DefaultCluster" in record


async def test_auto_create_via_tbw102_registers_route(
        broker: ServerProcess, namesrv: ServerProcess, client: RemotingClient) -> None:
    addr = broker.address
    tbw = await wait_for_route(client, namesrv.address, "TBW102")
    assert tbw.queue_datas[0].perm == 7 and tbw.queue_datas[0].write_queue_nums == 8
    missing = await route(client, namesrv.address, "AutoTopic")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    r = await send(client, addr, "AutoTopic", b"hi", queue_id=3, queue_nums=4)
    assert r.code == ResponseCode.SUCCESS, r.remark
    rd = await wait_for_route(client, namesrv.address, "AutoTopic")
    qd = rd.queue_datas[0]
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (4, 4, 6)
    assert rd.broker_datas[0].broker_addrs[0] == addr
    # %RETRY% topics are created with one queue even when the default topic is unknown.
    r = await send(client, addr, "%RETRY%SomeGroup", b"x", default_topic="NoSuchDefault")
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_auto_created_topic_routed_when_the_send_is_answered(
        broker: ServerProcess, namesrv: ServerProcess, client: RemotingClient) -> None:
    """As upstream (registerBrokerAll inside the send that created the topic), the route is
    on the nameserver by the time the first send is answered: a producer or consumer that
    looks it up at once finds it (a stock client's send + fetchPublishMessageQueues)."""
    for i in range(20):
        topic = f"RoutedAtOnce{i}"
        r = await send(client, broker.address, topic, b"first", queue_id=0, queue_nums=4)
        assert r.code == ResponseCode.SUCCESS, r.remark
        found = await route(client, namesrv.address, topic)
        assert found.code == ResponseCode.SUCCESS, (topic, found.remark)


async def test_topic_not_exist_without_auto_create(
        tmp_path: Any, namesrv: ServerProcess, server_factory: Any, client: RemotingClient) -> None:
    from tests.procs import broker_process

    br = server_factory(broker_process(tmp_path, namesrv.address, name="broker-noauto",
                                       conf={"autoCreateTopicEnable": "false"}))
    r = await send(client, br.address, "NoAutoTopic", b"x")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.remark is not None and r.remark.startswith("topic[NoAutoTopic] not exist, apply first please!")
    assert r.ext_fields is not None and r.ext_fields["MSG_REGION"] == "DefaultRegion"
    tbw = await route(client, namesrv.address, "TBW102")
    assert tbw.code == ResponseCode.TOPIC_NOT_EXIST


async def test_bad_requests_get_upstream_codes_and_broker_keeps_serving(
        broker: ServerProcess, client: RemotingClient) -> None:
    addr = broker.address
    r = await send(client, addr, "bad topic!", b"x")
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    r = await send(client, addr, "T" * 128, b"x")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The specified topic is longer than topic max length.")
    r = await send(client, addr, "SCHEDULE_TOPIC_XXXX", b"x")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION,
                                  "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")
    r = await send(client, addr, "BigBody", b"\0" * (4 * 1024 * 1024 + 1))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    assert r.remark is not None and "msg body length limit 4194304B" in r.remark
    r = await send(client, addr, "BigProps", b"x", props={"k": "v" * 40000})
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    r = await send(client, addr, "QueueIds", b"x", queue_id=4, queue_nums=4)
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark is not None and r.remark.startswith("request queueId[4] is illegal, TopicConfig [topicName=QueueIds")
    r = await send(client, addr, "QueueIds", b"x", queue_id=2 ** 31 - 1)
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await send(client, addr, "QueueIds", b"x", queue_id=-1)
    assert r.code == ResponseCode.SUCCESS
    assert 0 <= SendMessageResponseHeader.from_ext_fields(r.ext_fields).queue_id < 4
    # Malformed headers: a missing required field, a number that does not parse.
    bad = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T"}, b"x")
    r = await client.invoke(addr, bad, TIMEOUT)
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark and "is null" in r.remark
    bad = pull_request("CG", "QueueIds", 0, 0)
    assert bad.ext_fields is not None
    bad.ext_fields["queueOffset"] = "zero"
    r = await client.invoke(addr, bad, TIMEOUT)
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark and "queueOffset" in r.remark
    bad_batch = RemotingCommand.create_request(
        RequestCode.SEND_BATCH_MESSAGE,
        SendMessageRequestHeaderV2(producer_group="PG", topic="QueueIds", default_topic="TBW102",
                                   default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                   born_timestamp=0, flag=0, batch=True).to_ext_fields(),
        b"\x00\x00\x00\x99garbage")
    r = await client.invoke(addr, bad_batch, TIMEOUT)
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await client.invoke(addr, RemotingCommand.create_request(9999), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                  " request type 9999 not supported")
    r = await send(client, addr, "QueueIds", b"still fine")
    assert r.code == ResponseCode.SUCCESS


async def test_delayed_message_is_parked_in_the_schedule_topic(broker: ServerProcess,
                                                                client: RemotingClient) -> None:
    """REMOTING 6.5: DELAY=2 parks the record in SCHEDULE_TOPIC_XXXX queue 1 with REAL_TOPIC /
    REAL_QID; nothing is readable in the real topic until it is due (delivery timing is
    covered in test_advanced_broker.py)."""
    r = await send(client, broker.address, "DelayTopic", b"d", props={"DELAY": "2", "WAIT": "true"})
    assert r.code == ResponseCode.SUCCESS
    resp = await pull(client, broker.address, "CG", "DelayTopic", 0, 0)
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    parked = await pull(client, broker.address, "CG", "SCHEDULE_TOPIC_XXXX", 1, 0)
    assert parked.code == ResponseCode.SUCCESS
    record = decode_messages(parked.body)[0]
    assert record.properties["REAL_TOPIC"] == "DelayTopic"
    assert record.properties["REAL_QID"] == "0" and record.properties["DELAY"] == "2"


# -- pull statuses, filtering, long polling ----------------------------------------------


async def test_every_pull_status_row(broker: ServerProcess, client: RemotingClient) -> None:
    addr = broker.address
    topic = "PullRows"
    r = await pull(client, addr, "CG", "NoSuchTopic", 0, 0)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and r.ext_fields == {}
    for _ in range(3):
        assert (await send(client, addr, topic, b"m")).code == ResponseCode.SUCCESS
    # queue missing (queue 1 was never written): offset 0 -> NOT_FOUND, else OFFSET_MOVED, next 0
    r = await pull(client, addr, "CG", topic, 1, 0)
    assert r.code == ResponseCode.PULL_NOT_FOUND and pull_header(r).next_begin_offset == 0
    r = await pull(client, addr, "CG", topic, 1, 5)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and pull_header(r).next_begin_offset == 0
    assert r.remark in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE")
    # offset == max -> OFFSET_OVERFLOW_ONE / NOT_FOUND, next = offset
    r = await pull(client, addr, "CG", topic, 0, 3)
    assert (r.code, r.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    h = pull_header(r)
    assert (h.next_begin_offset, h.min_offset, h.max_offset) == (3, 0, 3)
    # offset > max -> OFFSET_OVERFLOW_BADLY / OFFSET_MOVED, next = max
    r = await pull(client, addr, "CG", topic, 0, 10)
    assert (r.code, r.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
    assert pull_header(r).next_begin_offset == 3
    # found, limited by maxMsgNums
    r = await pull(client, addr, "CG", topic, 0, 1, max_nums=1)
    assert r.code == ResponseCode.SUCCESS and pull_header(r).next_begin_offset == 2
    assert len(decode_messages(r.body)) == 1
    # bad queue ids
    for qid in (-1, 4):
        r = await pull(client, addr, "CG", topic, qid, 0)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark is not None and r.remark.startswith(f"queueId[{qid}] is illegal, topic:[{topic}]")
    # no subscription flag and no heartbeat
    r = await pull(client, addr, "CG", topic, 0, 0, sys_flag=0, subscription=None)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and r.ext_fields == {}
    assert r.remark is not None and r.remark.startswith("the consumer's group info not exist")


async def test_offset_too_small_after_retention(broker: ServerProcess, client: RemotingClient) -> None:
    """OFFSET_TOO_SMALL needs a queue whose min offset moved: a negative offset asks below min."""
    addr = broker.address
    assert (await send(client, addr, "Small", b"m")).code == ResponseCode.SUCCESS
    r = await pull(client, addr, "CG", "Small", 0, -1)
    assert (r.code, r.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL")
    assert pull_header(r).next_begin_offset == 0


async def test_tag_filtering_by_code_set(broker: ServerProcess, client: RemotingClient) -> None:
    addr = broker.address
    for tag in ("TagA", "TagB", "TagA", "TagC"):
        r = await send(client, addr, "Tags", tag.encode(), props={"TAGS": tag})
        assert r.code == ResponseCode.SUCCESS
    r = await pull(client, addr, "CG", "Tags", 0, 0, subscription="TagA || TagC")
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"TagA", b"TagA", b"TagC"]
    assert pull_header(r).next_begin_offset == 4
    r = await pull(client, addr, "CG", "Tags", 0, 0, subscription="TagZ")
    assert (r.code, r.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert pull_header(r).next_begin_offset == 4


async def test_long_polling_wakes_on_arrival_and_expires(broker: ServerProcess,
                                                         client: RemotingClient) -> None:
    addr = broker.address
    topic = "LongPoll"
    assert (await send(client, addr, topic, b"first")).code == ResponseCode.SUCCESS
    flag = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    # Parked pull (hold 20 s), then a send wakes it.
    parked = asyncio.ensure_future(pull(client, addr, "CG", topic, 0, 1, sys_flag=flag,
                                        suspend_ms=20000, timeout=30))
    filtered = asyncio.ensure_future(pull(client, addr, "CG", topic, 0, 1, sys_flag=flag,
                                          suspend_ms=1500, subscription="Other", timeout=30))
    await asyncio.sleep(0)
    # The pull must be parked before the send; a request on the same connection is ordered.
    assert (await pull(client, addr, "CG", topic, 0, 0)).code == ResponseCode.SUCCESS
    assert (await send(client, addr, topic, b"second", props={"TAGS": "T"})).code == ResponseCode.SUCCESS
    # Woken by the put itself, not by a later checker pass or its hold's end: the broker
    # answered the pull before the send, on the same connection.
    assert parked.done(), "the send was answered before the parked pull"
    r = await parked
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, "FOUND")
    assert [m.body for m in decode_messages(r.body)] == [b"second"]
    # The filtered pull did not match tag T, so it stayed parked; at its deadline it is
    # re-run and finds only the unmatched message: NO_MATCHED_MESSAGE past it.
    r = await filtered
    assert (r.code, r.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert pull_header(r).next_begin_offset == 2
    # Nothing arrives: the held pull expires with NOT_FOUND, nextBeginOffset = its offset.
    r = await pull(client, addr, "CG", topic, 0, 2, sys_flag=flag, suspend_ms=1000, timeout=30)
    assert (r.code, r.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    h = pull_header(r)
    assert (h.next_begin_offset, h.min_offset, h.max_offset) == (2, 0, 2)


async def test_vanishing_client_with_parked_pulls(broker: ServerProcess,
                                                  client: RemotingClient) -> None:
    addr = broker.address
    topic = "Vanish"
    assert (await send(client, addr, topic, b"m")).code == ResponseCode.SUCCESS
    flag = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    other = RemotingClient()
    channel = await other.get_channel(addr)
    futures = [await channel.invoke_async(pull_request("CG", topic, 0, 1, sys_flag=flag,
                                                       suspend_ms=20000), 30)
               for _ in range(5)]
    # Make sure the broker holds them: a later request on the same connection is answered first.
    assert (await other.invoke(addr, pull_request("CG", topic, 0, 0), TIMEOUT)).code == 0
    channel.abort()
    await other.close()
    for fut in futures:
        with pytest.raises(ConnectionClosedError):
            await fut
    assert (await send(client, addr, topic, b"after")).code == ResponseCode.SUCCESS
    r = await pull(client, addr, "CG", topic, 0, 1)
    assert r.code == ResponseCode.SUCCESS
    assert broker.alive()
