"""Issue #18's hostile requests sent to a stock 4.9.7 broker / nameserver and to ours.

Where stock has a refusal (TopicValidator), our code and remark must be its. Where stock
answers SUCCESS and stores the value (and is harmed by it, or harms its clients: see
``protocol.validation`` and ``server.broker.config_update``), we refuse on purpose: the
test records stock's answer as evidence and checks that ours is SYSTEM_ERROR naming the
field. Afterwards both brokers still answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from tests.hostile import raw_invoke
from tests.interop.stock import JavaServer
from tests.procs import ServerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SAME = "same"  # stock refuses too: same code and remark
OURS_REFUSE = "ours_refuse"  # stock answers SUCCESS; we refuse naming the field


def topic_ext(topic: str, *, read: int = 4, write: int = 4, perm: int = 6) -> dict[str, str]:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read),
            "writeQueueNums": str(write), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"}


# (id, target, code, extFields, body, expectation, text our remark must contain)
CASES: list[tuple[str, str, int, dict[str, Any] | None, bytes, str, str]] = [
    ("offset-surrogate-group", "broker", RequestCode.UPDATE_CONSUMER_OFFSET,
     {"consumerGroup": "G\ud800", "topic": "HostileT", "queueId": "0", "commitOffset": "1"},
     b"", OURS_REFUSE, "consumerGroup"),
    ("kv-surrogate-value", "namesrv", RequestCode.PUT_KV_CONFIG,
     {"namespace": "NS", "key": "k", "value": "v\ud800"}, b"", OURS_REFUSE, "value"),
    ("topic-2e9-queues", "broker", RequestCode.UPDATE_AND_CREATE_TOPIC,
     topic_ext("HugeQ", write=2_000_000_000), b"", OURS_REFUSE, "writeQueueNums"),
    ("topic-perm-32", "broker", RequestCode.UPDATE_AND_CREATE_TOPIC,
     topic_ext("Perm32", perm=32), b"", OURS_REFUSE, "perm"),
    ("config-cq-segment", "broker", RequestCode.UPDATE_BROKER_CONFIG, None,
     b"mappedFileSizeConsumeQueue=6000\n", OURS_REFUSE, "mappedFileSizeConsumeQueue"),
    ("config-unknown-key", "broker", RequestCode.UPDATE_BROKER_CONFIG, None,
     b"noSuchKey=1\n", OURS_REFUSE, "noSuchKey"),
    ("config-bad-int", "broker", RequestCode.UPDATE_BROKER_CONFIG, None,
     b"defaultTopicQueueNums=abc\n", OURS_REFUSE, "defaultTopicQueueNums"),
    ("topic-illegal-chars", "broker", RequestCode.UPDATE_AND_CREATE_TOPIC,
     topic_ext("bad topic"), b"", SAME, ""),
    ("topic-too-long", "broker", RequestCode.UPDATE_AND_CREATE_TOPIC,
     topic_ext("T" * 128), b"", SAME, ""),
    ("topic-system", "broker", RequestCode.UPDATE_AND_CREATE_TOPIC,
     topic_ext("SCHEDULE_TOPIC_XXXX"), b"", SAME, ""),
    ("topic-blank", "broker", RequestCode.UPDATE_AND_CREATE_TOPIC,
     topic_ext("   "), b"", SAME, ""),
    # Last: it breaks every later send of the stock broker (CommitLog.submitFlushRequest
    # casts the running ASYNC flush service to GroupCommitService).
    ("config-sync-flush", "broker", RequestCode.UPDATE_BROKER_CONFIG, None,
     b"flushDiskType=SYNC_FLUSH\n", OURS_REFUSE, "flushDiskType"),
]


async def test_hostile_requests_against_stock_and_ours(
        stock_cluster: tuple[JavaServer, JavaServer], namesrv: ServerProcess,
        broker: ServerProcess) -> None:
    stock_ns, stock_br = stock_cluster
    targets = {"stock": {"broker": stock_br.address, "namesrv": stock_ns.address},
               "ours": {"broker": broker.address, "namesrv": namesrv.address}}
    seen: list[str] = []
    for case_id, target, code, ext, body, expectation, field in CASES:
        stock = await raw_invoke(targets["stock"][target], code, ext, body)
        ours = await raw_invoke(targets["ours"][target], code, ext, body)
        seen.append(f"{case_id}: stock {stock.code} {stock.remark!r} / ours {ours.code} "
                    f"{ours.remark!r}")
        if expectation == SAME:
            assert stock.code == ResponseCode.SYSTEM_ERROR, seen[-1]
            assert (ours.code, ours.remark) == (stock.code, stock.remark), seen[-1]
        else:
            assert stock.code == ResponseCode.SUCCESS, seen[-1]
            assert ours.code == ResponseCode.SYSTEM_ERROR, seen[-1]
            assert field in (ours.remark or ""), seen[-1]
    print("\n".join(seen))
    for name, addrs in targets.items():
        alive = await raw_invoke(addrs["broker"], RequestCode.GET_BROKER_CONFIG, None)
        assert alive.code == ResponseCode.SUCCESS, name
