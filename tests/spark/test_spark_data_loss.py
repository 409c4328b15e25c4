"""failOnDataLoss both ways: retention deletes the head of the queues, then a read asks
for offsets below the new min offset."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aiorocketmq.spark_sink.link import BlockingLink
from tests.procs import ServerProcess, broker_process, namesrv_process
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark

TOPIC = "SparkLoss"


@pytest.fixture(scope="module")
def shrinking_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """A broker with 64 KiB commit-log segments, no retention time and a clean pass every
    100 ms at any hour, once its retention removed the oldest segments; yields the
    nameserver and the number of messages left per queue."""
    tmp = tmp_path_factory.mktemp("loss")
    ns = namesrv_process(tmp, name="ns-loss").start()
    broker: ServerProcess = broker_process(tmp, ns.address, name="broker-loss", conf={
        "mappedFileSizeCommitLog": str(64 * 1024),
        "mappedFileSizeConsumeQueue": str(20 * 40),
        "fileReservedTime": "0",
        "cleanResourceInterval": "100",
        "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
    })
    try:
        broker.start()
        produce(ns.address, TOPIC, [b"x" * 1024 + str(i).encode() for i in range(400)])
        commit_log = tmp / "broker-loss" / "store" / "commitlog"
        with BlockingLink(ns.address) as link:
            view = link.call(lambda lk: lk.routes([TOPIC]))
            deadline = time.monotonic() + 60
            previous: dict[Any, int] | None = None
            # Retention is done when only the last segment is left (it is never deleted)
            # and the queues' min offsets, corrected after it, read the same twice.
            while True:
                mins = link.call(lambda lk: lk.min_offsets(view, view.queues))
                if (len(list(commit_log.iterdir())) == 1 and all(v > 0 for v in mins.values())
                        and mins == previous):
                    break
                previous = mins
                assert time.monotonic() < deadline, f"retention did not finish: {mins}"
                time.sleep(0.2)  # polling interval of a deadline-bounded wait
            maxs = link.call(lambda lk: lk.max_offsets(view, view.queues))
        yield ns.address, {f"{k.broker_name}/{k.queue_id}": maxs[k] - mins[k] for k in mins}
    finally:
        broker.stop()
        ns.stop()
        print(f"---- {broker.log_path} ----\n{broker.log_tail(40)}")


def _read_from_zero(spark: Any, name_server: str, fail: str) -> Any:
    zero = {TOPIC: {"broker-loss": {str(q): 0 for q in range(4)}}}
    return (spark.read.format("rocketmq").option("nameServer", name_server)
            .option("topic", TOPIC).option("startingOffsets", json.dumps(zero))
            .option("failOnDataLoss", fail).load())


def test_fail_on_data_loss_true_names_the_queue(spark: Any, shrinking_broker: Any) -> None:
    name_server, _ = shrinking_broker
    with pytest.raises(Exception) as info:
        _read_from_zero(spark, name_server, "true").collect()
    text = str(info.value)
    assert "DataLossError" in text and f"queue {TOPIC}/broker-loss/" in text
    assert "below the queue's min offset" in text


def test_fail_on_data_loss_false_skips_what_is_gone(spark: Any, shrinking_broker: Any) -> None:
    name_server, remaining = shrinking_broker
    rows = _read_from_zero(spark, name_server, "false").select("queueId", "queueOffset").collect()
    assert len(rows) == sum(remaining.values())
    # The earliest spec resolves to the new min offsets and reads the same rows.
    earliest = (spark.read.format("rocketmq").option("nameServer", name_server)
                .option("topic", TOPIC).load())
    assert earliest.count() == len(rows)
