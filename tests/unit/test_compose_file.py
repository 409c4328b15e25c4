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
    assert re.search(r"^FROM python:3\.11-slim-bookworm AS server$", text, re.MULTILINE)
    assert _dockerfile_targets() == {"server", "spark"}
    spark_stage = text.split("AS spark", 1)[1]
    assert "openjdk-17-jre-headless" in spark_stage and ".[spark]" in spark_stage
    for copied in re.findall(r"^COPY\s+(\S+)", text, re.MULTILINE):
        if copied != "pyproject.toml":
            assert (ROOT / copied).exists(), copied


def test_services_build_targets_and_network(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"namesrv", "broker-a", "broker-b", "topics", *SPARK_SERVICES}
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


# Binary packages of the Debian releases a python:*-slim-<codename> base can be, for the
# packages the Dockerfile installs (packages.debian.org). Trixie (13) has no OpenJDK 17.
DEBIAN_PACKAGES = {
    "bookworm": {"openjdk-17-jre-headless", "openjdk-17-jdk-headless", "default-jre-headless"},
    "trixie": {"openjdk-21-jre-headless", "openjdk-25-jre-headless", "default-jre-headless"},
}


def _base_release() -> str:
    text = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^FROM\s+python:\S+?-slim-(\w+)\s+AS server$", text, re.MULTILINE)
    return base


def _apt_installed() -> list[str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out: list[str] = []
    for line in re.findall(r"apt-get install ([^&\n]+)", text):
        out.extend(w for w in line.split() if not w.startswith("-"))
    return out


def test_dockerfile_pins_a_release_that_has_its_packages() -> None:
    # python:3.11-slim moved to Debian 13, where openjdk-17-jre-headless does not exist:
    # the base names its release, and each installed package exists in that release.
    release = _base_release()
    packages = _apt_installed()
    assert packages == ["openjdk-17-jre-headless"]
    assert release in DEBIAN_PACKAGES, release
    missing = [p for p in packages if p not in DEBIAN_PACKAGES[release]]
    assert not missing, f"not in Debian {release}: {missing}"


def test_dockerfile_packages_in_this_machines_apt_cache() -> None:
    # Cross-check of the table on a machine of the same release with apt lists (offline:
    # apt-cache reads the local lists only); skipped elsewhere.
    import shutil
    import subprocess

    os_release = Path("/etc/os-release")
    codename = ""
    if os_release.exists():
        for line in os_release.read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                codename = line.split("=", 1)[1].strip()
    if codename != _base_release() or shutil.which("apt-cache") is None:
        pytest.skip(f"not a Debian {_base_release()} machine")
    lists = Path("/var/lib/apt/lists")
    if not lists.is_dir() or not any(lists.glob("*Packages*")):
        pytest.skip("no apt package lists here")
    for pkg in _apt_installed():
        show = subprocess.run(["apt-cache", "show", "--no-all-versions", pkg],
                              capture_output=True, text=True, timeout=60)
        assert show.returncode == 0 and f"Package: {pkg}" in show.stdout, pkg


def test_dockerfile_java_home_and_mount_points() -> None:
    text = (ROOT / "Dockerfile").read_text()
    (java_home,) = re.findall(r"JAVA_HOME=(\S+)", text)
    assert "amd64" not in java_home and "arm64" not in java_home
    assert "ln -s" in text and java_home in text.split("ENV JAVA_HOME", 1)[0]
    # Every volume mount point of the compose file exists in the image, owned by uid 10001.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = {v.split(":", 1)[1] for svc in compose["services"].values()
              for v in svc.get("volumes", ())}
    assert mounts == {"/home/rocketmq/store", "/home/rocketmq/namesrv",
                      "/home/rocketmq/checkpoint"}
    created = re.search(r"mkdir -p ([^\\&\n]+)", text)
    assert created is not None
    assert mounts <= set(created.group(1).split())
    assert "chown -R rocketmq /home/rocketmq" in text and "--uid 10001" in text


def test_healthchecks_gate_the_start_order(compose: dict[str, Any]) -> None:
    services = compose["services"]
    ns = services["namesrv"]["healthcheck"]["test"]
    assert ns[:3] == ["CMD", "mqadmin", "getNamesrvConfig"]
    assert _option(ns, "-n") == "127.0.0.1:9876"
    for name in ("broker-a", "broker-b"):
        svc = services[name]
        test = svc["healthcheck"]["test"]
        port = _broker_conf(compose, svc)["listenPort"]
        assert test[:3] == ["CMD", "mqadmin", "brokerStatus"]
        assert _option(test, "-b") == f"127.0.0.1:{port}"
        assert svc["depends_on"] == {"namesrv": {"condition": "service_healthy"}}
    driver = services["spark-driver"]["depends_on"]
    assert driver["broker-a"] == driver["broker-b"] == {"condition": "service_healthy"}


def test_pipeline_source_topic_is_created_before_the_job(compose: dict[str, Any]) -> None:
    services = compose["services"]
    topics, driver = services["topics"], services["spark-driver"]
    cmd = topics["command"]
    assert cmd[:2] == ["mqadmin", "updateTopic"]
    assert _option(cmd, "-t") == _option(driver["command"], "--source-topic") == "PipelineIn"
    assert _option(cmd, "-n") == _option(driver["command"], "--name-server") == "namesrv:9876"
    assert _option(cmd, "-c") == _broker_conf(compose, services["broker-a"])["brokerClusterName"]
    assert topics["restart"] == "no"
    assert driver["depends_on"]["topics"] == {"condition": "service_completed_successfully"}
    assert set(topics["depends_on"]) == {"broker-a", "broker-b"}


def test_volumes_keep_the_data(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["namesrv"]["volumes"] == ["namesrv-data:/home/rocketmq/namesrv"]
    named = {v.split(":", 1)[0] for svc in services.values() for v in svc.get("volumes", ())}
    assert named == set(compose["volumes"]) == {"namesrv-data", "broker-a-store",
                                                "broker-b-store", "spark-checkpoint"}
