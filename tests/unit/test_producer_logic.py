"""Producer pure logic: validators, publish info from routes, queue choice, fault strategy,
selectors."""

from __future__ import annotations

import pytest

from aiorocketmq.client.producer import (
    LatencyFaultTolerance,
    MQFaultStrategy,
    SelectMessageQueueByHash,
    TopicPublishInfo,
    Validators,
    route_to_publish_info,
)
from aiorocketmq.protocol.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import Message


def route(*brokers: tuple[str, int, int, bool]) -> TopicRouteData:
    """(name, write queues, perm, has master) per broker."""
    r = TopicRouteData()
    for name, nums, perm, master in brokers:
        r.queue_datas.append(QueueData(broker_name=name, read_queue_nums=nums,
                                       write_queue_nums=nums, perm=perm))
        addrs = {0: f"{name}:10911"} if master else {1: f"{name}-s:10911"}
        r.broker_datas.append(BrokerData(cluster="c", broker_name=name, broker_addrs=addrs))
    return r


def test_validators_upstream_texts() -> None:
    Validators.check_topic("Topic_A-1%x|y")
    with pytest.raises(MQClientError, match="The specified topic is blank"):
        Validators.check_topic("  ")
    with pytest.raises(MQClientError, match="longer than topic max length 127"):
        Validators.check_topic("t" * 128)
    with pytest.raises(MQClientError, match=r"contains illegal characters"):
        Validators.check_topic("a b")
    with pytest.raises(MQClientError, match="group is blank"):
        Validators.check_group("")
    with pytest.raises(MQClientError, match="group max length 255"):
        Validators.check_group("g" * 256)
    with pytest.raises(MQClientError, match="body length is zero"):
        Validators.check_message(Message("T", b""), 10)
    with pytest.raises(MQClientError, match="over max value, MAX: 10"):
        Validators.check_message(Message("T", b"x" * 11), 10)
    with pytest.raises(MQClientError, match="is forbidden"):
        Validators.check_message(Message("SCHEDULE_TOPIC_XXXX", b"x"), 10)


def test_route_to_publish_info_writable_masters_sorted() -> None:
    r = route(("b", 2, 6, True), ("a", 3, 6, True), ("ro", 4, 4, True), ("slave", 2, 6, False))
    info = route_to_publish_info("T", r)
    assert info.message_queue_list == [MessageQueue("T", "a", i) for i in range(3)] + [
        MessageQueue("T", "b", i) for i in range(2)]
    assert not info.order_topic
    ordered = TopicRouteData(order_topic_conf="a:2;b:1")
    info = route_to_publish_info("T", ordered)
    assert info.order_topic
    assert info.message_queue_list == [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1),
                                       MessageQueue("T", "b", 0)]


def test_round_robin_avoids_last_failed_broker() -> None:
    info = route_to_publish_info("T", route(("a", 2, 6, True), ("b", 2, 6, True)))
    picks = [info.select_one_message_queue() for _ in range(8)]
    assert {q.queue_id for q in picks} == {0, 1} and len(set(picks)) == 4
    for _ in range(20):
        assert info.select_one_message_queue("a").broker_name == "b"
    single = route_to_publish_info("T", route(("a", 2, 6, True)))
    assert single.select_one_message_queue("a").broker_name == "a"  # no other broker


def test_fault_strategy_isolates_slow_broker() -> None:
    now = [0.0]
    strategy = MQFaultStrategy(True, LatencyFaultTolerance(lambda: now[0]))
    assert strategy.compute_not_available_duration(40) == 0
    assert strategy.compute_not_available_duration(600) == 30000
    assert strategy.compute_not_available_duration(20000) == 600000
    info = route_to_publish_info("T", route(("a", 2, 6, True), ("b", 2, 6, True)))
    strategy.update_fault_item("a", 0, isolation=True)  # 30 s -> 600 s out
    for _ in range(10):
        assert strategy.select_one_message_queue(info, None).broker_name == "b"
    now[0] += 600_001
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(10)} == {"a", "b"}
    # every broker out: the least bad one is still used, with a valid queue id
    strategy.update_fault_item("a", 100, isolation=False)
    strategy.update_fault_item("b", 20000, isolation=False)
    strategy.update_fault_item("a", 3000, isolation=False)
    mq = strategy.select_one_message_queue(info, None)
    assert mq.broker_name in {"a", "b"} and 0 <= mq.queue_id < 2
    disabled = MQFaultStrategy(False)
    disabled.update_fault_item("a", 0, True)
    assert disabled.tolerance.is_available("a")


