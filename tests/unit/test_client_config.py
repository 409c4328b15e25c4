"""ClientConfig.serialize_type: Java's ``rocketmq.serialize.type`` (docs/PROTOCOL.md 1)."""

from __future__ import annotations

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.protocol.codes import SerializeType
from aiorocketmq.protocol.errors import MQClientError


def test_serialize_type_defaults_to_json_and_takes_names_or_members(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_SERIALIZE_TYPE", raising=False)
    assert ClientConfig().serialize_type is SerializeType.JSON
    assert ClientConfig(serialize_type="ROCKETMQ").serialize_type is SerializeType.ROCKETMQ  # type: ignore[arg-type]
    assert ClientConfig(serialize_type=SerializeType.ROCKETMQ).serialize_type is SerializeType.ROCKETMQ
    copy = ClientConfig(serialize_type=SerializeType.ROCKETMQ).replace(instance_name="x")
    assert copy.serialize_type is SerializeType.ROCKETMQ
    with pytest.raises(MQClientError, match="serialize_type"):
        ClientConfig(serialize_type="XML")  # type: ignore[arg-type]


def test_serialize_type_environment_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # RemotingCommand.serializeTypeConfigInThisServer falls back to ROCKETMQ_SERIALIZE_TYPE.
    monkeypatch.setenv("ROCKETMQ_SERIALIZE_TYPE", "ROCKETMQ")
    assert ClientConfig().serialize_type is SerializeType.ROCKETMQ
    assert ClientConfig(serialize_type="JSON").serialize_type is SerializeType.JSON  # type: ignore[arg-type]


def test_with_options_applies_only_the_given_ones() -> None:
    base = ClientConfig(namesrv_addr="127.0.0.1:9876", namespace="ns")
    assert base.with_options(namesrv_addr=None, namespace=None) is base
    changed = base.with_options(namesrv_addr="127.0.0.1:9877", namespace=None,
                                instance_name="i1")
    assert (changed.namesrv_addr, changed.namespace, changed.instance_name) == (
        "127.0.0.1:9877", "ns", "i1")
    with pytest.raises(MQClientError, match="namesrv_addr"):
        base.with_options(namesrv_addr="no-port")


def test_namesrv_addr_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Upstream ClientConfig: namesrvAddr = NameServerAddressUtils.getNameServerAddresses().
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876")
    assert ClientConfig().namesrv_addresses == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert ClientConfig(namesrv_addr="h:1").namesrv_addresses == ["h:1"]
    monkeypatch.delenv("NAMESRV_ADDR")
    assert ClientConfig().namesrv_addresses == []
