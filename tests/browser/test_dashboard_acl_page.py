"""``mqdashboard``'s ACL page against a broker with ``aclEnable=true``.

The broker reads ``<rocketmq home>/conf/plain_acl.yml`` with one admin account; the dashboard
signs with it (``[acl]`` in its config file). Accounts and the global white list are changed
through the JSON API over HTTP and through the page in headless Chromium, and each change is
checked in the broker's own ``plain_acl.yml``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.browser.conftest import expect, go, running_dashboard
from tests.browser.http import Http
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(180)]

ADMIN_AK, ADMIN_SK = "dashadmin", "dash-secret-1"
PLAIN_ACL = {"globalWhiteRemoteAddresses": ["10.10.10.*"],
             "accounts": [{"accessKey": ADMIN_AK, "secretKey": ADMIN_SK, "admin": True}]}


@pytest.fixture(scope="module")
def acl_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The broker's plain_acl.yml (the broker runs while this fixture is live)."""
    home = tmp_path_factory.mktemp("rmqhome")
    (home / "conf").mkdir()
    path = home / "conf" / "plain_acl.yml"
    path.write_text(yaml.safe_dump(PLAIN_ACL))
    tmp = tmp_path_factory.mktemp("acl-page")
    ns: ServerProcess = namesrv_process(tmp).start()
    br = broker_process(tmp, ns.address, conf={"aclEnable": "true"},
                        extra=(f"-Drocketmq.home.dir={home}",))
    try:
        br.start()
        path.with_suffix(".namesrv").write_text(ns.address)
        yield path
    finally:
        br.stop()
        ns.stop()
        print(f"---- broker ----\n{br.log_tail(40)}")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, acl_file: Path) -> Iterator[str]:
    config = f'[acl]\naccess_key = "{ADMIN_AK}"\nsecret_key = "{ADMIN_SK}"\n'
    namesrv = acl_file.with_suffix(".namesrv").read_text()
    with running_dashboard(tmp_path_factory.mktemp("acl-dash"), namesrv, config=config) as base:
        yield base


def on_disk(acl_file: Path) -> dict[str, Any]:
    data = yaml.safe_load(acl_file.read_text())
    return {"white": data.get("globalWhiteRemoteAddresses") or [],
            "accounts": {a["accessKey"]: a for a in data.get("accounts") or []}}


def test_acl_api(http_api: Http, acl_file: Path) -> None:
    got = http_api.call("GET", "/api/acl")["brokers"]
    assert len(got) == 1 and got[0]["error"] is None
    assert got[0]["global_white_addrs"] == ["10.10.10.*"]
    admin = {a["access_key"]: a for a in got[0]["accounts"]}[ADMIN_AK]
    assert admin["admin"] and admin["secret_key"] == "*" * len(ADMIN_SK)  # never the secret

    account = {"access_key": "apiuser01", "secret_key": "api-secret-01",
               "default_topic_perm": "DENY", "topic_perms": ["AclTopicA=PUB"],
               "group_perms": ["AclGroupA=SUB"]}
    for bad in ({**account, "topic_perms": ["AclTopicA=WRITE"]}, {**account, "secret_key": ""},
                {**account, "default_group_perm": "ALL"}, {**account, "admin": "yes"}):
        http_api.call("POST", "/api/acl/accounts", bad, status=400)
    assert "apiuser01" not in on_disk(acl_file)["accounts"]
    http_api.call("POST", "/api/acl/accounts", account)
    saved = on_disk(acl_file)["accounts"]["apiuser01"]
    assert saved["secretKey"] == "api-secret-01" and saved["topicPerms"] == ["AclTopicA=PUB"]
    listed = {a["access_key"]: a for a in http_api.call("GET", "/api/acl")["brokers"][0]["accounts"]}
    assert listed["apiuser01"]["topic_perms"] == ["AclTopicA=PUB"]

    http_api.call("DELETE", "/api/acl/accounts/apiuser01", {"confirm": "apiuser0"}, status=400)
    assert "apiuser01" in on_disk(acl_file)["accounts"]
    http_api.call("DELETE", "/api/acl/accounts/apiuser01", {"confirm": "apiuser01"})
    assert "apiuser01" not in on_disk(acl_file)["accounts"]

    http_api.call("PUT", "/api/acl/white-list", {"addrs": "10.0.0.*"}, status=400)
    http_api.call("PUT", "/api/acl/white-list", {"addrs": ["10.0.0.*", "192.168.1.*"]})
    assert on_disk(acl_file)["white"] == ["10.0.0.*", "192.168.1.*"]


def test_acl_page(page: Any, dashboard: str, acl_file: Path, screenshots: Path) -> None:
    go(page, dashboard, "/acl")
    expect(page.locator(f'#acl-accounts tr[data-key="{ADMIN_AK}"] td[data-col="admin"]')
           ).to_have_text("yes")
    page.fill("#acl-ak", "pageuser01")
    page.fill("#acl-sk", "page-secret-01")
    page.fill("#acl-topic-perms", "AclTopicB=SUB, AclTopicC=PUB|SUB")
    page.select_option("#acl-topic-perm", "DENY")
    page.click("#acl-save")
    expect(page.locator("#flash")).to_contain_text("Account pageuser01 saved")
    expect(page.locator('#acl-accounts tr[data-key="pageuser01"] td[data-col="topic_perms"]')
           ).to_have_text("AclTopicB=SUB, AclTopicC=PUB|SUB")
    assert on_disk(acl_file)["accounts"]["pageuser01"]["defaultTopicPerm"] == "DENY"
    page.fill("#acl-global-white", "172.16.0.*")
    page.click("#acl-white-save")
    expect(page.locator("#flash")).to_contain_text("Global white list saved: 172.16.0.*")
    assert on_disk(acl_file)["white"] == ["172.16.0.*"]
    page.screenshot(path=str(screenshots / "acl.png"), full_page=True)
    page.click('#acl-accounts button[data-delete="pageuser01"]')
    page.fill("#confirm-input", "pageuser01")
    page.click("#confirm-ok")
    expect(page.locator("#flash")).to_contain_text("Account pageuser01 deleted")
    expect(page.locator('#acl-accounts tr[data-key="pageuser01"]')).to_have_count(0)
    assert "pageuser01" not in on_disk(acl_file)["accounts"]
