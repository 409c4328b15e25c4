"""Broker client registration, offsets, lookups and admin topic creation, over the raw protocol.

docs/PROTOCOL.md 4.5, 4.6, 4.10, 4.11, 6.3: HEART_BEAT / consumer list / NOTIFY_CONSUMER_IDS_CHANGED
on join and leave, subscription checks on pull, QUERY/UPDATE_CONSUMER_OFFSET (oneway too)
with the young-queue rule, offset lookups by queue and time, QUERY_MESSAGE by key and
unique key, VIEW_MESSAGE_BY_ID, UPDATE_AND_CREATE_TOPIC with its single-topic registration.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aiorocketmq.protocol.bodies import (
    ConsumerData,
    ConsumerListBody,
    HeartbeatData,
    ProducerData,
    build_subscription_data,
)
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    CreateTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from aiorocketmq.protocol.message import decode_messages, decode_offset_msg_id
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import (
    TIMEOUT,
    pull,
    pull_header,
    route,
    send,
    wait_for_route,
)
from tests.procs import ServerProcess

pytestmark = pytest.mark.timeout(120)


class NotifiedClient:
    """A RemotingClient that records NOTIFY_CONSUMER_IDS_CHANGED requests it receives."""

    def __init__(self) -> None:
        self.notified: asyncio.Queue[str] = asyncio.Queue(maxsize=100)
        self.client = RemotingClient(processors={
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_notify})

    def _on_notify(self, channel: Channel, request: RemotingCommand) -> None:
        assert request.is_oneway
        self.notified.put_nowait((request.ext_fields or {})["consumerGroup"])

    async def next_notify(self) -> str:
        return await asyncio.wait_for(self.notified.get(), TIMEOUT)


def heartbeat(client_id: str, group: str, subs: dict[str, tuple[str, int]]) -> RemotingCommand:
    data = HeartbeatData(
        client_id,
        producer_data_set=[ProducerData("PG"), ProducerData("CLIENT_INNER_PRODUCER")],
        consumer_data_set=[ConsumerData(
            group, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
            [_sub(topic, expr, version) for topic, (expr, version) in subs.items()])])
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, body=data.encode())


def _sub(topic: str, expr: str, version: int):  # type: ignore[no-untyped-def]
    sub = build_subscription_data(topic, expr)
    sub.sub_version = version
    return sub


async def consumer_list(client: RemotingClient, addr: str, group: str) -> RemotingCommand:
    request = RemotingCommand.create_request(
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        GetConsumerListByGroupRequestHeader(consumer_group=group).to_ext_fields())
    return await client.invoke(addr, request, TIMEOUT)


async def test_heartbeat_consumer_list_and_notifications(broker: ServerProcess,
                                                         namesrv: ServerProcess) -> None:
    addr = broker.address
    a, b = NotifiedClient(), NotifiedClient()
    try:
        r = await a.client.invoke(addr, heartbeat("10.0.0.1@a", "CG", {"HbTopic": ("*", 1)}), TIMEOUT)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields is None and not r.body
        assert await a.next_notify() == "CG"  # the new channel itself is told
        r = await consumer_list(a.client, addr, "CG")
        assert r.code == ResponseCode.SUCCESS and r.ext_fields == {}
        assert ConsumerListBody.decode(r.body or b"").consumer_id_list == ["10.0.0.1@a"]
        # The retry topic of the group now exists and is registered.
        await wait_for_route(a.client, namesrv.address, "%RETRY%CG")

        # A second member joins: both are told.
        r = await b.client.invoke(addr, heartbeat("10.0.0.2@b", "CG", {"HbTopic": ("*", 1)}), TIMEOUT)
        assert r.code == ResponseCode.SUCCESS
        assert await a.next_notify() == "CG" and await b.next_notify() == "CG"
        r = await consumer_list(a.client, addr, "CG")
        assert sorted(ConsumerListBody.decode(r.body or b"").consumer_id_list) == ["10.0.0.1@a", "10.0.0.2@b"]

        # A subVersion bump alone notifies nobody; a newer pull than the broker's is refused.
        await a.client.invoke(addr, heartbeat("10.0.0.1@a", "CG", {"HbTopic": ("*", 5)}), TIMEOUT)
        assert (await send(a.client, addr, "HbTopic", b"x")).code == ResponseCode.SUCCESS
        r = await pull(a.client, addr, "CG", "HbTopic", 0, 0, sys_flag=PullSysFlag.SUSPEND,
                       subscription=None, sub_version=9)
        assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                      "the consumer's subscription not latest")
        assert r.ext_fields == {}
        r = await pull(a.client, addr, "CG", "HbTopic", 0, 0, sys_flag=0, subscription=None,
                       sub_version=5)
        assert r.code == ResponseCode.SUCCESS  # the heartbeat's subscription was used
        assert (await send(a.client, addr, "Unsubscribed", b"x")).code == ResponseCode.SUCCESS
        r = await pull(a.client, addr, "CG", "Unsubscribed", 0, 0, sys_flag=0, subscription=None)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        assert r.remark is not None and r.remark.startswith("the consumer's subscription not exist")

        # b leaves by closing its connection: a is told.
        await b.client.close()
        assert await a.next_notify() == "CG"
        r = await consumer_list(a.client, addr, "CG")
        assert ConsumerListBody.decode(r.body or b"").consumer_id_list == ["10.0.0.1@a"]

        # a unregisters explicitly: the group is empty.
        unregister = RemotingCommand.create_request(
            RequestCode.UNREGISTER_CLIENT,
            UnregisterClientRequestHeader(client_id="10.0.0.1@a", producer_group="PG",
                                          consumer_group="CG").to_ext_fields())
        r = await a.client.invoke(addr, unregister, TIMEOUT)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields == {}
        r = await consumer_list(a.client, addr, "CG")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, CG")
    finally:
        await a.client.close()
        await b.client.close()


async def test_consumer_offsets_and_young_queue_rule(broker: ServerProcess,
                                                     client: RemotingClient) -> None:
    addr = broker.address

    async def query(group: str, topic: str, qid: int) -> RemotingCommand:
        return await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic,
                                             queue_id=qid).to_ext_fields()), TIMEOUT)

    def update(group: str, topic: str, qid: int, offset: int) -> RemotingCommand:
        return RemotingCommand.create_request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=qid,
                                              commit_offset=offset).to_ext_fields())

    # A new group on a young (here: empty) queue starts at 0.
    r = await query("NewGroup", "OffTopic", 0)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields == {"offset": "0"}
    r = await client.invoke(addr, update("G1", "OffTopic", 0, 7), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields == {}
    assert (await query("G1", "OffTopic", 0)).ext_fields == {"offset": "7"}
    await client.invoke_oneway(addr, update("G1", "OffTopic", 1, 11), TIMEOUT)
    # Requests on one connection are handled in order: the query sees the oneway update.
    assert (await query("G1", "OffTopic", 1)).ext_fields == {"offset": "11"}
    # The COMMIT_OFFSET pull flag stores the offset too.
    assert (await send(client, addr, "OffTopic", b"m")).code == ResponseCode.SUCCESS
    r = await pull(client, addr, "G1", "OffTopic", 0, 0,
                   sys_flag=PullSysFlag.SUBSCRIPTION | PullSysFlag.COMMIT_OFFSET, commit_offset=3)
    assert r.code == ResponseCode.SUCCESS
    assert (await query("G1", "OffTopic", 0)).ext_fields == {"offset": "3"}


async def test_offset_lookups_query_and_view(broker: ServerProcess, client: RemotingClient) -> None:
    addr = broker.address
    topic = "LookTopic"
    before = int(time.time() * 1000) - 1
    ids = []
    for i in range(3):
        r = await send(client, addr, topic, f"m{i}".encode(), props={
            "KEYS": f"key{i} shared", "UNIQ_KEY": f"UNIQ{i:028d}", "WAIT": "true"})
        assert r.code == ResponseCode.SUCCESS
        ids.append(SendMessageResponseHeader.from_ext_fields(r.ext_fields).msg_id)

    async def call(code: int, ext: dict[str, str]) -> RemotingCommand:
        return await client.invoke(addr, RemotingCommand.create_request(code, ext), TIMEOUT)

    r = await call(RequestCode.GET_MAX_OFFSET,
                   GetMaxOffsetRequestHeader(topic=topic, queue_id=0).to_ext_fields())
    assert r.ext_fields == {"offset": "3"}
    r = await call(RequestCode.GET_MIN_OFFSET,
                   GetMinOffsetRequestHeader(topic=topic, queue_id=0).to_ext_fields())
    assert r.ext_fields == {"offset": "0"}
    r = await call(RequestCode.GET_MAX_OFFSET,
                   GetMaxOffsetRequestHeader(topic=topic, queue_id=3).to_ext_fields())
    assert r.ext_fields == {"offset": "0"}
    r = await call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                   SearchOffsetRequestHeader(topic=topic, queue_id=0, timestamp=before).to_ext_fields())
    assert r.code == ResponseCode.SUCCESS and r.ext_fields == {"offset": "0"}
    r = await call(RequestCode.GET_EARLIEST_MSG_STORETIME,
                   GetEarliestMsgStoretimeRequestHeader(topic=topic, queue_id=0).to_ext_fields())
    first = decode_messages((await pull(client, addr, "CG", topic, 0, 0)).body)[0]
    assert r.ext_fields == {"timestamp": str(first.store_timestamp)}

    def query(key: str, unique: bool) -> dict[str, str]:
        return QueryMessageRequestHeader(topic=topic, key=key, max_num=64, begin_timestamp=0,
                                         end_timestamp=2 ** 63 - 1,
                                         unique_key_query=unique).to_ext_fields()

    r = await call(RequestCode.QUERY_MESSAGE, query("shared", False))
    assert r.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in decode_messages(r.body)) == [b"m0", b"m1", b"m2"]
    assert r.ext_fields is not None and set(r.ext_fields) == {
        "indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}
    r = await call(RequestCode.QUERY_MESSAGE, query("UNIQ" + "1".zfill(28), True))
    assert [m.body for m in decode_messages(r.body)] == [b"m1"]
    r = await call(RequestCode.QUERY_MESSAGE, query("nothing", False))
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                  "can not find message, maybe time range not correct")

    _, offset = decode_offset_msg_id(ids[2])
    r = await call(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset).to_ext_fields())
    assert r.code == ResponseCode.SUCCESS and r.ext_fields is None
    (msg,) = decode_messages(r.body)
    assert msg.body == b"m2" and msg.commit_log_offset == offset
    r = await call(RequestCode.VIEW_MESSAGE_BY_ID,
                   ViewMessageRequestHeader(offset=10 ** 12).to_ext_fields())
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  f"can not find message by the offset, {10 ** 12}")


async def test_update_and_create_topic(broker: ServerProcess, namesrv: ServerProcess,
                                       client: RemotingClient) -> None:
    addr = broker.address

    def create(topic: str) -> RemotingCommand:
        h = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=2,
                                     write_queue_nums=3, perm=6, topic_filter_type="SINGLE_TAG",
                                     topic_sys_flag=0, order=False)
        return RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext_fields())

    r = await client.invoke(addr, create("AdminTopic"), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, "not set any response code")
    # Registered (two-way) before the answer: the route is there at once.
    rr = await route(client, namesrv.address, "AdminTopic")
    assert rr.code == ResponseCode.SUCCESS
    await wait_for_route(client, namesrv.address, "TBW102")  # other routes kept
    r = await client.invoke(addr, create("TBW102"), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The topic[TBW102] is conflict with system topic.")
    r = await client.invoke(addr, create("bad topic"), TIMEOUT)
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await send(client, addr, "AdminTopic", b"x", queue_id=2)
    assert r.code == ResponseCode.SUCCESS
    r = await pull(client, addr, "CG", "AdminTopic", 2, 0)
    assert r.code == ResponseCode.SYSTEM_ERROR  # queue 2 >= readQueueNums 2
    r = await pull(client, addr, "CG", "AdminTopic", 1, 0)
    assert r.code == ResponseCode.PULL_NOT_FOUND and pull_header(r).max_offset == 0
