"""A damaged store at restart: stock RocketMQ 4.9.7's broker beside ours, same damage, same seed.

Each side has one pristine store, filled by our producer (3,000 x 1 KiB messages over 4
queues, 1 MiB commit-log segments, 300-unit consume-queue files; stock with its default
``checkCRCOnRecover=true``) and stopped with SIGTERM. Per case (``tests/store_damage.py``:
the cases of ``tests/integration/test_store_damage.py``), a copy of the stock store is
damaged and a stock broker started on it, then a copy of ours likewise; our client reads
every queue from offset 0 and queries a key from before the damage. What stock did is
recorded (printed, and as the test's ``stock`` property); ours must do at least as well:
start whenever stock starts, serve no corrupted record, serve at least as many intact ones
(and meet everything the integration test asks of it).

What stock 4.9.7 did when these tests were written (its ``CommitLog.recoverNormally`` /
``recoverAbnormally``, ``MappedFileQueue.doLoad`` and ``ConsumeQueue.recover`` say why):

* flipped bits, with or without ``abort``: "CRC check failed", the log truncated at that
  record, every record before it served (2,946 of 3,000), nothing corrupted;
* the last 8 KiB zeroed: truncated at the record the zeros begin in (2,993 served);
* the newest segment cut short: does not start ("length not matched message store config
  value");
* the first consume-queue file of one queue zeroed: starts and serves the other three
  queues; of that one next to nothing (a pull answered SYSTEM_ERROR,
  IndexOutOfBoundsException, in one run; two records in another);
* the index deleted: starts, serves everything, finds no key (the index is not rebuilt);
* a garbage checkpoint, or one a day ahead (with or without ``abort``): starts, serves all.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.test_store_damage import (
    BROKER,
    Outcome,
    Pristine,
    check_ours,
    fill_and_stop,
    observe,
    probe_key,
    run_ours,
)
from tests.interop.stock import (
    JavaEnv,
    JavaServer,
    StockHarnessError,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)
from tests.procs import ServerProcess, broker_process, namesrv_process
from tests.store_damage import CASES, STORE_CONF, apply_case, copy_store

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

# What stock's store says about recovery (its broker log).
STOCK_RECOVERY_LINES = re.compile(
    r"CRC check failed|recover physics file end|illegal magic|length not matched|"
    r"truncate dirty logic files|load .* error|"
    r"Exception", re.IGNORECASE)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pristine]:
    """Our broker's pristine store (our nameserver runs for the module)."""
    tmp = tmp_path_factory.mktemp("ours")
    ns = namesrv_process(tmp).start()
    try:
        br = broker_process(tmp, ns.address, name=BROKER, conf=STORE_CONF).start()
        sent, records = fill_and_stop(br, ns.address, tmp / BROKER / "store")
        yield Pristine(tmp / BROKER / "store", sent, records, ns)
    finally:
        ns.stop()


@pytest.fixture(scope="module")
def stock(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pristine]:
    """A stock broker's pristine store (the stock nameserver runs for the module)."""
    tmp = tmp_path_factory.mktemp("stock")
    ns = start_stock_namesrv(tmp)
    try:
        br = start_stock_broker(tmp, ns.address, name=BROKER, conf=STORE_CONF)
        # A JVM stopped by SIGTERM exits 143 once its shutdown hooks have run.
        sent, records = fill_and_stop(br, ns.address, br.home / "store", clean_exit=(0, 143))
        yield Pristine(br.home / "store", sent, records, ns)
    finally:
        stop_all([ns])


def recovery_lines(broker: JavaServer) -> list[str]:
    out = []
    for path in broker.logs:
        if path.exists():
            out += [ln for ln in path.read_text(errors="replace").splitlines()
                    if STOCK_RECOVERY_LINES.search(ln)]
    return out


async def run_stock(tmp: Path, case: str, pristine: Pristine) -> tuple[Outcome, list[str]]:
    """Damage a copy of the stock store as ``case`` says, start a stock broker on it, observe;
    also what its log says about recovery."""
    store = copy_store(pristine.store, tmp / f"stock-{BROKER}" / "store")
    damage = apply_case(store, case, "stock")
    try:
        broker = await asyncio.to_thread(start_stock_broker, tmp, pristine.namesrv.address,
                                         name=BROKER, conf=STORE_CONF)
    except StockHarnessError as exc:
        lines = [ln for ln in str(exc).splitlines() if STOCK_RECOVERY_LINES.search(ln)]
        return Outcome(False, note=(lines or str(exc).splitlines() or [""])[0][:300]), lines
    try:
        outcome = await observe(pristine.namesrv.address, broker.address, pristine.sent,
                                probe_key(damage.intact_before(pristine.records)), "")
        return outcome, recovery_lines(broker)
    finally:
        broker.kill()  # its store is thrown away: no need for the slow orderly stop


@pytest.mark.parametrize("case", CASES)
async def test_ours_does_at_least_as_well_as_stock(
        case: str, tmp_path: Path, stock: Pristine, ours: Pristine,
        server_factory: Callable[[ServerProcess], ServerProcess],
        record_property: Callable[[str, object], None]) -> None:
    stock_outcome, stock_said = await run_stock(tmp_path / "stock", case, stock)
    print(f"stock {case}: {stock_outcome.summary()}")
    for line in stock_said[:10]:
        print(f"    stock log: {line}")
    record_property("stock", stock_outcome.summary())

    damage, our_outcome = await run_ours(tmp_path / "ours", case, ours, server_factory)
    print(f"ours  {case}: {our_outcome.summary()}")
    record_property("ours", our_outcome.summary())

    if stock_outcome.started:
        assert our_outcome.started, f"stock starts, ours does not: {our_outcome.note}"
    check_ours(case, damage, ours, our_outcome)
    assert our_outcome.got is not None
    if stock_outcome.started:
        assert stock_outcome.got is not None
        assert len(our_outcome.got.intact) >= len(stock_outcome.got.intact), (
            f"stock served {len(stock_outcome.got.intact)} intact, ours {len(our_outcome.got.intact)}")
