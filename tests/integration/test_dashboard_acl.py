"""mqdashboard against a broker with aclEnable=true: with [acl] credentials the dashboard's
admin client signs every request (upstream AclClientRPCHook) and the admin account may create
and delete topics; without them the broker refuses, the API says so (502 with the broker's
remark) and nothing is created."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from aiorocketmq.client.dashboard.app import CSRF_HEADER, build_app
from aiorocketmq.client.dashboard.config import DashboardConfig
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PLAIN_ACL = {"accounts": [{"accessKey": "dashadmin", "secretKey": "dash-secret-1", "admin": True}]}


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("rmqhome")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL))
    tmp = tmp_path_factory.mktemp("dash-acl")
    ns: ServerProcess = namesrv_process(tmp).start()
    br = broker_process(tmp, ns.address, conf={"aclEnable": "true"},
                        extra=(f"-Drocketmq.home.dir={home}",))
    try:
        br.start()
        yield ns.address
    finally:
        br.stop()
        ns.stop()
        print(f"---- broker ----\n{br.log_tail(60)}")


async def _post_topic(config: DashboardConfig, topic: str) -> tuple[int, dict[str, str], list[str]]:
    """(status, body) of creating ``topic``, and the topic names the dashboard then lists."""
    client: TestClient = TestClient(TestServer(build_app(config)))  # type: ignore[type-arg]
    await client.start_server()
    try:
        csrf = (await (await client.get("/api/session")).json())["csrf_token"]
        resp = await client.post("/api/topics", json={"topic": topic, "cluster": "DefaultCluster"},
                                 headers={CSRF_HEADER: csrf})
        body = await resp.json()
        listed = await (await client.get(f"/api/topics?q={topic}")).json()
        return resp.status, body, [t["topic"] for t in listed["topics"]]
    finally:
        await client.close()


async def test_signed_admin_changes_topics(acl_cluster: str) -> None:
    config = DashboardConfig(namesrv_addr=acl_cluster, access_key="dashadmin",
                             secret_key="dash-secret-1", sample_interval_ms=60_000)
    status, body, listed = await _post_topic(config, "AclDashT")
    assert status == 200, body
    assert listed == ["AclDashT"]


async def test_unsigned_dashboard_is_refused_and_creates_nothing(acl_cluster: str) -> None:
    config = DashboardConfig(namesrv_addr=acl_cluster, sample_interval_ms=60_000)
    status, body, listed = await _post_topic(config, "AclNoCreds")
    assert status == 502 and "refused" in body["error"], body
    assert listed == []


async def test_config_file_acl_section(tmp_path: Path) -> None:
    from aiorocketmq.client.dashboard.app import open_admin
    from aiorocketmq.client.dashboard.config import load_config_file

    path = tmp_path / "d.toml"
    path.write_text('namesrv_addr = "127.0.0.1:1"\n[acl]\naccess_key = "ak"\nsecret_key = "sk"\n')
    admin = open_admin(DashboardConfig.from_settings(load_config_file(path)))
    try:
        assert admin.config.access_key == "ak" and admin.remoting.rpc_hook is not None
    finally:
        await admin.close()
