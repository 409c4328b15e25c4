"""Our TransactionProducer and RequestProducer against a real ``mqbroker``.

Transactions (docs/PROTOCOL.md 4.8, 6.6): commit is delivered, rollback never, unknown is
settled by the broker's check-back, also when the producer that sent the half message is
gone and a new member of its group answers. Request-reply (3.5): a request round trip
through SEND_REPLY_MESSAGE_V2 and PUSH_REPLY_MESSAGE_TO_CLIENT.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client.request_reply import (
    RequestProducer,
    RequestTimeoutError,
    create_reply_message,
)
from aiorocketmq.client.transaction_producer import LocalTransactionState, TransactionProducer
from aiorocketmq.protocol.codes import MessageSysFlag
from aiorocketmq.protocol.message import Message, MessageExt
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_advanced_broker import next_messages, read_all, start_broker
from tests.procs import ServerProcess

pytestmark = pytest.mark.timeout(180)

Factory = Callable[[ServerProcess], ServerProcess]
S = LocalTransactionState


async def test_transaction_producer_commit_rollback_unknown_and_check_after_restart(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    reader = RemotingClient()
    decided = {b"commit": S.COMMIT_MESSAGE, b"rollback": S.ROLLBACK_MESSAGE, b"unknown": S.UNKNOW,
               b"fails": S.COMMIT_MESSAGE}
    executed: list[bytes] = []

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        executed.append(msg.body)
        assert arg == "arg" and msg.transaction_id
        if msg.body == b"fails":
            raise RuntimeError("local transaction blew up")  # counts as UNKNOW
        return decided[msg.body]

    first = TransactionProducer("TxClientGroup", namesrv.address, execute_local_transaction=execute,
                                check_local_transaction=lambda msg: S.UNKNOW)
    try:
        await first.start()
        results = {}
        for body in decided:
            msg = Message("TxClientTopic", body)
            results[body] = await first.send_message_in_transaction(msg, "arg")
        assert executed == list(decided)
        assert results[b"fails"].local_transaction_state is S.UNKNOW
        assert results[b"commit"].local_transaction_state is S.COMMIT_MESSAGE
        q = results[b"commit"].send_result.message_queue.queue_id
        [committed] = await next_messages(reader, broker.address, "TxClientTopic", q, 0)
        assert committed.body == b"commit"
        assert committed.sys_flag & 0xC == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        await first.shutdown()  # the producer that ran the unknown transactions is gone

        asked: list[bytes] = []

        async def check(msg: MessageExt) -> LocalTransactionState:
            asked.append(msg.body)
            return S.COMMIT_MESSAGE if msg.body == b"unknown" else S.ROLLBACK_MESSAGE

        second = TransactionProducer("TxClientGroup", namesrv.address,
                                     execute_local_transaction=execute,
                                     check_local_transaction=check)
        await second.start()
        try:
            # Route + heartbeat make this client a member the broker can ask.
            assert second.instance is not None
            await second.instance.update_topic_route("TxClientTopic")
            await second.instance.send_heartbeat_to_all_brokers()
            q = results[b"unknown"].send_result.message_queue.queue_id
            [checked] = await next_messages(reader, broker.address, "TxClientTopic", q,
                                            0 if q != results[b"commit"].send_result.message_queue.queue_id else 1,
                                            within=30)
            assert checked.body == b"unknown"
            assert checked.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert b"unknown" in asked
        finally:
            await second.shutdown()
        delivered = [m.body for qid in range(4)
                     for m in await read_all(reader, broker.address, "TxClientTopic", qid)]
        assert b"rollback" not in delivered and b"fails" not in delivered
        assert sorted(delivered) == [b"commit", b"unknown"]
    finally:
        await first.shutdown()
        await reader.close()


async def test_request_reply_round_trip(tmp_path: Path, namesrv: ServerProcess,
                                        server_factory: Factory) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    requester = RequestProducer("RequestGroup", namesrv.address)
    responder = RequestProducer("ResponderGroup", namesrv.address, instance_name="responder")
    reader = RemotingClient()
    await requester.start()
    await responder.start()
    try:
        pending = asyncio.create_task(requester.request(Message("ReqTopic", b"question"), 20.0))
        request_msg: MessageExt | None = None
        while request_msg is None:
            for qid in range(4):
                got = await read_all(reader, broker.address, "ReqTopic", qid)
                if got:
                    request_msg = got[0]
                    break
            else:
                assert not pending.done(), pending
                await asyncio.sleep(0.05)  # poll under the test timeout until the request lands
        assert request_msg.properties["REPLY_TO_CLIENT"] == requester.instance.client_id  # type: ignore[union-attr]
        assert request_msg.properties["TTL"] == "20000"
        reply = create_reply_message(request_msg, b"answer")
        assert reply.topic == "DefaultCluster_REPLY_TOPIC" and "WAIT" not in reply.properties
        await responder.send_reply(reply)
        got_reply = await asyncio.wait_for(pending, 20)
        assert got_reply.body == b"answer"
        p = got_reply.properties
        assert p["MSG_TYPE"] == "reply"
        assert p["CORRELATION_ID"] == request_msg.properties["CORRELATION_ID"]
        assert "PUSH_REPLY_TIME" in p and "ARRIVE_TIME" in p
        with pytest.raises(RequestTimeoutError):
            await requester.request(Message("ReqTopic", b"nobody answers"), 0.5)
    finally:
        await responder.shutdown()
        await requester.shutdown()
        await reader.close()
