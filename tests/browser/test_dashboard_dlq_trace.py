"""``mqdashboard``'s dead-letter queue (view, export, resend) and message trace pages.

A broker with ``traceTopicEnable=true``; a producer with message trace on sends ``SENT``
messages to ``TOPIC``; ``DEAD`` of them are sent back by ``GROUP`` with delay level -1, as a
consumer does past its retries, so the broker stores them in ``%DLQ%<GROUP>``. A push
consumer of ``GROUP`` is online to take resent dead letters. The JSON API over HTTP, the
pages in headless Chromium.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.push_consumer import PushConsumer
from aiorocketmq.protocol.bodies import MessageQueue, SubscriptionGroupConfig, TopicConfig
from aiorocketmq.protocol.message import Message
from tests.browser.conftest import expect, running_dashboard
from tests.browser.http import Http
from tests.browser.workload import ConsumerThread
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "DlqOrders"
GROUP = "DlqGroup"
PRODUCER_GROUP = "DlqTraceProducer"
SENT = 4
DEAD = 3


class DeadLetters(ConsumerThread):
    """See the module docstring; ``sent`` are the send results, ``started_ms`` before them."""

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__("dlq-workload", namesrv_addr)
        self.sent_ids: list[str] = []
        self.dead_ids: list[str] = []
        self.started_ms = 0

    async def _aopen(self) -> None:
        async with MQAdmin(self.namesrv_addr) as admin:
            broker = (await admin.brokers(masters_only=True))[0]
            await admin.create_topic(broker.addr, TopicConfig(TOPIC, read_queue_nums=1,
                                                              write_queue_nums=1))
            await admin.create_subscription_group(broker.addr,
                                                  SubscriptionGroupConfig(group_name=GROUP))
            self.started_ms = time.time_ns() // 1_000_000 - 1000
            async with Producer(PRODUCER_GROUP, self.namesrv_addr, enable_msg_trace=True) as p:
                for i in range(SENT):
                    result = await p.send(Message(TOPIC, f"dead-{i}".encode(), keys=f"dlq-{i}"),
                                          MessageQueue(TOPIC, broker.broker_name, 0))
                    self.sent_ids.append(result.msg_id)
            pulled = await admin.pull(broker.addr, MessageQueue(TOPIC, broker.broker_name, 0), 0,
                                      SENT)
            for msg in pulled.msg_found_list[:DEAD]:
                await admin.api.consumer_send_message_back(
                    broker.addr, broker.broker_name, msg, GROUP, -1, 16, admin.timeout)
                self.dead_ids.append(msg.msg_id)
        self.consumer = PushConsumer(GROUP, self.namesrv_addr)
        self.consumer.subscribe(TOPIC, "*")
        self.consumer.register_message_listener(self._on_messages)
        await self.consumer.start()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with namesrv_and_broker(tmp_path_factory.mktemp("dlq"),
                            conf={"traceTopicEnable": "true"}) as pair:
        yield pair


@pytest.fixture(scope="module")
def dead(cluster: tuple[ServerProcess, ServerProcess]) -> Iterator[DeadLetters]:
    with DeadLetters(cluster[0].address) as d:
        yield d


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, cluster: tuple[ServerProcess, ServerProcess],
              dead: DeadLetters) -> Iterator[str]:
    with running_dashboard(tmp_path_factory.mktemp("dlq-dash"), cluster[0].address) as base:
        yield base


def wait_for(what: str, probe: Any, deadline_s: float = 60.0) -> Any:
    """Poll ``probe()`` until it returns something true; fail after the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def dlq_range(dead: DeadLetters) -> str:
    return f"group={GROUP}&begin={dead.started_ms - 60_000}&end={time.time_ns() // 1_000_000 + 60_000}"


def go(page: Any, base: str, fragment: str) -> None:
    page.goto(f"{base}/#{fragment}")
    expect(page.locator("main")).to_have_attribute("data-route", fragment)
    expect(page.locator("main")).to_have_attribute("aria-busy", "false")


