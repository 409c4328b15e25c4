"""A broker restarted on a damaged store starts, drops what is damaged and serves what is whole.

One real broker fills a store (3,000 x 1 KiB messages over 4 queues, 1 MiB commit-log
segments, 300-unit consume-queue files) with our producer and stops with SIGTERM. Each case
damages a copy of that stopped store (``tests/store_damage.py``: flipped bits in the newest
segment's last 64 KiB, with and without the ``abort`` marker; its last 8 KiB of data zeroed;
the segment cut short; a consume-queue file zeroed; the index deleted; a garbage checkpoint;
a checkpoint claiming data beyond what is written) and starts one broker on it. Then:

* the broker prints its readiness line;
* a pull of every queue from offset 0 serves no record whose body is not one sent or whose
  BODYCRC fails (recovery checks CRCs as upstream's ``checkCRCOnRecover``);
* every message whose record ends before the first damaged byte is served, and all of them
  when the commit log is untouched (consume queues and index rebuilt from it);
* QUERY_MESSAGE finds a key written before the damage (the index covers it);
* for damage to the commit log, the broker log has one ``store.recovery_dropped`` line.

``tests/interop/test_stock_store_damage.py`` runs the same cases beside stock 4.9.7.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from aiorocketmq.protocol.errors import MQBrokerError
from tests.procs import ServerProcess, broker_process, namesrv_process
from tests.store_damage import (
    CASES,
    COUNT,
    DAMAGED_QUEUE,
    LOG_DAMAGE,
    QUEUES,
    STORE_CONF,
    TOPIC,
    Classified,
    Damage,
    Record,
    apply_case,
    classify,
    copy_store,
    describe_offset,
    fill,
    merge,
    query_key,
    read_back,
    segments,
    walk_records,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

BROKER = "broker-sd"
DROPPED = re.compile(r"store\.recovery_dropped")
T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to the end on its own loop in a worker thread (for a module fixture,
    outside the tests' event loops)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class Pristine:
    """A stopped broker's undamaged store, what was sent to it and what its log holds."""

    store: Path
    sent: dict[bytes, int]  # body -> index
    records: list[Record]  # the topic's records, in log order
    namesrv: ServerProcess


def fill_and_stop(broker: ServerProcess, namesrv_addr: str, store: Path, *,
                  clean_exit: tuple[int, ...] = (0,)) -> tuple[dict[bytes, int], list[Record]]:
    """Fill a started broker, SIGTERM it (a clean stop: an exit code in ``clean_exit``), and
    read back its commit log."""
    try:
        sent = run_async(fill(namesrv_addr, broker.address, BROKER))
    finally:
        code = broker.stop()
    assert code in clean_exit, f"exit {code}\n{broker.log_tail()}"
    records = [r for r in walk_records(store) if r.topic == TOPIC]
    assert sorted(sent[r.body] for r in records) == list(range(COUNT))
    assert len(segments(store)) >= 3, "the scenario needs several commit-log segments"
    return sent, records


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pristine]:
    tmp = tmp_path_factory.mktemp("pristine")
    ns = namesrv_process(tmp).start()
    try:
        br = broker_process(tmp, ns.address, name=BROKER, conf=STORE_CONF).start()
        store = tmp / BROKER / "store"
        sent, records = fill_and_stop(br, ns.address, store)
        yield Pristine(store, sent, records, ns)
    finally:
        ns.stop()


@dataclass
class Outcome:
    """What one broker did on one damaged store."""

    started: bool
    got: Classified | None = None
    key_found: bool | None = None
    dropped_lines: int = 0
    note: str = ""

    def summary(self) -> str:
        if not self.started:
            return f"did not start: {self.note}"
        assert self.got is not None
        return (f"started; {self.got.summary()}; key query "
                f"{'found' if self.key_found else 'not found'}; {self.dropped_lines} dropped line(s)")


def probe_key(expected: list[Record]) -> Record:
    """A record from before the damage whose key the index must find."""
    assert expected, "the damage left nothing whole to look for"
    return expected[len(expected) // 2]


async def observe(namesrv_addr: str, addr: str, sent: dict[bytes, int], probe: Record,
                  log_text: str) -> Outcome:
    """Read every queue back, query the probe's key and count the log's dropped lines."""
    served = await read_back(namesrv_addr, addr, BROKER)
    got = classify(sent, merge(served))
    try:
        found = await query_key(namesrv_addr, addr, probe.keys)
    except MQBrokerError as exc:
        got.errors.append(f"query of {probe.keys}: {exc}")
        found = []
    key_found = any(m.body == probe.body for m in found)
    return Outcome(True, got, key_found, len(DROPPED.findall(log_text)))


def check_ours(case: str, damage: Damage, pristine: Pristine, outcome: Outcome) -> None:
    """What our broker must do on a damaged store (the module docstring)."""
    assert outcome.started and outcome.got is not None, outcome.summary()
    got = outcome.got
    assert not got.corrupted, f"{case}: corrupted records served: {got.corrupted[:5]}"
    assert not got.errors, f"{case}: reads refused: {got.errors[:5]}"
    expected = damage.intact_before(pristine.records)
    lost = sorted({pristine.sent[r.body] for r in expected} - got.intact)
    where = (describe_offset(pristine.store, damage.first_bad_offset)
             if damage.first_bad_offset is not None else "commit log untouched")
    assert not lost, (f"{case} ({damage.detail}; first damage at {where}): {len(lost)} of "
                      f"{len(expected)} whole messages not served, e.g. {lost[:10]}")
    if damage.first_bad_offset is None:
        assert len(got.intact) == COUNT, got.summary()
    assert outcome.key_found, f"{case}: QUERY_MESSAGE did not find {probe_key(expected).keys}"
    if case in LOG_DAMAGE:
        assert outcome.dropped_lines == 1, f"{case}: {outcome.dropped_lines} store.recovery_dropped lines"
    else:
        assert outcome.dropped_lines <= 1, f"{case}: {outcome.dropped_lines} store.recovery_dropped lines"


async def run_ours(tmp: Path, case: str, pristine: Pristine,
                   start: Callable[[ServerProcess], ServerProcess]) -> tuple[Damage, Outcome]:
    """Damage a copy of the pristine store as ``case`` says, start our broker on it, observe."""
    store = copy_store(pristine.store, tmp / BROKER / "store")
    damage = apply_case(store, case, "ours")
    proc = broker_process(tmp, pristine.namesrv.address, name=BROKER, conf=STORE_CONF)
    try:
        broker = start(proc)
    except RuntimeError as exc:
        return damage, Outcome(False, note=str(exc)[-2000:])
    probe = probe_key(damage.intact_before(pristine.records))
    outcome = await observe(pristine.namesrv.address, broker.address, pristine.sent, probe,
                            broker.log_path.read_text(errors="replace"))
    return damage, outcome


@pytest.mark.parametrize("case", CASES)
async def test_damaged_store_restarts_and_serves_what_is_whole(
        case: str, tmp_path: Path, pristine: Pristine,
        server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    damage, outcome = await run_ours(tmp_path, case, pristine, server_factory)
    print(f"{case}: {damage.detail}: {outcome.summary()}")
    check_ours(case, damage, pristine, outcome)
    if case == "zero_consume_queue":
        assert outcome.got is not None
        for q in range(QUEUES):
            want = {i for i in pristine.sent.values() if i % QUEUES == q}
            assert want <= outcome.got.intact, (
                f"queue {q}{' (zeroed file)' if q == DAMAGED_QUEUE else ''}: "
                f"{len(want - outcome.got.intact)} messages not served")
