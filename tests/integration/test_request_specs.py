"""The servers register exactly the request codes their specs name, from the modules named.

``protocol/request_specs.py`` is the one table of request codes; a handler added to a
processor without a spec entry (or a spec naming a module that does not register it)
fails here. The broker runs in this process (no nameserver) so its processor table can
be read after ``start()``.

Each server's edge decodes a request's header once, from the code's spec (``edge_header``),
for the handler: counted here per request code, with the answer to a malformed header.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError
from aiorocketmq.protocol.headers import CommandHeader
from aiorocketmq.protocol.request_specs import (
    RequestSpec,
    broker_specs,
    edge_header,
    namesrv_specs,
)
from aiorocketmq.server.broker.config import BrokerConfig
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.namesrv.config import NamesrvConfig
from aiorocketmq.server.namesrv.controller import NamesrvController
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


def _broker(tmp_path: Path, name: str) -> BrokerController:
    """A broker in this process, without a nameserver."""
    config = BrokerConfig(broker_name=name, listen_port=0, namesrv_addr=None)
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"),
                               mapped_file_size_commit_log=1024 * 1024,
                               mapped_file_size_consume_queue=20 * 1000)
    return BrokerController(config, store)


async def test_broker_registers_exactly_its_specs(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "broker-specs")
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


# -- the edge decodes each request's header once ----------------------------------------

_VALUES = {"str": "EdgeValue", "int32": "0", "int64": "0", "bool": "false", "float": "0"}
_EDGE = "aiorocketmq.protocol.validation"  # the module of the edge (guard)
# Values that make the handler answer (END_TRANSACTION answers a commit, not an unknown kind).
_ANSWERED = {RequestCode.END_TRANSACTION: {"commitOrRollback": "8"}}


def _edge_decoded(specs: Mapping[int, RequestSpec]) -> dict[int, type[CommandHeader]]:
    """The codes whose header the edge decodes, with that class."""
    return {code: header for code, spec in specs.items()
            if (header := edge_header(spec)) is not None}


def _count_decodes(monkeypatch: pytest.MonkeyPatch, classes: set[type[CommandHeader]]
                   ) -> list[tuple[type[CommandHeader], str]]:
    """Record each ``from_ext_fields`` of ``classes``: the class and the calling module.
    Patched before the servers start: the edge binds the decoder when it registers."""
    calls: list[tuple[type[CommandHeader], str]] = []
    for cls in classes:
        func = cls.from_ext_fields.__func__  # type: ignore[attr-defined]

        def counted(c: type[CommandHeader], ext: Mapping[str, str] | None,
                    _func: Any = func) -> CommandHeader:
            calls.append((c, sys._getframe(1).f_globals["__name__"]))
            return _func(c, ext)  # type: ignore[no-any-return]

        monkeypatch.setattr(cls, "from_ext_fields", classmethod(counted))
    return calls


def _valid_ext(code: int, header: type[CommandHeader]) -> dict[str, str]:
    ext = {wire: _VALUES[kind] for wire, kind in header.required_fields()}
    return {**ext, **_ANSWERED.get(code, {})}


async def _check_decoded_once(address: str, codes: Mapping[int, type[CommandHeader]],
                              calls: list[tuple[type[CommandHeader], str]]) -> None:
    """Sent to the server at ``address``, each request's header is decoded exactly once,
    by the edge; a header missing a required field, or with a number that does not parse,
    is answered SYSTEM_ERROR with the decoder's own remark (what the processors answered
    when they decoded it)."""
    host, port = address.rsplit(":", 1)
    channel = await Channel.connect(host, int(port), timeout=10)
    try:
        await _send_each(channel, codes, calls)
    finally:
        channel.close()
        await channel.wait_closed()


async def _send_each(channel: Channel, codes: Mapping[int, type[CommandHeader]],
                     calls: list[tuple[type[CommandHeader], str]]) -> None:
    for code, header in codes.items():
        calls.clear()
        await channel.invoke(RemotingCommand.create_request(code, _valid_ext(code, header)), timeout=30)
        assert calls == [(header, _EDGE)], (RequestCode(code).name, calls)
        bad_cases = []
        required = header.required_fields()
        if required:
            bad_cases.append({k: v for k, v in _valid_ext(code, header).items() if k != required[0][0]})
        numbers = [wire for wire, kind in required if kind in ("int32", "int64")]
        if numbers:
            bad_cases.append({**_valid_ext(code, header), numbers[0]: "zero"})
        for bad in bad_cases:
            with pytest.raises(HeaderError) as expected:
                header.from_ext_fields_generic(bad)
            calls.clear()
            answer = await channel.invoke(RemotingCommand.create_request(code, bad), timeout=30)
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR,
                                                    str(expected.value)), RequestCode(code).name
            assert calls == [(header, _EDGE)], (RequestCode(code).name, calls)


async def test_broker_edge_decodes_each_header_once(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    codes = _edge_decoded(broker_specs())
    assert RequestCode.PULL_MESSAGE in codes and RequestCode.SEND_MESSAGE_V2 not in codes
    assert {RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG} <= codes.keys()
    calls = _count_decodes(monkeypatch, set(codes.values()))
    broker = _broker(tmp_path, "broker-edge")
    try:
        await broker.start()
        await _check_decoded_once(broker.broker_addr, codes, calls)
    finally:
        await broker.shutdown()


async def test_namesrv_edge_decodes_each_header_once(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    codes = _edge_decoded(namesrv_specs())
    assert RequestCode.REGISTER_BROKER in codes
    calls = _count_decodes(monkeypatch, set(codes.values()))
    namesrv = NamesrvController(NamesrvConfig.from_properties({
        "listenPort": "0", "kvConfigPath": str(tmp_path / "kvConfig.json"),
        "configStorePath": str(tmp_path / "namesrv.properties")}))
    await namesrv.start()
    try:
        await _check_decoded_once(namesrv.address, codes, calls)
    finally:
        await namesrv.stop()
