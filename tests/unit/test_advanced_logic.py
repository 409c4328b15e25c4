"""Pure parts of advanced messaging: lock table, retry/DLQ decision, delay table and offsets,
transaction op matching and record builders (docs/PROTOCOL.md 4.7-4.9, 6.4-6.6)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.protocol.bodies import MessageQueue, SubscriptionGroupConfig
from aiorocketmq.protocol.codes import MessageSysFlag
from aiorocketmq.protocol.headers import EndTransactionRequestHeader
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.server.broker.processors.end_transaction import check_prepare_message
from aiorocketmq.server.broker.processors.send_back import (
    build_send_back_message,
    decide_send_back,
    max_reconsume_times,
)
from aiorocketmq.server.broker.rebalance_lock import RebalanceLockManager
from aiorocketmq.server.broker.schedule import (
    compute_deliver_timestamp,
    correct_deliver_timestamp,
    decode_delay_offsets,
    encode_delay_offsets,
    message_timeup,
)
from aiorocketmq.server.broker.transaction import (
    build_remove_map,
    calculate_op_offset,
    end_message_transaction,
    make_op_message_inner,
    next_check_times,
    parse_half_message_inner,
    renew_half_message_inner,
)
from aiorocketmq.server.store.dispatcher import parse_delay_levels
from aiorocketmq.server.store.inner import MessageExtBrokerInner

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_lock_table_holder_refresh_expiry_and_unlock() -> None:
    clock = Clock()
    locks = RebalanceLockManager(clock_ms=clock)
    assert locks.try_lock_batch("G", [MQ0, MQ1], "a") == [MQ0, MQ1]
    assert locks.try_lock_batch("G", [MQ0, MQ1], "b") == []
    assert locks.try_lock_batch("other-group", [MQ0], "b") == [MQ0]  # per group
    clock.now += 60_000
    assert locks.try_lock_batch("G", [MQ0], "a") == [MQ0]  # refreshed at exactly 60 s
    clock.now += 60_001
    assert locks.holder("G", MQ1) is None  # expired after 60 s without re-lock
    assert locks.try_lock_batch("G", [MQ0, MQ1], "b") == [MQ0, MQ1]
    assert locks.unlock_batch("G", [MQ0, MQ1], "a") == 0  # not the holder: untouched
    assert locks.is_locked("G", MQ0, "b")
    assert locks.unlock_batch("G", [MQ0], "b") == 1
    assert locks.try_lock("G", MQ0, "a")
    clock.now += 120_000
    assert locks.remove_expired() == 3


@given(st.integers(0, 40), st.integers(-1, 18), st.integers(1, 32))
def test_send_back_decision(reconsume: int, level: int, max_times: int) -> None:
    d = decide_send_back("G", reconsume, level, max_times, 1, rand=lambda n: 7)
    if reconsume >= max_times or level < 0:
        assert (d.topic, d.queue_id, d.delay_level, d.dlq) == ("%DLQ%G", 0, 0, True)
    else:
        assert d.topic == "%RETRY%G" and not d.dlq
        assert d.delay_level == (level if level else 3 + reconsume)


def test_max_reconsume_times_from_header_only_for_new_clients() -> None:
    group = SubscriptionGroupConfig("G", retry_max_times=16)
    assert max_reconsume_times(group, 3, 121) == 3
    assert max_reconsume_times(group, 3, 120) == 16
    assert max_reconsume_times(group, None, 407) == 16


def stored(topic: str = "T", **props: str) -> MessageExt:
    return MessageExt(topic, b"body", 5, props, queue_id=2, queue_offset=7, sys_flag=0,
                      born_timestamp=111, born_host="10.0.0.1:1234", store_timestamp=222,
                      store_host="127.0.0.1:10911", commit_log_offset=22965, reconsume_times=1)


def test_send_back_record_like_frame_680() -> None:
    msg = stored(UNIQ_KEY="U1", WAIT="true", CLUSTER="C")
    inner = build_send_back_message(msg, decide_send_back("G", 1, 0, 16, 1, rand=lambda n: 0))
    assert inner.topic == "%RETRY%G" and inner.reconsume_times == 2
    p = inner.properties
    assert p["RETRY_TOPIC"] == "T" and p["ORIGIN_MESSAGE_ID"] == msg.offset_msg_id
    assert p["DELAY"] == "4" and p["WAIT"] == "false" and p["UNIQ_KEY"] == "U1"
    again = build_send_back_message(stored("%RETRY%G", RETRY_TOPIC="T", ORIGIN_MESSAGE_ID="X"),
                                    decide_send_back("G", 1, 0, 16, 1))
    assert again.properties["RETRY_TOPIC"] == "T" and again.properties["ORIGIN_MESSAGE_ID"] == "X"


def test_delay_table_and_due_times() -> None:
    levels = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert len(levels) == 18 and levels[1] == 1000 and levels[18] == 7_200_000
    assert compute_deliver_timestamp(levels, 2, 10_000) == 15_000
    assert compute_deliver_timestamp(levels, 99, 10_000) == 11_000
    assert correct_deliver_timestamp(50_000, 60_000, 1000) == 50_000  # clock went back
    assert correct_deliver_timestamp(50_000, 50_500, 1000) == 50_500


def test_message_timeup_keeps_the_upstream_properties() -> None:
    parked = stored("SCHEDULE_TOPIC_XXXX", DELAY="2", REAL_TOPIC="VecDelay", REAL_QID="3",
                    WAIT="true", TAGS="A")
    inner = message_timeup(parked)
    assert (inner.topic, inner.queue_id, inner.reconsume_times) == ("VecDelay", 3, 1)
    assert "DELAY\x012" in (inner.properties_string or "")  # frame id 595 keeps DELAY
    assert "DELAY" not in inner.properties and inner.properties["WAIT"] == "false"


@given(st.dictionaries(st.integers(1, 18), st.integers(0, 2**62)))
def test_delay_offsets_round_trip(table: dict[int, int]) -> None:
    data = encode_delay_offsets(table)
    assert decode_delay_offsets(data) == table
    assert decode_delay_offsets(b'{"offsetTable":{"1":4}}') == {1: 4}


def test_op_matching_and_op_offset() -> None:
    remove: dict[int, int] = {}
    done: list[int] = []
    build_remove_map([(0, "d", b"0"), (1, "d", b"5"), (2, "x", b"6"), (3, "d", b"3")], 2,
                     remove, done)
    assert remove == {5: 1, 3: 3} and done == [0]
    assert calculate_op_offset([0, 1, 3], 0) == 2
    assert calculate_op_offset([], 4) == 4
    assert next_check_times({}, 15) == 1
    assert next_check_times({"TRANSACTION_CHECK_TIMES": "14"}, 15) == 15
    assert next_check_times({"TRANSACTION_CHECK_TIMES": "15"}, 15) is None


def test_half_copy_commit_and_op_records() -> None:
    inner = MessageExtBrokerInner("VecTxTopic", 3, properties={"TRAN_MSG": "true", "PGROUP": "P",
                                                               "WAIT": "true"},
                                  sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    parse_half_message_inner(inner)
    assert (inner.topic, inner.queue_id, inner.sys_flag) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0)
    assert inner.properties["REAL_TOPIC"] == "VecTxTopic" and inner.properties["REAL_QID"] == "3"
    half = stored("RMQ_SYS_TRANS_HALF_TOPIC", TRAN_MSG="true", PGROUP="P", WAIT="true",
                  REAL_TOPIC="VecTxTopic", REAL_QID="3", TRANSACTION_CHECK_TIMES="1")
    copy = renew_half_message_inner(half)
    assert "WAIT\x01true" in (copy.properties_string or "") and half.properties["WAIT"] == "false"
    committed = end_message_transaction(stored("H", TRAN_MSG="true", PGROUP="P", REAL_TOPIC="X",
                                               REAL_QID="1"), 8, 27513)
    assert (committed.topic, committed.queue_id, committed.sys_flag) == ("X", 1, 8)
    assert committed.prepared_transaction_offset == 27513
    assert "TRAN_MSG\x01true" in (committed.properties_string or "")
    assert "TRAN_MSG" not in committed.properties
    op = make_op_message_inner(7, 0, bytes(8), 1)
    assert (op.topic, op.body, op.properties["TAGS"]) == ("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"7", "d")
    header = EndTransactionRequestHeader(producer_group="P", tran_state_table_offset=7,
                                         commit_log_offset=22965, commit_or_rollback=8, msg_id="U")
    assert check_prepare_message(half, header) is None
    assert check_prepare_message(None, header) == "Find prepared transaction message failed"
    header.producer_group = "Q"
    assert check_prepare_message(half, header) == "The producer group wrong"
