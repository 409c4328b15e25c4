"""``mqdashboard`` end to end: real nameserver + broker + dashboard processes, headless Chromium.

Each test opens a page the way an operator would, asserts on the numbers the page renders
(against the known workload of ``workload.py``), and saves a full-page screenshot under the
``screenshots`` directory printed at the start (pytest's tmp dir; ``-s`` shows the path).
Tests that change the cluster (create/delete a topic, reset offsets) run after those that
read it, in file order.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.dashboard.auth import hash_password
from aiorocketmq.protocol.errors import TopicNotExistError
from tests.browser.conftest import expect, go, running_dashboard
from tests.browser.workload import (
    BILLING_CONSUMED,
    BILLING_GROUP,
    LIVE_GROUP,
    LIVE_PRODUCER_GROUP,
    LIVE_SENT,
    LIVE_TOPIC,
    ORDER_QUEUES,
    ORDERS,
    ORDERS_TOPIC,
    Workload,
)
from tests.procs import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(180)]

BACKLOG = ORDERS - BILLING_CONSUMED


def shot(page: Any, directory: Path, name: str) -> Path:
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def cell(page: Any, table: str, key: str, col: str) -> Any:
    return page.locator(f'#{table} tr[data-key="{key}"] td[data-col="{col}"]')


def local_input(ms: int) -> str:
    """Epoch ms as an <input type=datetime-local> value in the browser's (our) time zone."""
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M:%S")


def test_cluster_page(page: Any, dashboard: str, workload: Workload, screenshots: Path) -> None:
    go(page, dashboard, "/cluster")
    row = page.locator('#brokers-DefaultCluster tr[data-key="broker-a/0"]')
    expect(row).to_contain_text("MASTER (0)")
    expect(row).to_contain_text("V4_9_8")
    put_today = int(cell(page, "brokers-DefaultCluster", "broker-a/0", "put_today")
                    .inner_text().replace(",", ""))
    assert put_today >= ORDERS + LIVE_SENT
    expect(cell(page, "brokers-DefaultCluster", "broker-a/0", "repl_lag")).to_have_text("-")
    shot(page, screenshots, "cluster")


