"""The source's range reader on a real broker, both ways: ``pullwire.StreamRangeReader`` (a
connection of its own, pull frames as bytes) and ``link.RangeReader`` (``MQClientAPI`` on
the link's channel) read the same records of a range, with windows the broker answers in
several pieces (a tag filter), a range running past the queue's max offset (data loss
both ways), and a broker error answer."""

from __future__ import annotations

from typing import Any

import pytest

from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.protocol.message import decode_messages
from aiorocketmq.spark_sink.link import BlockingLink
from aiorocketmq.spark_sink.offsets import DataLossError, QueueKey
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark

TOPIC = "SparkPullStream"
_WAYS = pytest.mark.parametrize("own", [True, False], ids=["stream", "channel"])


@pytest.fixture(scope="module")
def queues(name_server: str) -> dict[QueueKey, tuple[str, int]]:
    """Every queue of TOPIC (400 messages) with its broker address and max offset; and
    TOPIC + "Tags": 60 messages tagged a, 120 tagged b, 60 tagged a."""
    produce(name_server, TOPIC, [b"m-%d" % i for i in range(400)])
    for tags, n in (("a", 60), ("b", 120), ("a", 60)):
        produce(name_server, TOPIC + "Tags", [b"%s-%d" % (tags.encode(), i) for i in range(n)],
                tags=tags)
    with BlockingLink(name_server) as blocking:
        view = blocking.call(lambda link: link.routes([TOPIC]))
        maxs = blocking.call(lambda link: link.max_offsets(view, view.queues))
    return {q: (view.broker_addrs[q.broker_name], maxs[q]) for q in view.queues}


def _read(name_server: str, addr: str, key: QueueKey, start: int, end: int, *, own: bool,
          sub: str = "*", fail: bool = True, batch: int = 7, pipeline: int = 3
          ) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    with BlockingLink(name_server) as blocking:
        reader = blocking.run(blocking.link.range_reader(
            addr, key, start, end, group="spark-pull-stream", sub_expression=sub, batch=batch,
            fail_on_data_loss=fail, pipeline=pipeline, own_connection=own))
        try:
            while (windows := blocking.run(reader.next())) is not None:
                for body, window_end in windows:
                    out += [(m.queue_offset, m.body) for m in decode_messages(body)
                            if m.queue_offset < window_end]
        finally:
            async def close() -> None:
                reader.close()
            blocking.run(close())
    return out


@_WAYS
def test_a_range_is_read_whole_and_in_order(name_server: str, queues: Any, own: bool) -> None:
    for key, (addr, max_offset) in sorted(queues.items()):
        got = _read(name_server, addr, key, 3, max_offset - 2, own=own)
        assert [o for o, _ in got] == list(range(3, max_offset - 2))
        assert all(body.startswith(b"m-") for _, body in got)
        # One big window and a long pipeline, and windows of one offset: the same records.
        assert _read(name_server, addr, key, 3, max_offset - 2, own=own, batch=1000) == got
        assert _read(name_server, addr, key, 3, max_offset - 2, own=own, batch=1,
                     pipeline=64) == got


@_WAYS
def test_tag_filtered_windows(name_server: str, queues: Any, own: bool) -> None:
    with BlockingLink(name_server) as blocking:
        view = blocking.call(lambda link: link.routes([TOPIC + "Tags"]))
        maxs = blocking.call(lambda link: link.max_offsets(view, view.queues))
    for key in view.queues:
        addr = view.broker_addrs[key.broker_name]
        every = _read(name_server, addr, key, 0, maxs[key], own=own, sub="a || b")
        assert [o for o, _ in every] == list(range(maxs[key]))
        # The windows of the b run are answered with nothing matched; the a's are read.
        only_a = _read(name_server, addr, key, 0, maxs[key], own=own, sub="a")
        assert only_a == [(o, body) for o, body in every if body.startswith(b"a-")]
        assert len(only_a) < len(every)
        assert _read(name_server, addr, key, 0, maxs[key], own=own, sub="c") == []


@_WAYS
def test_a_range_past_the_max_offset_is_data_loss(name_server: str, queues: Any,
                                                   own: bool) -> None:
    key, (addr, max_offset) = sorted(queues.items())[0]
    with pytest.raises(DataLossError, match=f"queue {key}: offsets .* past the queue's max"):
        _read(name_server, addr, key, 0, max_offset + 20, own=own)
    got = _read(name_server, addr, key, 0, max_offset + 20, own=own, fail=False)
    assert [o for o, _ in got] == list(range(max_offset))


@_WAYS
def test_a_broker_error_fails_the_read(name_server: str, queues: Any, own: bool) -> None:
    key, (addr, _) = sorted(queues.items())[0]
    missing = QueueKey("SparkPullStreamNoSuchTopic", key.broker_name, 0)
    with pytest.raises(MQBrokerError, match="SparkPullStreamNoSuchTopic"):
        _read(name_server, addr, missing, 0, 10, own=own)
