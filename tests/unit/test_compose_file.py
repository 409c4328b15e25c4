"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine here)."""

from __future__ import annotations

import importlib.util
import ipaddress
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _dockerfile_targets() -> set[str]:
    text = (ROOT / "Dockerfile").read_text()
    return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE))


def _module_exists(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _broker_conf(compose: dict[str, Any], service: dict[str, Any]) -> dict[str, str]:
    (ref,) = service["configs"]
    content = compose["configs"][ref["source"]]["content"]
    return dict(line.split("=", 1) for line in content.splitlines() if line.strip())


def test_dockerfile_targets() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim AS server$", text, re.MULTILINE)
    assert _dockerfile_targets() == {"server", "spark"}
    spark_stage = text.split("AS spark", 1)[1]
    assert "openjdk-17-jre-headless" in spark_stage and ".[spark]" in spark_stage
    for copied in re.findall(r"^COPY\s+(\S+)", text, re.MULTILINE):
        if copied != "pyproject.toml":
            assert (ROOT / copied).exists(), copied


def test_services_build_targets_and_network(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"namesrv", "broker-a", "broker-b", "spark"}
    targets = _dockerfile_targets()
    subnet = ipaddress.ip_network(compose["networks"]["rocketmq"]["ipam"]["config"][0]["subnet"])
    ips = set()
    for svc in services.values():
        assert svc["build"]["context"] == "."
        assert svc["build"]["target"] in targets
        ip = ipaddress.ip_address(svc["networks"]["rocketmq"]["ipv4_address"])
        assert ip in subnet
        ips.add(ip)
    assert len(ips) == len(services)
    assert services["spark"]["build"]["target"] == "spark"
    assert services["namesrv"]["build"]["target"] == "server"


def test_commands_refer_to_existing_scripts_and_modules(compose: dict[str, Any],
                                                         scripts: dict[str, str]) -> None:
    for name, svc in compose["services"].items():
        cmd = svc["command"]
        if cmd[0] == "python":
            assert cmd[1] == "-m", name
            assert _module_exists(cmd[2]), f"{name}: module {cmd[2]} does not exist"
        else:
            assert cmd[0] in scripts, f"{name}: {cmd[0]} is not a console script"
            module = scripts[cmd[0]].split(":")[0]
            assert _module_exists(module), f"{name}: {module} does not exist"
    assert compose["services"]["spark"]["command"][2] == "examples.spark_pipeline"


def test_brokers_register_with_the_namesrv_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    names = set()
    for name in ("broker-a", "broker-b"):
        svc = services[name]
        conf = _broker_conf(compose, svc)
        cmd = svc["command"]
        assert cmd[cmd.index("-n") + 1] == "namesrv:9876"
        assert conf["namesrvAddr"] == "namesrv:9876"
        assert "namesrv" in svc["depends_on"]
        # brokerIP1 must be the broker's own fixed IP.
        assert conf["brokerIP1"] == svc["networks"]["rocketmq"]["ipv4_address"]
        assert conf["brokerName"] == name
        names.add(conf["brokerName"])
        store = conf["storePathRootDir"]
        (volume,) = svc["volumes"]
        vol_name, mount = volume.split(":")
        assert mount == store and vol_name in compose["volumes"]
    assert names == {"broker-a", "broker-b"}
    ports = {_broker_conf(compose, services[n])["listenPort"] for n in ("broker-a", "broker-b")}
    assert len(ports) == 2
    ns_cmd = services["namesrv"]["command"]
    assert ns_cmd[ns_cmd.index("--port") + 1] == "9876"
    spark_cmd = services["spark"]["command"]
    assert spark_cmd[spark_cmd.index("--name-server") + 1] == "namesrv:9876"


def test_named_volumes_are_used(compose: dict[str, Any]) -> None:
    used = {v.split(":")[0] for svc in compose["services"].values() for v in svc.get("volumes", [])}
    assert used == set(compose["volumes"])