def test_topic_list_and_route(page: Any, dashboard: str, workload: Workload,
                              screenshots: Path) -> None:
    go(page, dashboard, "/topics")
    page.fill("#topic-search", "Dash")
    page.press("#topic-search", "Enter")
    expect(page.locator("#topic-list tbody tr")).to_have_count(2)
    expect(page.locator("#topic-list")).to_contain_text(ORDERS_TOPIC)
    page.click(f'#topic-list tr[data-key="{ORDERS_TOPIC}"]')
    expect(page.locator("#topic-name")).to_have_text(ORDERS_TOPIC)
    expect(page.locator("#topic-total")).to_have_text(str(ORDERS))
    expect(page.locator("#queue-table tbody tr")).to_have_count(ORDER_QUEUES)
    for qid in range(ORDER_QUEUES):
        expect(cell(page, "queue-table", f"broker-a/{qid}", "max")).to_have_text(
            str(ORDERS // ORDER_QUEUES))
        expect(cell(page, "queue-table", f"broker-a/{qid}", "min")).to_have_text("0")
    expect(page.locator("#topic-groups")).to_contain_text(BILLING_GROUP)
    shot(page, screenshots, "topic")


def test_group_list_and_lag(page: Any, dashboard: str, workload: Workload,
                            screenshots: Path) -> None:
    go(page, dashboard, "/groups")
    expect(cell(page, "group-list", BILLING_GROUP, "lag")).to_have_text(str(BACKLOG))
    expect(cell(page, "group-list", BILLING_GROUP, "members")).to_have_text("0")
    expect(cell(page, "group-list", LIVE_GROUP, "members")).to_have_text("1")
    expect(cell(page, "group-list", LIVE_GROUP, "lag")).to_have_text("0", timeout=30_000)
    shot(page, screenshots, "groups")
    page.click(f'#group-list tr[data-key="{BILLING_GROUP}"]')
    expect(page.locator("#group-lag")).to_have_text(str(BACKLOG))
    expect(page.locator("#group-state")).to_have_text("offline")
    for qid in range(ORDER_QUEUES):
        key = f"{ORDERS_TOPIC}/broker-a/{qid}"
        expect(cell(page, "lag-table", key, "consumer_offset")).to_have_text(
            str(BILLING_CONSUMED // ORDER_QUEUES))
        expect(cell(page, "lag-table", key, "lag")).to_have_text(
            str((ORDERS - BILLING_CONSUMED) // ORDER_QUEUES))
    shot(page, screenshots, "group")


def test_live_charts_refresh(page: Any, dashboard: str, workload: Workload,
                             screenshots: Path) -> None:
    go(page, dashboard, "/live")
    expect(cell(page, "live-lag", BILLING_GROUP, "lag")).to_have_text(str(BACKLOG))
    status = page.locator("#live-status")
    expect(status).to_contain_text("sample(s)")
    before = status.inner_text()
    # The page polls /api/live: new samples arrive with no reload (the page's CSP forbids
    # eval, so no wait_for_function here; the text itself must change).
    expect(status).not_to_have_text(before, timeout=15_000)
    assert int(status.inner_text().split()[0]) > int(before.split()[0])
    expect(page.locator('#chart-put polyline[data-series="broker-a"]')).to_have_count(1)
    expect(page.locator(f'#chart-lag polyline[data-series="{BILLING_GROUP}"]')).to_have_count(1)
    shot(page, screenshots, "live")


def test_messages_by_key_time_and_id(page: Any, dashboard: str, workload: Workload,
                                     screenshots: Path) -> None:
    go(page, dashboard, "/messages")
    page.fill("#msg-topic", ORDERS_TOPIC)
    page.fill("#msg-key", "order-7")
    page.click("#search-key")
    expect(page.locator("#msg-table tbody tr")).to_have_count(1)
    expect(page.locator("#msg-table")).to_contain_text("order-7")
    page.fill("#msg-begin", local_input(workload.started_ms - 60_000))
    page.click("#search-time")
    expect(page.locator("#msg-count")).to_have_text(f"{ORDERS} message(s)")
    shot(page, screenshots, "messages")
    page.fill("#msg-key", "order-7")
    page.click("#search-key")
    expect(page.locator("#msg-table tbody tr")).to_have_count(1)
    msg_id = page.locator('#msg-table td[data-col="msg_id"]').inner_text()
    page.click("#msg-table tbody tr")
    expect(page.locator("#message-id")).to_have_text(msg_id)
    expect(page.locator("#message-body")).to_contain_text('"item": "widget-7"')
    page.select_option("#preview-mode", "json")
    expect(page.locator("#message-body")).to_contain_text('"amount": 70')
    page.select_option("#preview-mode", "hex")
    expect(page.locator("#message-body")).to_contain_text("7b 22 6f 72 64 65 72 22")
    expect(page.locator('#property-table tr[data-key="KEYS"]')).to_contain_text("order-7")
    shot(page, screenshots, "message")
    go(page, dashboard, "/messages")  # by id (the unique key), without a topic
    page.fill("#msg-id", msg_id)
    page.click("#search-id")
    expect(page.locator("#message-id")).to_have_text(msg_id)
    expect(page.locator("#message-body")).to_contain_text('"order": 7')


def test_connections(page: Any, dashboard: str, workload: Workload, screenshots: Path) -> None:
    go(page, dashboard, f"/connections?producer_group={LIVE_PRODUCER_GROUP}&topic={LIVE_TOPIC}")
    consumers = page.locator(f'#consumer-connections tr[data-key="{LIVE_GROUP}"]')
    expect(consumers).to_have_count(1)
    expect(consumers).to_contain_text(workload.consumer_client_id)
    expect(consumers).to_contain_text("V4_9_")
    producers = page.locator("#producer-connections tbody tr")
    expect(producers).to_have_count(1)
    expect(producers).to_contain_text(workload.producer_client_id)
    shot(page, screenshots, "connections")


def test_send_then_resend(page: Any, dashboard: str, workload: Workload, screenshots: Path) -> None:
    go(page, dashboard, f"/topics/{LIVE_TOPIC}")
    page.fill("#send-body", "hello from the dashboard")
    page.fill("#send-keys", "dash-sent")
    page.click("#send-button")
    link = page.locator("#sent-msg-id")
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("#message-body")).to_have_text("hello from the dashboard")
    page.select_option("#resend-group", LIVE_GROUP)
    page.click("#resend-button")
    expect(page.locator("#resend-result")).to_contain_text("CR_SUCCESS")
    expect(page.locator("#resend-result")).to_contain_text(workload.consumer_client_id)


def test_create_and_delete_topic(page: Any, dashboard: str, workload: Workload,
                                 cluster: tuple[ServerProcess, ServerProcess],
                                 screenshots: Path) -> None:
    topic = "DashCreated"
    go(page, dashboard, "/topics")
    page.fill("#new-topic-name", topic)
    page.fill("#new-topic-read", "3")
    page.fill("#new-topic-write", "3")
    page.click("#create-topic")
    expect(page.locator("#flash")).to_contain_text(f"Topic {topic} created")
    page.click(f'#topic-list tr[data-key="{topic}"]')
    expect(page.locator("#topic-queues")).to_have_text("3")
    expect(page.locator("#topic-total")).to_have_text("0")
    page.click("#delete-topic")
    expect(page.locator("#confirm-dialog")).to_be_visible()
    expect(page.locator("#confirm-ok")).to_be_disabled()
    page.fill("#confirm-input", topic[:-1])  # a near miss does not enable the button
    expect(page.locator("#confirm-ok")).to_be_disabled()
    page.fill("#confirm-input", topic)
    page.click("#confirm-ok")
    expect(page.locator("#flash")).to_contain_text(f"Topic {topic} deleted")
    expect(page.locator(f'#topic-list tr[data-key="{topic}"]')).to_have_count(0)
    expect(page.locator(f'#topic-list tr[data-key="{ORDERS_TOPIC}"]')).to_have_count(1)
    shot(page, screenshots, "topics")

    async def route_gone() -> bool:
        async with MQAdmin(cluster[0].address) as admin:
            try:
                await admin.topic_route(topic)
            except TopicNotExistError:
                return True
            return False

    # Playwright's sync API owns this thread's loop: ask from the workload's loop thread.
    assert workload.run(route_gone())


def test_reset_offset_changes_lag(page: Any, dashboard: str, workload: Workload,
                                  screenshots: Path) -> None:
    go(page, dashboard, f"/groups/{BILLING_GROUP}")
    expect(page.locator("#group-lag")).to_have_text(str(BACKLOG))
    page.select_option("#reset-topic", ORDERS_TOPIC)
    page.fill("#reset-time", local_input(workload.started_ms - 60_000))
    page.click("#reset-button")
    page.click("#confirm-cancel")  # cancelled: nothing changes
    expect(page.locator("#group-lag")).to_have_text(str(BACKLOG))
    page.click("#reset-button")
    page.fill("#confirm-input", BILLING_GROUP)
    page.click("#confirm-ok")
    expect(page.locator("#flash")).to_contain_text("reset (offline)")
    expect(page.locator("#group-lag")).to_have_text(str(ORDERS))
    shot(page, screenshots, "group-reset")
    page.click("#skip-button")
    page.fill("#confirm-input", BILLING_GROUP)
    page.click("#confirm-ok")
    expect(page.locator("#flash")).to_contain_text("reset (offline)")
    expect(page.locator("#group-lag")).to_have_text("0")


def test_login_then_viewer_cannot_delete(browser_context: Any, cluster: tuple[ServerProcess, ServerProcess],
                                         tmp_path: Path, screenshots: Path) -> None:
    """A dashboard with [users]: the login page, a viewer's refused delete, sign out."""
    config = f'[users.vera]\npassword_hash = "{hash_password("pa55")}"\nrole = "viewer"\n'
    with running_dashboard(tmp_path, cluster[0].address, config=config) as base:
        page = browser_context.new_page()
        try:
            page.goto(base + "/#/topics")
            expect(page.locator("#login-form")).to_be_visible()  # sent to the login page
            page.fill("#login-user", "vera")
            page.fill("#login-password", "wrong")
            page.click("#login-button")
            expect(page.locator("#flash")).to_contain_text("wrong username or password")
            page.fill("#login-password", "pa55")
            page.click("#login-button")
            expect(page.locator("#whoami")).to_contain_text("vera (viewer)")
            go(page, base, f"/topics/{ORDERS_TOPIC}")
            expect(page.locator("#topic-total")).to_have_text(str(ORDERS))
            page.click("#delete-topic")
            page.fill("#confirm-input", ORDERS_TOPIC)
            page.click("#confirm-ok")
            expect(page.locator("#flash")).to_contain_text("may only read")
            expect(page.locator("#topic-total")).to_have_text(str(ORDERS))
            shot(page, screenshots, "viewer-refused")
            page.click("#logout")
            expect(page.locator("#login-form")).to_be_visible()
        finally:
            page.close()
