"""Advanced messaging on a real ``mqbroker``, raw protocol: delay levels, send-back / retry /
DLQ, transactions with check-back, order locks, request-reply, and broker restarts.

docs/PROTOCOL.md 4.7-4.9, 5.1, 6.4-6.6; the records and answers are compared with what the
4.9.7 broker produced in the vector scenarios ``delay``, ``sendback``, ``tx``, ``orderly``
and ``reply``. Intervals are shortened through broker.conf; every wait is on a condition
under a deadline (long-polling pulls, futures), never a sleep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.bodies import (
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    ProducerData,
    UnlockBatchRequestBody,
)
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import MessageSysFlag, PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from aiorocketmq.protocol.message import (
    MessageExt,
    create_uniq_id,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    decode_properties,
    encode_properties,
)
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, pull, pull_header
from tests.procs import ServerProcess, broker_process
from tests.vectors import frame

pytestmark = pytest.mark.timeout(180)

Factory = Callable[[ServerProcess], ServerProcess]
# Level 1 = 1 s and 2 = 2 s for the accuracy test; 3 (send-back's first level) = 1 s.
DELAY_LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
CONF = {"messageDelayLevel": DELAY_LEVELS, "transactionCheckInterval": "300",
        "transactionTimeOut": "1000"}
LONG_POLL = PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND


def start_broker(tmp_path: Path, namesrv: ServerProcess, factory: Factory,
                 name: str = "broker-adv", **conf: str) -> ServerProcess:
    return factory(broker_process(tmp_path, namesrv.address, name=name, conf={**CONF, **conf}))


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, props: dict[str, str],
               *, queue_id: int = 0, sys_flag: int = 0, group: str = "PG",
               code: int = RequestCode.SEND_MESSAGE_V2, reconsume_times: int | None = 0,
               max_reconsume_times: int | None = None) -> RemotingCommand:
    v1 = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties(props), reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times)
    ext = v1.to_ext_fields() if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE) \
        else SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields()
    return await client.invoke(addr, RemotingCommand.create_request(code, ext, body), TIMEOUT)


async def next_messages(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int,
                        *, within: float = 15.0) -> list[MessageExt]:
    """Long-poll ``topic``/``queue_id`` from ``offset`` until something arrives (deadline ``within``)."""
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"nothing arrived in {topic}/{queue_id} from offset {offset}"
        r = await pull(client, addr, "AdvReader", topic, queue_id, offset, sys_flag=LONG_POLL,
                       suspend_ms=int(min(left, 5.0) * 1000), timeout=left + TIMEOUT)
        if r.code == ResponseCode.SUCCESS:
            return decode_messages(r.body, decompress=False)
        if r.code == ResponseCode.PULL_OFFSET_MOVED:
            raise AssertionError(f"offset moved: {pull_header(r)}")


async def read_all(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    out: list[MessageExt] = []
    offset = 0
    while True:
        r = await pull(client, addr, "AdvReader", topic, queue_id, offset)
        if r.code != ResponseCode.SUCCESS:
            return out
        out.extend(decode_messages(r.body, decompress=False))
        offset = pull_header(r).next_begin_offset


async def heartbeat_producer(client: RemotingClient, addr: str, client_id: str, group: str) -> None:
    body = HeartbeatData(client_id=client_id, producer_data_set=[ProducerData(group)]).encode()
    r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.HEART_BEAT, None, body),
                            TIMEOUT)
    assert r.code == ResponseCode.SUCCESS


# -- delay levels (6.5) -------------------------------------------------------------------


async def test_delayed_messages_arrive_after_their_delay_with_upstream_properties(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    for level, qid in ((1, 1), (2, 3)):
        r = await send(client, addr, "VecDelay", f"level{level}".encode(),
                       {"DELAY": str(level), "WAIT": "true", "TAGS": "T"}, queue_id=qid)
        assert r.code == ResponseCode.SUCCESS, r.remark
        resp = SendMessageResponseHeader.from_ext_fields(r.ext_fields)
        assert resp.queue_id == qid  # as frame id 539 -> 541: the requested queue
        _, parked_offset = decode_offset_msg_id(resp.msg_id)
        view = await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(parked_offset)}), TIMEOUT)
        parked, _ = decode_message(view.body)
        assert parked.topic == "SCHEDULE_TOPIC_XXXX" and parked.queue_id == level - 1
        [delivered] = await next_messages(client, addr, "VecDelay", qid, 0)
        assert delivered.body == f"level{level}".encode()
        # Not before the due time (level 1 = 1 s, 2 = 2 s here); next_messages waited for it.
        waited = delivered.store_timestamp - parked.store_timestamp
        assert level * 1000 <= waited, waited
        # Frame id 595: DELAY, REAL_TOPIC, REAL_QID and WAIT stay in the delivered record.
        p = delivered.properties
        assert p["DELAY"] == str(level) and p["REAL_TOPIC"] == "VecDelay"
        assert p["REAL_QID"] == str(qid) and p["WAIT"] == "true" and p["TAGS"] == "T"
        assert delivered.commit_log_offset != parked_offset
    offsets = await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.GET_ALL_DELAY_OFFSET), TIMEOUT)
    assert offsets.code == ResponseCode.SUCCESS
    assert b'"offsetTable":{' in offsets.body and b"1:1" in offsets.body and b"2:1" in offsets.body


async def test_pending_delays_survive_a_restart_without_duplicates(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    first = start_broker(tmp_path, namesrv, server_factory, name="broker-dr",
                         messageDelayLevel="1s 30s " + " ".join(["1s"] * 16))
    r = await send(client, first.address, "DelayRestart", b"early", {"DELAY": "1"})
    assert r.code == ResponseCode.SUCCESS
    [early] = await next_messages(client, first.address, "DelayRestart", 0, 0)
    assert early.body == b"early"
    r = await send(client, first.address, "DelayRestart", b"pending", {"DELAY": "2"})
    assert r.code == ResponseCode.SUCCESS
    assert first.stop() == 0  # long before the 30 s of level 2
    second = start_broker(tmp_path, namesrv, server_factory, name="broker-dr",
                          messageDelayLevel="1s 1s " + " ".join(["1s"] * 16))
    [pending] = await next_messages(client, second.address, "DelayRestart", 0, 1)
    assert pending.body == b"pending"
    # The one delivered before the restart was not delivered again.
    assert [m.body for m in await read_all(client, second.address, "DelayRestart", 0)] == \
        [b"early", b"pending"]


# -- retry and DLQ (4.9, 6.4) ---------------------------------------------------------------


async def send_back(client: RemotingClient, addr: str, msg: MessageExt, group: str,
                    delay_level: int = 0, max_times: int | None = 16) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(
        offset=msg.commit_log_offset, group=group, delay_level=delay_level, origin_msg_id=msg.msg_id,
        origin_topic=msg.topic, max_reconsume_times=max_times, bname="broker-adv")
    return await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()), TIMEOUT)


async def test_send_back_retries_then_dead_letters(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    uniq = create_uniq_id()
    r = await send(client, addr, "VecRetry", b"fail me", {"UNIQ_KEY": uniq, "WAIT": "true"})
    assert r.code == ResponseCode.SUCCESS
    [original] = await next_messages(client, addr, "VecRetry", 0, 0)
    # First failure: delay level 0 -> 3 + 0 (frame ids 662 -> 680).
    back = await send_back(client, addr, original, "RetryGroup")
    assert back.code == ResponseCode.SUCCESS and not back.ext_fields
    [retry1] = await next_messages(client, addr, "%RETRY%RetryGroup", 0, 0)
    assert retry1.reconsume_times == 1 and retry1.body == b"fail me"
    p = retry1.properties
    assert p["RETRY_TOPIC"] == "VecRetry" and p["ORIGIN_MESSAGE_ID"] == original.offset_msg_id
    assert p["DELAY"] == "3" and p["REAL_TOPIC"] == "%RETRY%RetryGroup" and p["REAL_QID"] == "0"
    assert p["WAIT"] == "false" and p["UNIQ_KEY"] == uniq
    for attr in ("flag", "sys_flag", "born_timestamp", "born_host", "store_host"):
        assert getattr(retry1, attr) == getattr(original, attr), attr
    # Second failure: arrives a third time with reconsume times 2, same origin id.
    assert (await send_back(client, addr, retry1, "RetryGroup")).code == ResponseCode.SUCCESS
    [retry2] = await next_messages(client, addr, "%RETRY%RetryGroup", 0, 1)
    assert retry2.reconsume_times == 2 and retry2.properties["DELAY"] == "4"
    assert retry2.properties["ORIGIN_MESSAGE_ID"] == original.offset_msg_id
    assert retry2.properties["RETRY_TOPIC"] == "VecRetry"
    # Past the client's max (2): the DLQ, at once, readable there.
    assert (await send_back(client, addr, retry2, "RetryGroup", max_times=2)).code == 0
    [dead] = await next_messages(client, addr, "%DLQ%RetryGroup", 0, 0, within=5)
    assert dead.reconsume_times == 3 and dead.body == b"fail me" and dead.properties["DELAY"] == "0"
    # delayLevel -1 goes straight to the DLQ whatever the count.
    assert (await send_back(client, addr, original, "RetryGroup", delay_level=-1)).code == 0
    [_, direct] = await next_messages(client, addr, "%DLQ%RetryGroup", 0, 0, within=5)
    assert direct.reconsume_times == 1
    bad = await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.CONSUMER_SEND_MSG_BACK, ConsumerSendMsgBackRequestHeader(
            offset=10**12, group="RetryGroup", delay_level=0).to_ext_fields()), TIMEOUT)
    assert bad.code == ResponseCode.SYSTEM_ERROR
    assert bad.remark == f"look message by offset failed, {10**12}"


async def test_client_fallback_send_to_retry_topic_goes_to_dlq_past_max(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    r = await send(client, addr, "%RETRY%FallbackGroup", b"below", {"RETRY_TOPIC": "T"},
                   reconsume_times=1, max_reconsume_times=3)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in await read_all(client, addr, "%RETRY%FallbackGroup", 0)] == [b"below"]
    r = await send(client, addr, "%RETRY%FallbackGroup", b"past", {"RETRY_TOPIC": "T"},
                   reconsume_times=3, max_reconsume_times=3)
    assert r.code == ResponseCode.SUCCESS
    [dead] = await next_messages(client, addr, "%DLQ%FallbackGroup", 0, 0, within=5)
    assert dead.body == b"past" and dead.reconsume_times == 3


# -- transactions (4.8, 6.6) ----------------------------------------------------------------


class TxProducer:
    """A raw producer connection that records CHECK_TRANSACTION_STATE requests."""

    def __init__(self) -> None:
        self.client = RemotingClient()
        self.checks: asyncio.Queue[RemotingCommand] = asyncio.Queue(maxsize=64)
        self.client.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    def _on_check(self, channel: Channel, request: RemotingCommand) -> None:
        self.checks.put_nowait(request)

    async def half(self, addr: str, body: bytes, queue_id: int) -> SendMessageResponseHeader:
        r = await send(self.client, addr, "VecTxTopic", body,
                       {"TRAN_MSG": "true", "PGROUP": "TxGroup", "WAIT": "true",
                        "UNIQ_KEY": create_uniq_id()},
                       queue_id=queue_id, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
                       group="TxGroup")
        assert r.code == ResponseCode.SUCCESS, r.remark
        return SendMessageResponseHeader.from_ext_fields(r.ext_fields)

    async def end(self, addr: str, sent: SendMessageResponseHeader, kind: int, *, uniq: str,
                  from_check: bool = False) -> RemotingCommand:
        header = EndTransactionRequestHeader(
            producer_group="TxGroup", tran_state_table_offset=sent.queue_offset,
            commit_log_offset=decode_offset_msg_id(sent.msg_id)[1], commit_or_rollback=kind,
            from_transaction_check=from_check, msg_id=uniq,
            transaction_id=uniq if from_check else None, bname=None if from_check else "broker-adv")
        request = RemotingCommand.create_request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        # Two-way here so the test knows when the broker is done (the Java client uses oneway).
        return await self.client.invoke(addr, request, TIMEOUT)


async def test_commit_rollback_and_unknown_then_checked(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    producer = TxProducer()
    reader = RemotingClient()
    try:
        await heartbeat_producer(producer.client, addr, "tx-client", "TxGroup")
        halves = [await producer.half(addr, f"tx{i}".encode(), i + 1) for i in range(3)]
        assert [h.queue_id for h in halves] == [1, 2, 3]  # frame ids 813, 816, 819
        assert [h.queue_offset for h in halves] == [0, 1, 2]
        uniqs = []
        for h in halves:
            view = await reader.invoke(addr, RemotingCommand.create_request(
                RequestCode.VIEW_MESSAGE_BY_ID,
                {"offset": str(decode_offset_msg_id(h.msg_id)[1])}), TIMEOUT)
            half, _ = decode_message(view.body)
            assert half.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and half.sys_flag == 0
            uniqs.append(half.properties["UNIQ_KEY"])
        commit = await producer.end(addr, halves[0], MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                                    uniq=uniqs[0])
        assert commit.code == ResponseCode.SUCCESS, commit.remark
        rollback = await producer.end(addr, halves[1], MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
                                      uniq=uniqs[1])
        assert rollback.code == ResponseCode.SUCCESS
        [committed] = await next_messages(reader, addr, "VecTxTopic", 1, 0)
        # Frame id 856: SYSFLAG 8, prepared offset = the half record, TRAN_MSG/PGROUP/REAL_* kept.
        assert committed.sys_flag == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        assert committed.prepared_transaction_offset == decode_offset_msg_id(halves[0].msg_id)[1]
        p = committed.properties
        assert p["TRAN_MSG"] == "true" and p["PGROUP"] == "TxGroup" and p["WAIT"] == "true"
        assert p["REAL_TOPIC"] == "VecTxTopic" and p["REAL_QID"] == "1"
        # The third stays unknown: the broker re-appends it and asks (frame ids 820, 823).
        check = await asyncio.wait_for(producer.checks.get(), 20)
        assert set(check.ext_fields or {}) == {"tranStateTableOffset", "commitLogOffset", "msgId",
                                               "transactionId", "offsetMsgId"}
        assert set(frame(823)["header"]["extFields"]) == set(check.ext_fields or {})
        ch = CheckTransactionStateRequestHeader.from_ext_fields(check.ext_fields)
        assert ch.msg_id == ch.transaction_id == uniqs[2]
        assert ch.tran_state_table_offset == 3  # the copy, not the original at 2
        assert decode_offset_msg_id(ch.offset_msg_id or "")[1] == ch.commit_log_offset
        body, _ = decode_message(check.body)
        assert body.topic == "VecTxTopic" and body.queue_id == 3 and body.queue_offset == 3
        assert body.commit_log_offset == ch.commit_log_offset and body.sys_flag == 0
        assert body.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert body.properties["WAIT"] == "false"
        copy_sent = SendMessageResponseHeader(msg_id=ch.offset_msg_id or "", queue_id=3,
                                              queue_offset=ch.tran_state_table_offset)
        answer = await producer.end(addr, copy_sent, MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                                    uniq=uniqs[2], from_check=True)
        assert answer.code == ResponseCode.SUCCESS
        [checked] = await next_messages(reader, addr, "VecTxTopic", 3, 0)
        assert checked.body == b"tx2" and checked.prepared_transaction_offset == ch.commit_log_offset
        assert checked.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert await read_all(reader, addr, "VecTxTopic", 2) == []  # rolled back
        wrong_group = EndTransactionRequestHeader(
            producer_group="OtherGroup", tran_state_table_offset=halves[1].queue_offset,
            commit_log_offset=decode_offset_msg_id(halves[1].msg_id)[1],
            commit_or_rollback=MessageSysFlag.TRANSACTION_COMMIT_TYPE, msg_id=uniqs[1])
        r = await producer.client.invoke(addr, RemotingCommand.create_request(
            RequestCode.END_TRANSACTION, wrong_group.to_ext_fields()), TIMEOUT)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    finally:
        await producer.client.close()
        await reader.close()


async def test_half_message_survives_restart_and_is_checked_by_a_new_producer(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    first = start_broker(tmp_path, namesrv, server_factory, name="broker-tx",
                         transactionCheckInterval="600000")
    producer = TxProducer()
    half = await producer.half(first.address, b"survivor", 0)
    await producer.client.close()
    assert first.stop() == 0
    second = start_broker(tmp_path, namesrv, server_factory, name="broker-tx")
    restarted = TxProducer()
    reader = RemotingClient()
    try:
        await heartbeat_producer(restarted.client, second.address, "tx-client-2", "TxGroup")
        check = await asyncio.wait_for(restarted.checks.get(), 20)
        ch = CheckTransactionStateRequestHeader.from_ext_fields(check.ext_fields)
        assert ch.tran_state_table_offset > half.queue_offset
        sent = SendMessageResponseHeader(msg_id=ch.offset_msg_id or "", queue_id=0,
                                         queue_offset=ch.tran_state_table_offset)
        r = await restarted.end(second.address, sent, MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                                uniq=ch.msg_id or "", from_check=True)
        assert r.code == ResponseCode.SUCCESS
        [msg] = await next_messages(reader, second.address, "VecTxTopic", 0, 0)
        assert msg.body == b"survivor"
    finally:
        await restarted.client.close()
        await reader.close()


# -- order locks (4.7) ----------------------------------------------------------------------


async def test_lock_batch_gives_each_queue_to_one_client(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    mqs = [MessageQueue("VecOrderTopic", "broker-adv", i) for i in range(2)]

    async def lock(client_id: str, queues: list[MessageQueue]) -> list[MessageQueue]:
        body = LockBatchRequestBody("OrderGroup", client_id, queues).encode()
        r = await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.LOCK_BATCH_MQ, None, body), TIMEOUT)
        assert r.code == ResponseCode.SUCCESS
        return LockBatchResponseBody.decode(r.body).lock_ok_mq_set

    assert sorted(await lock("client-a", mqs)) == mqs
    assert await lock("client-b", mqs) == []
    assert sorted(await lock("client-a", mqs)) == mqs  # re-lock by the holder
    unlock = UnlockBatchRequestBody("OrderGroup", "client-a", mqs[:1]).encode()
    r = await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.UNLOCK_BATCH_MQ, None, unlock), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS and not r.body  # frame id 793: bare SUCCESS
    assert await lock("client-b", mqs) == mqs[:1]
    # The captured 4.9.7 request body decodes and is answered in the captured shape.
    captured = bytes.fromhex(frame(735)["body_hex"])
    r = await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.LOCK_BATCH_MQ, None, captured), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS and r.body.startswith(b'{"lockOKMQSet":[')


# -- request-reply (3.5) --------------------------------------------------------------------


async def test_reply_is_pushed_to_the_requester_and_stored(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    requester = RemotingClient()
    pushed: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

    def on_push(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        pushed.set_result(request)
        return request.create_response(ResponseCode.SUCCESS)

    requester.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, on_push)
    try:
        await heartbeat_producer(requester, addr, "192.0.2.2@requester", "RequestGroup")
        props = {"MSG_TYPE": "reply", "REPLY_TO_CLIENT": "192.0.2.2@requester", "TTL": "3000",
                 "CORRELATION_ID": "corr-1", "UNIQ_KEY": create_uniq_id()}
        r = await send(client, addr, "DefaultCluster_REPLY_TOPIC", b"the answer", props,
                       code=RequestCode.SEND_REPLY_MESSAGE_V2, group="Responder")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert set(r.ext_fields or {}) == set(frame(1316)["header"]["extFields"])
        assert r.ext_fields["msgId"] != "0"
        push = await asyncio.wait_for(pushed, TIMEOUT)
        assert set(push.ext_fields or {}) == set(frame(1314)["header"]["extFields"])
        h = ReplyMessageRequestHeader.from_ext_fields(push.ext_fields)
        assert h.topic == "DefaultCluster_REPLY_TOPIC" and h.producer_group == "Responder"
        assert h.store_host == addr and h.born_host.startswith("127.0.0.1:")
        assert push.body == b"the answer"
        pp = decode_properties(h.properties or "")
        assert pp["CORRELATION_ID"] == "corr-1" and "PUSH_REPLY_TIME" in pp
        [stored] = await read_all(client, addr, "DefaultCluster_REPLY_TOPIC", 0)
        assert stored.body == b"the answer" and "CLUSTER" not in stored.properties
        props["REPLY_TO_CLIENT"] = "nobody"
        lost = await send(client, addr, "DefaultCluster_REPLY_TOPIC", b"x", props,
                          code=RequestCode.SEND_REPLY_MESSAGE_V2, group="Responder")
        assert lost.code == ResponseCode.SYSTEM_ERROR
        assert lost.remark == "push reply message fail, channel of <nobody> not found."
    finally:
        await requester.close()
