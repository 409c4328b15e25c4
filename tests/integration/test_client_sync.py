"""The synchronous facade: its own loop thread, blocking calls, clean exit."""

from __future__ import annotations

import threading

import pytest

from aiorocketmq.client import Message, PullStatus, SendStatus
from aiorocketmq.client.sync import SyncLitePullConsumer, SyncProducer, SyncPullConsumer
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_sync_producer_and_consumers(namesrv: ServerProcess, broker: ServerProcess) -> None:
    before = threading.active_count()
    with SyncProducer("PG_sync", namesrv.address, default_topic_queue_nums=1) as producer:
        results = [producer.send(Message("ClientSyncT", f"s{i}".encode())) for i in range(3)]
        producer.send_oneway(Message("ClientSyncT", b"s3"))
    assert all(r.status is SendStatus.SEND_OK for r in results)
    with SyncPullConsumer("CG_sync", namesrv.address) as consumer:
        mq = consumer.fetch_subscribe_message_queues("ClientSyncT")[0]
        assert consumer.get_max_offset(mq) == 4
        res = consumer.pull(mq, "*", 0, 32)
        assert res.status is PullStatus.FOUND
        assert [m.body for m in res.msg_found_list] == [b"s0", b"s1", b"s2", b"s3"]
    lite = SyncLitePullConsumer("CG_sync_lite", namesrv.address)
    lite.assign([mq])
    with lite:
        lite.seek(mq, 2)
        got = []
        for _ in range(30):
            got.extend(m.body for m in lite.poll(1.0))
            if len(got) >= 2:
                break
        assert got[:2] == [b"s2", b"s3"]
    assert threading.active_count() == before  # every loop thread has exited