def test_dlq_api_lists_exports_and_resends(http_api: Http, dead: DeadLetters) -> None:
    listed = wait_for("the dead letters", lambda: [
        r for r in [http_api.call("GET", f"/api/dlq?{dlq_range(dead)}")]
        if len(r["messages"]) == DEAD])[0]
    assert listed["exists"] and listed["topic"] == f"%DLQ%{GROUP}"
    assert sorted(m["msg_id"] for m in listed["messages"]) == sorted(dead.dead_ids)
    assert {m["origin_topic"] for m in listed["messages"]} == {TOPIC}
    nobody = http_api.call("GET", "/api/dlq?group=NoSuchDlqGroup&begin=0&end=1")
    assert nobody["exists"] is False and nobody["messages"] == []
    http_api.call("GET", f"/api/dlq?group={GROUP}&begin=5&end=1", status=400)
    http_api.call("GET", f"/api/dlq?group={GROUP}", status=400)

    status, headers, body = http_api.raw("GET", f"/api/dlq/export?{dlq_range(dead)}")
    assert status == 200
    assert headers["Content-Disposition"].startswith(f'attachment; filename="dlq-{GROUP}-')
    exported = json.loads(body)
    assert sorted(m["body_text"] for m in exported["messages"]) == [
        f"dead-{i}" for i in range(DEAD)]
    assert all(m["properties"]["KEYS"].startswith("dlq-") for m in exported["messages"])

    http_api.call("POST", "/api/dlq/resend", {"group": GROUP, "msg_ids": "x"}, status=400)
    before = len(dead.consumed)
    wait_for("the consumer online", lambda: http_api.call("GET", f"/api/groups/{GROUP}")["online"])
    resent = http_api.call("POST", "/api/dlq/resend", {"group": GROUP,
                                                       "msg_ids": [dead.dead_ids[0], "00ff"]})
    first, missing = resent["results"]
    assert first["ok"] and first["consume_result"] == "CR_SUCCESS"
    assert first["client_id"] == dead.consumer_client_id
    assert not missing["ok"] and "no message" in missing["error"]
    wait_for("the resent message", lambda: any(
        m.body == b"dead-0" for m in dead.consumed[before:]))


def test_dlq_page(page: Any, dashboard: str, dead: DeadLetters, screenshots: Path) -> None:
    go(page, dashboard, f"/dlq?group={GROUP}&begin={dead.started_ms - 60_000}")
    expect(page.locator("#dlq-table tbody tr")).to_have_count(DEAD)
    expect(page.locator("#dlq-count")).to_contain_text(f"{DEAD} message(s) in %DLQ%{GROUP}")
    expect(page.locator(f'#dlq-table tr[data-key="{dead.dead_ids[1]}"] td[data-col="origin_topic"]')
           ).to_have_text(TOPIC)
    with page.expect_download() as info:
        page.click("#dlq-export")
    exported = json.loads(Path(info.value.path()).read_text())
    assert len(exported["messages"]) == DEAD
    page.check(f'#dlq-table input[data-msg="{dead.dead_ids[1]}"]')
    page.click("#dlq-resend")
    expect(page.locator(f'#dlq-resend-table tr[data-key="{dead.dead_ids[1]}"] td[data-col="result"]')
           ).to_contain_text("CR_SUCCESS")
    page.screenshot(path=str(screenshots / "dlq.png"), full_page=True)


def test_trace_api_and_page(http_api: Http, page: Any, dashboard: str, dead: DeadLetters,
                            screenshots: Path) -> None:
    msg_id = dead.sent_ids[-1]
    trace = wait_for("the trace record", lambda: [
        r for r in [http_api.call("GET", f"/api/messages/{msg_id}/trace")] if r["records"]])[0]
    pub = [r for r in trace["records"] if r["msg_type"] == "Pub"]
    assert pub and pub[0]["group_name"] == PRODUCER_GROUP and pub[0]["topic"] == TOPIC
    assert pub[0]["status"] == "success"
    none = http_api.call("GET", f"/api/messages/{'0' * 32}/trace")
    assert none["records"] == []
    http_api.call("GET", f"/api/messages/{msg_id}/trace?trace_topic=NoSuchTrace", status=404)
    go(page, dashboard, f"/messages/{msg_id}?topic={urllib.parse.quote(TOPIC)}")
    page.click("#trace-link")
    expect(page.locator("#trace-msg-id")).to_have_text(msg_id)
    row = page.locator(f'#trace-table tr[data-key="Pub/{PRODUCER_GROUP}"]')
    expect(row.locator('td[data-col="status"]')).to_have_text("success")
    page.screenshot(path=str(screenshots / "trace.png"), full_page=True)
