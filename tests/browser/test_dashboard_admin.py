"""``mqdashboard``'s admin pages: subscription groups, a client's running info, a broker's config.

Real nameserver + broker + dashboard processes and the workload of ``workload.py``
(``LIVE_GROUP`` has one running push consumer); the JSON API over HTTP (``Http``), the pages
in headless Chromium. What a change did is checked on the cluster itself through ``MQAdmin``.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import SubscriptionGroupConfig
from tests.browser.conftest import expect, go
from tests.browser.http import Http
from tests.browser.workload import BILLING_GROUP, LIVE_GROUP, LIVE_SENT, LIVE_TOPIC, Workload

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(180)]

NEW_GROUP = "DashNewGroup"


def broker_groups(workload: Workload) -> dict[str, SubscriptionGroupConfig]:
    async def read() -> dict[str, SubscriptionGroupConfig]:
        async with MQAdmin(workload.namesrv_addr) as admin:
            broker = (await admin.brokers(masters_only=True))[0]
            return await admin.subscription_groups(broker.addr)
    return workload.run(read())


def broker_addr(workload: Workload) -> str:
    async def read() -> str:
        async with MQAdmin(workload.namesrv_addr) as admin:
            return (await admin.brokers(masters_only=True))[0].addr
    return workload.run(read())


def test_broker_config_api_and_page(http_api: Http, page: Any, dashboard: str,
                                    workload: Workload, screenshots: Path) -> None:
    addr = broker_addr(workload)
    config = http_api.call("GET", f"/api/brokers/{addr}/config")
    assert config["broker_name"] == "broker-a" and config["broker_id"] == 0
    assert config["config"]["brokerName"] == "broker-a"
    assert config["config"]["brokerClusterName"] == "DefaultCluster"
    http_api.call("GET", "/api/brokers/127.0.0.1:1/config", status=404)  # not of this cluster
    go(page, dashboard, "/cluster")
    page.click(f'#brokers-DefaultCluster td[data-col="addr"] a:text("{addr}")')
    expect(page.locator("#broker-name")).to_have_text("broker-a (0)")
    page.fill("#config-filter", "brokerclustername")
    expect(page.locator("#broker-config tbody tr")).to_have_count(1)
    expect(page.locator('#broker-config tr[data-key="brokerClusterName"] td[data-col="value"]')
           ).to_have_text("DefaultCluster")
    page.screenshot(path=str(screenshots / "broker-config.png"), full_page=True)


def test_consumer_running_info_api_and_page(http_api: Http, page: Any, dashboard: str,
                                            workload: Workload, screenshots: Path) -> None:
    client_id = workload.consumer_client_id
    quoted = urllib.parse.quote(client_id, safe="")  # a client id has '#' in it
    info = http_api.call("GET", f"/api/groups/{LIVE_GROUP}/clients/{quoted}")
    assert [s["topic"] for s in info["subscriptions"] if not s["topic"].startswith("%")] == [
        LIVE_TOPIC]
    assert {q["topic"] for q in info["queues"]} >= {LIVE_TOPIC}
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    http_api.call("GET", f"/api/groups/{LIVE_GROUP}/clients/nobody@1", status=404)
    http_api.call("GET", f"/api/groups/{BILLING_GROUP}/clients/{quoted}", status=404)
    go(page, dashboard, f"/groups/{LIVE_GROUP}")
    page.click(f'#member-table a:text("{client_id}")')
    expect(page.locator("#client-id")).to_have_text(client_id)
    expect(page.locator(f'#client-subs tr[data-key="{LIVE_TOPIC}"]')).to_have_count(1)
    expect(page.locator(f'#client-queues tr[data-key^="{LIVE_TOPIC}/"]')).to_have_count(2)
    expect(page.locator('#client-properties tr[data-key="PROP_CONSUME_TYPE"]')
           ).to_contain_text("CONSUME_PASSIVELY")
    page.screenshot(path=str(screenshots / "client-running-info.png"), full_page=True)


def test_group_create_update_delete_api(http_api: Http, workload: Workload) -> None:
    group = NEW_GROUP + "Api"
    bad = [({"group": group, "cluster": "NoSuchCluster"}, 404),
           ({"group": group}, 400),
           ({"group": group, "cluster": "DefaultCluster", "config": {"retry_max_times": "3"}}, 400),
           ({"group": group, "cluster": "DefaultCluster", "config": {"bogus": 1}}, 400),
           ({"group": "bad group!", "cluster": "DefaultCluster"}, 400)]
    for body, status in bad:
        http_api.call("POST", "/api/groups", body, status=status)
    assert group not in broker_groups(workload)
    # The group list is cached: load it first, so the create below must drop the cache.
    assert http_api.call("GET", f"/api/groups?q={group}")["total"] == 0
    made = http_api.call("POST", "/api/groups", {"group": group, "cluster": "DefaultCluster",
                                                 "config": {"retry_max_times": 3,
                                                            "consume_broadcast_enable": False}})
    assert made["config"]["retry_max_times"] == 3
    on_broker = broker_groups(workload)[group]
    assert on_broker.retry_max_times == 3 and not on_broker.consume_broadcast_enable
    assert http_api.call("GET", f"/api/groups?q={group}")["total"] == 1
    config = http_api.call("GET", f"/api/groups/{group}/config")
    assert config["brokers"][0]["config"]["retry_max_times"] == 3
    http_api.call("DELETE", f"/api/groups/{group}", {"confirm": group[:-1]}, status=400)
    assert group in broker_groups(workload)
    http_api.call("DELETE", f"/api/groups/{group}", {"confirm": group})
    assert group not in broker_groups(workload)
    assert http_api.call("GET", f"/api/groups?q={group}")["total"] == 0
    http_api.call("DELETE", f"/api/groups/{group}", {"confirm": group}, status=404)


def test_group_create_update_delete_pages(page: Any, dashboard: str, workload: Workload,
                                          screenshots: Path) -> None:
    go(page, dashboard, "/groups")
    page.fill("#group-form-name", NEW_GROUP)
    page.fill("#group-form-retries", "5")
    page.click("#create-group")
    expect(page.locator("#flash")).to_contain_text(f"Group {NEW_GROUP} created")
    assert broker_groups(workload)[NEW_GROUP].retry_max_times == 5
    page.click(f'#group-list tr[data-key="{NEW_GROUP}"]')
    expect(page.locator('#group-config tr[data-key="broker-a"] td[data-col="retry_max_times"]')
           ).to_have_text("5")
    page.fill("#group-form-retries", "7")
    page.uncheck("#group-form-consume_enable")
    page.click("#update-group")
    expect(page.locator("#flash")).to_contain_text(f"Group {NEW_GROUP} updated")
    expect(page.locator('#group-config tr[data-key="broker-a"] td[data-col="retry_max_times"]')
           ).to_have_text("7")
    expect(page.locator('#group-config tr[data-key="broker-a"] td[data-col="consume_enable"]')
           ).to_have_text("false")
    assert broker_groups(workload)[NEW_GROUP].retry_max_times == 7
    page.screenshot(path=str(screenshots / "group-config.png"), full_page=True)
    page.click("#delete-group")
    page.fill("#confirm-input", NEW_GROUP)
    page.click("#confirm-ok")
    expect(page.locator("#flash")).to_contain_text(f"Group {NEW_GROUP} deleted")
    expect(page.locator("main")).to_have_attribute("data-route", "/groups")
    expect(page.locator(f'#group-list tr[data-key="{NEW_GROUP}"]')).to_have_count(0)
    assert NEW_GROUP not in broker_groups(workload)


TIME_24H = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
CLOCK_24H = re.compile(r"^\d{2}:\d{2}:\d{2}$")


def test_favicon_24_hour_times_and_chart_units(http_api: Http, page: Any, dashboard: str,
                                               workload: Workload, screenshots: Path) -> None:
    status, headers, body = http_api.raw("GET", "/favicon.ico")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml"
    assert body.startswith(b"<svg")
    expect(page.locator('link[rel="icon"]')).to_have_attribute("href", "/static/favicon.svg")

    go(page, dashboard, "/messages")
    assert TIME_24H.match(page.input_value("#msg-begin")), page.input_value("#msg-begin")
    assert TIME_24H.match(page.input_value("#msg-end"))
    page.fill("#msg-topic", LIVE_TOPIC)
    page.fill("#msg-begin", "2000-01-01 13:00:00")  # typed as 24-hour, whatever the locale
    page.click("#search-time")
    expect(page.locator("#msg-count")).to_have_text(f"{LIVE_SENT} message(s)")
    stored = page.locator("#msg-table tbody tr").first.locator("td").nth(5).inner_text()
    assert TIME_24H.match(stored), stored
    page.fill("#msg-begin", "2000-01-01 25:00:00")
    page.click("#search-time")
    expect(page.locator("#flash")).to_contain_text("is not a time")

    go(page, dashboard, "/live")
    for chart, unit in (("chart-put", "msg/s"), ("chart-get", "msg/s"), ("chart-lag", "messages")):
        expect(page.locator(f"#{chart} text.axis-y")).to_have_text(unit, timeout=15_000)
        expect(page.locator(f"#{chart} text.axis-x")).to_have_text("time (local, 24-hour)")
        expect(page.locator(f"#{chart} h3")).to_contain_text(f"({unit})")
    ticks = page.locator("#chart-put text.tick-x").all_text_contents()  # SVG: no innerText
    assert ticks and all(CLOCK_24H.match(t) for t in ticks), ticks
    page.screenshot(path=str(screenshots / "live-axes.png"), full_page=True)
