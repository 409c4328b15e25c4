"""``updateBrokerConfig`` survives a restart, as stock 4.9.7's does.

Stock's ``BrokerStartup`` hands the ``-c`` path to ``BrokerPathConfigHelper`` and
``Configuration.update`` then ``persist()``s the whole configuration into that file with
``MixAll.string2File`` (a temp file, the previous content kept as ``.bak``). Ours used to
change only the running broker: a restart went back to the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import string_to_properties
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def test_updated_config_is_persisted_and_read_at_restart(
        tmp_path: Path, namesrv: ServerProcess,
        server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    first = broker_process(tmp_path, namesrv.address, conf={"myOwnComment": "kept"})
    conf = tmp_path / "broker-a" / "broker.conf"
    original = conf.read_text()
    server_factory(first)
    admin = MQAdmin(namesrv.address)
    try:
        await admin.update_broker_config(first.address, {
            "flushConsumerOffsetInterval": "7000",         # ours, live
            "maxTransferCountOnMessageInMemory": "64",     # a store key
            "sendMessageThreadPoolNums": "12",             # stock's, accepted and kept
        })
        live, _ = await admin.broker_config(first.address)
        assert live["flushConsumerOffsetInterval"] == "7000"
    finally:
        await admin.close()

    # The whole configuration is in the -c file now; the previous content in .bak.
    persisted = string_to_properties(conf.read_text())
    assert persisted["flushConsumerOffsetInterval"] == "7000"
    assert persisted["maxTransferCountOnMessageInMemory"] == "64"
    assert persisted["sendMessageThreadPoolNums"] == "12"
    assert persisted["listenPort"] == "0"  # as configured, not the port 0 bound
    assert persisted["brokerName"] == "broker-a" and persisted["myOwnComment"] == "kept"
    assert persisted["storePathRootDir"] == str(tmp_path / "broker-a" / "store")
    assert (conf.parent / "broker.conf.bak").read_text() == original
    assert not [p.name for p in conf.parent.iterdir() if p.name.endswith(".tmp")]

    assert first.stop() == 0
    second = server_factory(ServerProcess(first.argv, first.ready, tmp_path / "second.log"))
    admin = MQAdmin(namesrv.address)
    try:
        after, _ = await admin.broker_config(second.address)
    finally:
        await admin.close()
    assert after["flushConsumerOffsetInterval"] == "7000"
    assert after["maxTransferCountOnMessageInMemory"] == "64"
    assert after["sendMessageThreadPoolNums"] == "12"
    # Every key the broker wrote is one it reads again: only the file's own stays unknown.
    log = (tmp_path / "second.log").read_text().splitlines()
    unknown = [ln for ln in log if "config_unknown_key" in ln]
    assert len(unknown) == 1 and "key=myOwnComment" in unknown[0], unknown

