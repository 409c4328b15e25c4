"""The Spark source's range reader against a stock 4.9.7 broker, both ways: the stream
reader (a connection of its own, ROCKETMQ-header pull frames built in C) and the
``MQClientAPI`` path read the same records, filter by tag alike, report a range past the
queue's max offset as data loss and fail on a broker error answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.spark_sink.link import BlockingLink
from aiorocketmq.spark_sink.offsets import DataLossError, QueueKey
from tests.interop.stock import (
    JavaEnv,
    JavaServer,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)
from tests.spark.conftest import produce
from tests.spark.test_spark_pull_stream import _read

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

TOPIC = "SparkStockRange"
_WAYS = pytest.mark.parametrize("own", [True, False], ids=["stream", "channel"])


@pytest.fixture(scope="module")
def stock(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A stock nameserver + broker-a holding TOPIC: 40 messages tagged a, 80 b, 40 a."""
    tmp = tmp_path_factory.mktemp("stock-spark")
    ns = start_stock_namesrv(tmp)
    br: JavaServer | None = None
    try:
        br = start_stock_broker(tmp, ns.address)
        for tags, n in (("a", 40), ("b", 80), ("a", 40)):
            produce(ns.address, TOPIC, [b"%s-%d" % (tags.encode(), i) for i in range(n)],
                    tags=tags)
        yield ns.address
    finally:
        stop_all([s for s in (br, ns) if s is not None])
        if br is not None:
            print(f"---- stock broker ----\n{br.log_tail(40)}")


def _queues(name_server: str) -> list[tuple[QueueKey, str, int]]:
    with BlockingLink(name_server) as blocking:
        view = blocking.call(lambda link: link.routes([TOPIC]))
        maxs = blocking.call(lambda link: link.max_offsets(view, view.queues))
    return [(q, view.broker_addrs[q.broker_name], maxs[q]) for q in view.queues]


@_WAYS
def test_the_stock_broker_serves_the_range_reader(stock: str, own: bool) -> None:
    total = 0
    for key, addr, max_offset in _queues(stock):
        every = _read(stock, addr, key, 0, max_offset, own=own)
        assert [o for o, _ in every] == list(range(max_offset))
        assert _read(stock, addr, key, 0, max_offset, own=own, batch=1000) == every
        only_a = _read(stock, addr, key, 0, max_offset, own=own, sub="a")
        assert only_a == [(o, b) for o, b in every if b.startswith(b"a-")]
        total += len(every)
    assert total == 160


@_WAYS
def test_data_loss_and_errors_from_the_stock_broker(stock: str, own: bool) -> None:
    key, addr, max_offset = _queues(stock)[0]
    with pytest.raises(DataLossError, match="past the queue's max"):
        _read(stock, addr, key, 0, max_offset + 10, own=own)
    got = _read(stock, addr, key, 0, max_offset + 10, own=own, fail=False)
    assert [o for o, _ in got] == list(range(max_offset))
    with pytest.raises(MQBrokerError, match="SparkStockNoSuchTopic"):
        _read(stock, addr, QueueKey("SparkStockNoSuchTopic", key.broker_name, 0), 0, 10,
              own=own)