def test_select_by_hash_is_java_hash_code() -> None:
    mqs = [MessageQueue("T", "a", i) for i in range(4)]
    sel = SelectMessageQueueByHash()
    msg = Message("T", b"x")
    # "order-1".hashCode() == -1207111310 in Java; |-1207111310 % 4| == 2
    assert sel.select(mqs, msg, "order-1").queue_id == 2
    assert sel.select(mqs, msg, 7).queue_id == 3
    assert sel.select(mqs, msg, -7).queue_id == 3
    # Long.hashCode(2^40 + 5) == (int)(v ^ v >>> 32) == 5 ^ 256 == 261; 261 % 4 == 1
    assert sel.select(mqs, msg, 2**40 + 5).queue_id == 1


def test_empty_publish_info_not_ok() -> None:
    assert not TopicPublishInfo().ok()


def _batch_of(n: int, topic: str = "BatchT") -> list[Message]:
    return [Message(topic, b"body-%d" % i) for i in range(n)]


def test_batch_ids_namespace_and_body() -> None:
    from aiorocketmq.client.producer import Producer
    from aiorocketmq.protocol.message import decode_batch

    p = Producer("batch-logic", "127.0.0.1:9876", namespace="ns1")
    msgs = _batch_of(5)
    msgs[2].properties["UNIQ_KEY"] = "KEEP"
    msgs[3].properties["spark.topic"] = "x"
    batch, out = p._batch(msgs)
    assert out is msgs and batch.topic == "ns1%BatchT"
    assert all(m.topic == "ns1%BatchT" for m in msgs)
    ids = [m.properties["UNIQ_KEY"] for m in msgs]
    assert ids[2] == "KEEP" and len(set(ids)) == 5
    fresh = [i for i in ids if i != "KEEP"]
    assert all(len(i) == 32 for i in fresh)
    assert [int(i[-4:], 16) - int(fresh[0][-4:], 16) for i in fresh] == [0, 1, 2, 3]
    back = decode_batch(batch.body, topic=batch.topic)
    assert [(m.body, m.properties) for m in back] == [(m.body, m.properties) for m in msgs]


@pytest.mark.parametrize(("change", "text"), [
    (lambda ms: ms.clear(), "the message batch is empty"),
    (lambda ms: ms[1].properties.__setitem__("DELAY", "3"), "TimeDelayLevel is not supported"),
    (lambda ms: ms[2].properties.__setitem__("TIMER_DELAY_SEC", "3"),
     "Timer messages are not supported"),
    (lambda ms: ms[1].properties.__setitem__("WAIT", "false"), "waitStoreMsgOK"),
    (lambda ms: ms[0].properties.__setitem__("WAIT", "false"), "waitStoreMsgOK"),
    (lambda ms: setattr(ms[2], "topic", "Other"), "topic of the messages in one batch"),
    (lambda ms: [setattr(m, "topic", "%RETRY%g") for m in ms], "Retry Group is not supported"),
    (lambda ms: [setattr(m, "topic", "a b") for m in ms], "contains illegal characters"),
    (lambda ms: [setattr(m, "topic", "SCHEDULE_TOPIC_XXXX") for m in ms], "is forbidden"),
    (lambda ms: setattr(ms[2], "body", b""), "body length is zero"),
    (lambda ms: setattr(ms[0], "body", b""), "body length is zero"),
    (lambda ms: setattr(ms[3], "body", b"x" * 101), "over max value, MAX: 100"),
])
def test_batch_refusals(change: object, text: str) -> None:
    from aiorocketmq.client.producer import Producer

    p = Producer("batch-logic", "127.0.0.1:9876", max_message_size=100)
    msgs = _batch_of(4)
    change(msgs)  # type: ignore[operator]
    with pytest.raises(MQClientError, match=text):
        p._batch(msgs)
    assert all("UNIQ_KEY" not in m.properties for m in msgs)
