"""Trace records as upstream 4.9.7 ``TraceDataEncoder`` writes and reads them, the
dispatcher's bounded queue, and ``queryMsgTraceById``'s printout (client/trace)."""

from __future__ import annotations

import time

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.trace import AsyncTraceDispatcher, TraceBean, TraceContext, TraceType
from aiorocketmq.client.trace.data import MessageType, TraceView, decode, encode, trace_views
from aiorocketmq.client.trace.dispatcher import QUEUE_SIZE
from aiorocketmq.client.trace.query import format_trace_views

C, F = "\x01", "\x02"


def test_pub_encoded_as_upstream() -> None:
    ctx = TraceContext(TraceType.Pub, 1700000000123, "DefaultRegion", "PG", cost_time=3,
                       beans=[TraceBean(topic="T", msg_id="ID1", offset_msg_id="OFF1", tags=None,
                                        keys="k1 k2", store_host="127.0.0.1:10911",
                                        body_length=5, msg_type=MessageType.Normal_Msg)])
    data, keys = encode(ctx)
    assert data == C.join(["Pub", "1700000000123", "DefaultRegion", "PG", "T", "ID1", "null",
                           "k1 k2", "127.0.0.1:10911", "5", "3", "0", "OFF1", "true"]) + F
    assert keys == ["ID1", "k1", "k2"]
    back = decode(data)[0]
    assert (back.trace_type, back.time_stamp, back.group_name, back.cost_time, back.success) == (
        TraceType.Pub, 1700000000123, "PG", 3, True)
    assert back.beans[0].offset_msg_id == "OFF1" and back.beans[0].tags == "null"


def test_sub_records_encoded_as_upstream() -> None:
    beans = [TraceBean(msg_id="A", keys=None, retry_times=0), TraceBean(msg_id="B", keys="kb",
                                                                        retry_times=2)]
    before = TraceContext(TraceType.SubBefore, 1, None, "CG", request_id="REQ", beans=beans)
    data, keys = encode(before)
    assert data == (C.join(["SubBefore", "1", "null", "CG", "REQ", "A", "0", "null"]) + F
                    + C.join(["SubBefore", "1", "null", "CG", "REQ", "B", "2", "kb"]) + F)
    assert keys == ["A", "B", "kb"]
    after = TraceContext(TraceType.SubAfter, 9, None, "CG", cost_time=4, success=False,
                         request_id="REQ", context_code=4, beans=beans[:1])
    data, _ = encode(after)
    assert data == C.join(["SubAfter", "REQ", "A", "4", "false", "null", "4", "9", "CG"]) + F
    back = decode(data)[0]
    assert (back.request_id, back.cost_time, back.success, back.context_code, back.time_stamp,
            back.group_name) == ("REQ", 4, False, 4, 9, "CG")


def test_end_transaction_encoded_as_upstream() -> None:
    ctx = TraceContext(TraceType.EndTransaction, 5, "DefaultRegion", "TPG", beans=[TraceBean(
        topic="T", msg_id="M", tags="TagA", keys=None, store_host="h:1",
        msg_type=MessageType.Trans_msg_Commit, transaction_id="TX", transaction_state="COMMIT_MESSAGE",
        from_transaction_check=True)])
    data, _ = encode(ctx)
    assert data == C.join(["EndTransaction", "5", "DefaultRegion", "TPG", "T", "M", "TagA", "null",
                           "h:1", "2", "TX", "COMMIT_MESSAGE", "true"]) + F
    back = decode(data)[0]
    assert back.beans[0].transaction_state == "COMMIT_MESSAGE" and back.beans[0].from_transaction_check


def test_decode_reads_older_and_malformed_bodies() -> None:
    old_pub = C.join(["Pub", "1", "R", "G", "T", "M", "t", "k", "h", "1", "2", "0", "true"]) + F
    short_sub_after = C.join(["SubAfter", "REQ", "M", "1", "true", "k"]) + F
    garbage = "Nope" + C + "x" + F + "Pub" + C + "notanumber" + F
    got = decode(old_pub + short_sub_after + garbage)
    assert [c.trace_type for c in got] == [TraceType.Pub, TraceType.SubAfter]
    assert got[0].success and got[1].group_name == ""


def test_trace_views_and_printout() -> None:
    pub = TraceContext(TraceType.Pub, 1700000000000, "R", "PG", cost_time=2,
                       beans=[TraceBean(topic="T", msg_id="M", offset_msg_id="O")])
    sub = TraceContext(TraceType.SubAfter, 1700000001000, None, "CG", cost_time=7,
                       beans=[TraceBean(msg_id="M")])
    other = TraceContext(TraceType.SubAfter, 1700000001000, None, "CG",
                         beans=[TraceBean(msg_id="OTHER")])
    body = "".join(encode(c)[0] for c in (pub, sub, other)).encode()
    views = trace_views("M", body, "10.0.0.1")
    assert [(v.msg_type, v.group_name, v.client_host, v.status) for v in views] == [
        ("Pub", "PG", "10.0.0.1", "success"), ("SubAfter", "CG", "10.0.0.1", "success")]
    text = format_trace_views(views)
    t0 = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1700000000))
    t1 = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1700000001))
    row = "%-10s %-20s %-20s %-20s %-10s %-10s\n"
    assert text == (row % ("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes",
                           "#Status")
                    + row % ("Pub", "PG", "10.0.0.1", t0, "2ms", "success") + "\n"
                    + row % ("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime",
                             "#CostTimes", "#Status")
                    + row % ("Sub", "CG", "10.0.0.1", t1, "7ms", "success") + "\n")


def test_consumer_groups_printed_in_hashmap_order() -> None:
    views = [TraceView("SubAfter", "M", g, "h", 0, 1, "success") for g in ("zeta", "alpha", "CG_b")]
    text = format_trace_views(views)
    from aiorocketmq.protocol.javautil import java_hashmap_order

    order = [line.split()[1] for line in text.splitlines() if line.startswith("Sub ")]
    assert order == java_hashmap_order(["zeta", "alpha", "CG_b"])


async def test_append_never_blocks_and_counts_drops() -> None:
    d = AsyncTraceDispatcher("G", "PRODUCE", None, ClientConfig(namesrv_addr="127.0.0.1:1"))
    ctx = TraceContext(TraceType.Pub, beans=[TraceBean()])
    assert not d.append(ctx) and d.dropped == 1  # not started
    d._running = True  # the queue alone, without a producer or routine
    assert all(d.append(ctx) for _ in range(QUEUE_SIZE))
    assert not d.append(ctx) and d.dropped == 2
    assert d.trace_topic == "RMQ_SYS_TRACE_TOPIC"


@pytest.mark.parametrize("topic", ["MyTrace", None])
def test_custom_trace_topic(topic: str | None) -> None:
    d = AsyncTraceDispatcher("G", "CONSUME", topic, ClientConfig())
    assert d.trace_topic == (topic or "RMQ_SYS_TRACE_TOPIC")
