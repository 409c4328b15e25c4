"""The servers register exactly the request codes their specs name, from the modules named.

``protocol/request_specs.py`` is the one table of request codes; a handler added to a
processor without a spec entry (or a spec naming a module that does not register it)
fails here. The broker runs in this process (no nameserver) so its processor table can
be read after ``start()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path

import pytest

from aiorocketmq.protocol.channel import Handler
from aiorocketmq.protocol.request_specs import broker_specs, namesrv_specs
from aiorocketmq.server.broker.config import BrokerConfig
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.namesrv.config import NamesrvConfig
from aiorocketmq.server.namesrv.kv_config import KVConfigManager
from aiorocketmq.server.namesrv.processor import NamesrvProcessor
from aiorocketmq.server.namesrv.route_info import RouteInfoManager
from aiorocketmq.server.store.config import MessageStoreConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _module_of(handler: Handler) -> str:
    """The module of the handler under the edge wrappers, without ``aiorocketmq.``."""
    module = inspect.unwrap(handler).__module__  # type: ignore[arg-type]
    assert module.startswith("aiorocketmq."), module
    return module.removeprefix("aiorocketmq.")


def _registered(table: Mapping[int, Handler]) -> dict[int, str]:
    return {code: _module_of(handler) for code, handler in table.items()}


def _expected(specs: Mapping[int, object], prefix: str) -> dict[int, str]:
    out = {}
    for code, spec in specs.items():
        modules = [m for m in spec.handled_by if m.startswith(prefix)]  # type: ignore[attr-defined]
        assert len(modules) == 1, (code, modules)
        out[code] = modules[0]
    return out


async def test_broker_registers_exactly_its_specs(tmp_path: Path) -> None:
    config = BrokerConfig(broker_name="broker-specs", listen_port=0, namesrv_addr=None)
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"),
                               mapped_file_size_commit_log=1024 * 1024,
                               mapped_file_size_consume_queue=20 * 1000)
    broker = BrokerController(config, store)
    try:
        await broker.start()
        registered = _registered(broker.server.processors)
    finally:
        await broker.shutdown()
    expected = _expected(broker_specs(), "server.broker.")
    missing_spec = sorted(set(registered) - set(expected))
    assert not missing_spec, f"registered without a spec in protocol/request_specs.py: {missing_spec}"
    assert registered == expected


def test_namesrv_registers_exactly_its_specs(tmp_path: Path) -> None:
    config = NamesrvConfig(kv_config_path=str(tmp_path / "kvConfig.json"))
    processor = NamesrvProcessor(config, RouteInfoManager(), KVConfigManager(config.kv_config_path))
    registered = _registered(processor.table)
    assert registered == _expected(namesrv_specs(), "server.namesrv.")
