"""The network faults of ``tests/integration/test_faults_network.py`` on stock 4.9.7, in the
same harness (tests/faultproxy.py), with the same settings and the same checks.

1. Master <-> slave partition, stock master and stock slave: what stock answers is what
   ours answers (SYNC_MASTER: FLUSH_SLAVE_TIMEOUT after slaveTimeout while the connection
   is up, then SLAVE_NOT_AVAILABLE; ASYNC_MASTER: SEND_OK), and the stock slave catches up
   byte-identical after the heal. One difference on the way: a stock slave times its
   housekeeping from its own last write (``HAClient.lastWriteTimestamp``), so in the black
   hole it keeps its dead connection; it notices the master closed it only when the heal
   delivers the FIN. Ours times it from its last read and dials again during the partition.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiorocketmq.client.remoting import RemotingClient
from tests.faultproxy import ThreadedFaultProxy
from tests.integration.test_faults_network import (
    check_partition_answers,
    check_stores,
    ha_settings,
    partition_master_and_slave,
    partition_summary,
    wait_caught_up,
)
from tests.interop.stock import JavaServer
from tests.procs import ServerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
async def test_stock_master_slave_partition(namesrv: ServerProcess,
                                            stock_broker: Callable[..., JavaServer], role: str) -> None:
    sync = role == "SYNC_MASTER"
    master = stock_broker(namesrv.address, name="stock-master", conf=ha_settings(role, 0, "ha-fault"))
    with ThreadedFaultProxy(f"127.0.0.1:{master.port + 1}") as proxy:
        slave = stock_broker(namesrv.address, name="stock-slave",
                             conf=ha_settings("SLAVE", 1, "ha-fault") | {"haMasterAddress": proxy.address})
        client = RemotingClient()
        try:
            report = await partition_master_and_slave(client, master.address, slave.address, proxy, sync)
            end = await wait_caught_up(client, master.address, slave.address)
        finally:
            await client.close()
        stats = proxy.stats()
        print(f"stock 4.9.7, {role}: {partition_summary(report)}; proxy {stats}")
    check_partition_answers(report, sync)
    check_stores(report, master.home / "store", slave.home / "store", end)



