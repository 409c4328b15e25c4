"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine here)."""

from __future__ import annotations

import importlib.util
import ipaddress
import re
import tomllib
import zipfile
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


def _depends_on(service: dict[str, Any]) -> set[str]:
    """Service names from either depends_on syntax (list, or map with conditions)."""
    return set(service.get("depends_on", ()))


def _option(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def _confs(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")


def _pyspark_dir() -> Path | None:
    spec = importlib.util.find_spec("pyspark")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _workdir() -> str:
    text = (ROOT / "Dockerfile").read_text()
    return re.findall(r"^WORKDIR\s+(\S+)", text, re.MULTILINE)[0]


SPARK_SERVICES = ("spark-master", "spark-worker", "spark-driver")
MASTER_URL = "spark://spark-master:7077"


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
    assert set(services) == {"namesrv", "broker-a", "broker-b", *SPARK_SERVICES}
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
    for name in SPARK_SERVICES:  # one image: driver and executors share Python and packages
        assert services[name]["build"]["target"] == "spark", name
    assert services["namesrv"]["build"]["target"] == "server"


def test_commands_refer_to_existing_scripts_and_modules(compose: dict[str, Any],
                                                         scripts: dict[str, str]) -> None:
    pyspark = _pyspark_dir()
    for name, svc in compose["services"].items():
        cmd = svc["command"]
        if cmd[0] == "python":
            assert cmd[1] == "-m", name
            assert _module_exists(cmd[2]), f"{name}: module {cmd[2]} does not exist"
        elif cmd[0] in ("spark-class", "spark-submit"):
            # pyspark's own launchers (pip puts them on PATH next to python).
            if pyspark is not None:
                assert (pyspark / "bin" / cmd[0]).exists(), f"{name}: {cmd[0]}"
        else:
            assert cmd[0] in scripts, f"{name}: {cmd[0]} is not a console script"
            module = scripts[cmd[0]].split(":")[0]
            assert _module_exists(module), f"{name}: {module} does not exist"
    # spark-submit takes the application as a file: the image's copy of examples/.
    driver = compose["services"]["spark-driver"]["command"]
    (app,) = [arg for arg in driver if arg.endswith(".py")]
    workdir = _workdir().rstrip("/") + "/"
    assert app.startswith(workdir)
    relative = app.removeprefix(workdir)
    assert relative == "examples/spark_pipeline.py" and (ROOT / relative).is_file()
    copied = re.findall(r"^COPY\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert "examples" in copied


def test_spark_daemon_classes_exist_in_pyspark(compose: dict[str, Any]) -> None:
    pyspark = _pyspark_dir()
    if pyspark is None:
        pytest.skip("pyspark is not installed (the spark extra)")
    classes = {svc["command"][1] for svc in compose["services"].values()
               if svc["command"][0] == "spark-class"}
    assert classes == {"org.apache.spark.deploy.master.Master",
                       "org.apache.spark.deploy.worker.Worker"}
    (core,) = (pyspark / "jars").glob("spark-core_*.jar")
    with zipfile.ZipFile(core) as jar:
        names = set(jar.namelist())
    for cls in classes:
        assert cls.replace(".", "/") + ".class" in names, cls


def test_spark_standalone_cluster_wiring(compose: dict[str, Any]) -> None:
    services = compose["services"]
    master, worker, driver = (services[n] for n in SPARK_SERVICES)
    m_cmd, w_cmd, d_cmd = master["command"], worker["command"], driver["command"]
    # The master listens where the worker and the job look for it.
    assert MASTER_URL == f"spark://{_option(m_cmd, '--host')}:{_option(m_cmd, '--port')}"
    assert w_cmd[2] == MASTER_URL
    assert _option(d_cmd, "--master") == MASTER_URL
    assert _option(d_cmd, "--deploy-mode") == "client"
    # Executors connect back to the driver by its service name.
    confs = _confs(d_cmd)
    assert confs["spark.driver.host"] == "spark-driver"
    assert confs["spark.driver.bindAddress"] == "0.0.0.0"
    # Startup order: worker after master; the job after both and the brokers.
    assert "spark-master" in _depends_on(worker)
    assert {"spark-master", "spark-worker", "broker-a", "broker-b"} <= _depends_on(driver)
    # Web UIs published on the ports the daemons serve them on.
    assert f"{_option(m_cmd, '--webui-port')}:8080" in master["ports"]
    assert f"{_option(w_cmd, '--webui-port')}:8081" in worker["ports"]
    assert "4040:4040" in driver["ports"]
    # The worker's executors can write the work dir and the checkpoint's state store.
    assert _option(w_cmd, "--work-dir").startswith("/tmp/")
    checkpoint = _option(d_cmd, "--checkpoint")
    for svc in (worker, driver):
        assert f"spark-checkpoint:{checkpoint}" in svc["volumes"]
    # Driver and executors run the same Python, the image's (which has the package).
    pythons = {services[n].get("environment", {}).get("PYSPARK_PYTHON") for n in SPARK_SERVICES}
    assert len(pythons) == 1 and None not in pythons
    env = re.search(r"PYSPARK_PYTHON=(\S+)", (ROOT / "Dockerfile").read_text())
    if env is not None:
        assert pythons == {env.group(1)}


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
    spark_cmd = services["spark-driver"]["command"]
    assert spark_cmd[spark_cmd.index("--name-server") + 1] == "namesrv:9876"


def test_named_volumes_are_used(compose: dict[str, Any]) -> None:
    used = {v.split(":")[0] for svc in compose["services"].values() for v in svc.get("volumes", [])}
    assert used == set(compose["volumes"])
