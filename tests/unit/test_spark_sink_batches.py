"""The sink's grouping of rows into SEND_BATCH_MESSAGE requests (``sink.batches``).

Rows keep their order; a batch holds consecutive rows of one topic, queue id and WAIT,
within ``BATCH_ROWS`` and ``BATCH_BYTES``; a row a batch would store differently (delay
level, delivery time, transaction flag, retry topic, a body the producer would compress)
goes alone. And the ``deliverTime`` column's values (``sink_mapping.row_to_message``).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import Message
from aiorocketmq.spark_sink.sink import BATCH_BYTES, BATCH_ROWS, batches
from aiorocketmq.spark_sink.sink_mapping import SinkColumns, row_to_message

COMPRESS = 4096


def _flat(groups: list[tuple[Message | list[Message], int | None]]
          ) -> list[tuple[Message, int | None]]:
    out = []
    for msgs, qid in groups:
        for m in (msgs if isinstance(msgs, list) else [msgs]):
            out.append((m, qid))
    return out


def test_consecutive_rows_of_one_queue_share_a_batch() -> None:
    items = [(Message("T", b"%d" % i), None) for i in range(300)]
    groups = batches(items, COMPRESS)
    assert [len(g) for g, _ in groups] == [BATCH_ROWS, BATCH_ROWS, 300 - 2 * BATCH_ROWS]
    assert _flat(groups) == items


def test_what_goes_alone() -> None:
    delayed = Message("T", b"d")
    delayed.delay_time_level = 3
    half = Message("T", b"h")
    half.properties["TRAN_MSG"] = "true"
    items = [(Message("T", b"a"), 1), (Message("T", b"b"), 1), (delayed, 1),
             (Message("T", b"x" * COMPRESS), 1), (half, 1), (Message("%RETRY%g", b"r"), 1),
             (Message("T", b"c"), 2), (Message("U", b"e"), 2), (Message("U", b"f"), 2)]
    groups = batches(items, COMPRESS)
    shapes = [(len(g) if isinstance(g, list) else 1, q) for g, q in groups]
    assert shapes == [(2, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 2), (2, 2)]
    assert all(not isinstance(g, list) for g, _ in groups[1:6])
    assert _flat(groups) == items


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["T", "U"]), st.sampled_from([None, 0, 1]),
                          st.integers(min_value=0, max_value=200_000), st.booleans(),
                          st.booleans()), max_size=400))
def test_batches_keep_order_and_limits(rows: list[tuple[str, int | None, int, bool, bool]]
                                       ) -> None:
    items = []
    for topic, qid, size, wait, delay in rows:
        m = Message(topic, b"x" * (size % (COMPRESS + 100)), wait_store_msg_ok=wait)
        if delay:
            m.delay_time_level = 1
        items.append((m, qid))
    groups = batches(items, COMPRESS)
    assert _flat(groups) == items
    for msgs, _qid in groups:
        if isinstance(msgs, list):
            assert 2 <= len(msgs) <= BATCH_ROWS
            assert sum(len(m.body) for m in msgs) <= BATCH_BYTES
            assert len({(m.topic, m.wait_store_msg_ok) for m in msgs}) == 1
            assert all(m.delay_time_level == 0 and len(m.body) < COMPRESS for m in msgs)
    # no two neighbouring groups could have been one batch
    for (a, qa), (b, qb) in zip(groups, groups[1:], strict=False):
        if isinstance(a, list) and isinstance(b, list) and (a[0].topic, qa) == (b[0].topic, qb) \
                and a[0].wait_store_msg_ok == b[0].wait_store_msg_ok:
            assert len(a) == BATCH_ROWS or sum(len(m.body) for m in a + b[:1]) > BATCH_BYTES


def test_a_timed_row_goes_alone() -> None:
    timed = Message("T", b"t")
    timed.deliver_time_ms = 1_900_000_000_000
    items = [(Message("T", b"a"), 1), (timed, 1), (Message("T", b"b"), 1), (Message("T", b"c"), 1)]
    groups = batches(items, COMPRESS)
    assert [(len(g) if isinstance(g, list) else 1) for g, _ in groups] == [1, 1, 2]
    assert groups[1][0] is timed
    assert _flat(groups) == items


def _deliver(value: object, kind: str = "timestamp") -> Message:
    columns = SinkColumns.from_schema([("value", "string"), ("deliverTime", kind)],
                                      topic_option="T")
    msg, _ = row_to_message({"value": "v", "deliverTime": value}, columns, default_topic="T",
                            lineage={}, row_index=7)
    return msg


def test_deliver_time_column_values() -> None:
    aware = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert _deliver(aware).deliver_time_ms == 1893553445678
    naive = aware.astimezone().replace(tzinfo=None)  # PySpark's Row form: local, naive
    assert _deliver(naive).deliver_time_ms == 1893553445678
    assert _deliver(1893553445678, "bigint").deliver_time_ms == 1893553445678
    assert "TIMER_DELIVER_MS" not in _deliver(None).properties
    with pytest.raises(MQClientError, match="row 7: deliverTime -1 must be after the epoch"):
        _deliver(-1, "bigint")
    with pytest.raises(MQClientError, match="row 7: deliverTime True is neither"):
        _deliver(True, "bigint")
    with pytest.raises(MQClientError, match="column deliverTime must be a timestamp or a bigint"):
        SinkColumns.from_schema([("value", "string"), ("deliverTime", "int")], topic_option="T")
