"""``mqdashboard``'s Timers page and ``/api/timers`` in headless Chromium.

The broker (timer wheel on, its default) holds timer messages of two topics due in an hour:
the page lists each topic with its pending count, the total, and the master's timer store
row; the JSON API answers the same.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client import Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from tests.browser.conftest import expect, go
from tests.procs import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(180)]

TIMERS = {"DashTimerA": 3, "DashTimerB": 1}


async def _send_timers(namesrv_addr: str, broker_addr: str) -> None:
    async with Producer("PG_dash_timers", namesrv_addr) as producer:
        for topic, count in TIMERS.items():
            await producer.send(Message(topic, b"create"))
            for i in range(count):
                msg = Message(topic, f"{topic}-{i}".encode())
                msg.delay_sec = 3600
                await producer.send(msg)
    async with MQAdmin(namesrv_addr) as admin:
        deadline = time.monotonic() + 60
        while True:
            counts = {t: c for t, (c, _ts) in (await admin.timer_metrics(broker_addr)).items()}
            if counts == TIMERS:
                return
            assert time.monotonic() < deadline, f"timers not counted: {counts}"
            await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def workload(cluster: tuple[ServerProcess, ServerProcess]) -> Iterator[None]:
    """Instead of the usual workload: the timer messages, counted by the broker."""
    asyncio.run(_send_timers(cluster[0].address, cluster[1].address))
    yield None


def test_timers_api(dashboard: str, workload: None) -> None:
    with urllib.request.urlopen(dashboard + "/api/timers", timeout=30) as resp:
        data = json.loads(resp.read())
    assert [(t["topic"], t["pending"], t["brokers"]) for t in data["topics"]] == [
        ("DashTimerA", 3, {"broker-a": 3}), ("DashTimerB", 1, {"broker-a": 1})]
    assert data["total"] == 4
    [broker] = data["brokers"]
    assert broker["broker_name"] == "broker-a" and broker["pending"] == 4 and "error" not in broker


def test_timers_page(page: Any, dashboard: str, workload: None, tmp_path: Path) -> None:
    go(page, dashboard, "/timers")
    expect(page.locator("#timers-total")).to_have_text("4 timers pending")
    expect(page.locator("#timer-topics tbody tr")).to_have_count(2)
    for topic, count in TIMERS.items():
        row = page.locator(f'#timer-topics tr[data-key="{topic}"]')
        expect(row.locator('td[data-col="pending"]')).to_have_text(str(count))
        expect(row).to_contain_text(f"broker-a: {count}")
    expect(page.locator('#timer-brokers tr[data-key="broker-a"] td[data-col="pending"]')).to_have_text("4")
    expect(page.locator('#nav a[data-page="timers"]')).to_have_class("active")
    page.screenshot(path=str(tmp_path / "timers.png"), full_page=True)
