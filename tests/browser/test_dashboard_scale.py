"""``mqdashboard`` with 2,000 topics and 2,000 groups, and groups whose clients disagree.

A broker starts with ``SCALE`` topics and ``SCALE`` subscription groups already in its
``topics.json`` / ``subscriptionGroup.json`` (the files a long-lived broker has), then two
groups get two live push consumers each: ``MIXED_GROUP``'s clients subscribe to different
tags and topics (the classic cause of "lost" messages), ``SAME_GROUP``'s alike.

The JSON API is driven over HTTP against the ``mqdashboard`` process; the pages in
headless Chromium. The dashboard runs with a long ``cache_ttl_ms`` so that "the second load
is served from the cache" does not depend on how fast this machine is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.client.sync import LoopThread
from aiorocketmq.protocol.bodies import (
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.protocol.message import MessageExt
from tests.browser.conftest import expect, go, running_dashboard
from tests.browser.http import Http
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(300)]

SCALE = 2000
MIXED_GROUP = "ScaleMixedGroup"
SAME_GROUP = "ScaleSameGroup"
TOPIC_A = "ScaleTopicA"
TOPIC_B = "ScaleTopicB"


# More groups with two clients each than the dashboard makes calls at once (8): every row of
# their page asks its clients for their subscriptions while holding a slot.
BUSY_GROUPS = 9
# How long a route of these big pages may take to render.
ROUTE_TIMEOUT_MS = 120_000


def busy_group(i: int) -> str:
    return f"ScaleBusyGroup{i}"


def scale_topic(i: int) -> str:
    return f"ScaleTopic{i:04d}"


def scale_group(i: int) -> str:
    return f"ScaleGroup{i:04d}"


def seed_store(store: Path) -> None:
    """``topics.json`` and ``subscriptionGroup.json`` with ``SCALE`` entries each."""
    config = store / "config"
    config.mkdir(parents=True, exist_ok=True)
    topics = {scale_topic(i): TopicConfig(scale_topic(i), read_queue_nums=2, write_queue_nums=2)
              for i in range(SCALE)}
    for t in (TOPIC_A, TOPIC_B):
        topics[t] = TopicConfig(t, read_queue_nums=2, write_queue_nums=2)
    (config / "topics.json").write_bytes(TopicConfigSerializeWrapper(
        topic_config_table=topics, data_version=DataVersion()).encode())
    groups = {scale_group(i): SubscriptionGroupConfig(group_name=scale_group(i))
              for i in range(SCALE)}
    for g in (MIXED_GROUP, SAME_GROUP, *map(busy_group, range(BUSY_GROUPS))):
        groups[g] = SubscriptionGroupConfig(group_name=g)
    (config / "subscriptionGroup.json").write_bytes(SubscriptionGroupWrapper(
        subscription_group_table=groups, data_version=DataVersion()).encode())


class Consumers(LoopThread):
    """Two clients of ``MIXED_GROUP`` that disagree, two of ``SAME_GROUP`` that agree."""

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__("scale-consumers")
        self.namesrv_addr = namesrv_addr
        self.consumers: list[PushConsumer] = []

    async def _aopen(self) -> None:
        plans = [(MIXED_GROUP, [(TOPIC_A, "TagA")]),
                 (MIXED_GROUP, [(TOPIC_A, "TagB"), (TOPIC_B, "*")]),
                 (SAME_GROUP, [(TOPIC_A, "*")]),
                 (SAME_GROUP, [(TOPIC_A, "*")])]
        plans += [(busy_group(i), [(TOPIC_B, "*")]) for i in range(BUSY_GROUPS) for _ in (0, 1)]
        for group, subs in plans:
            consumer = PushConsumer(group, self.namesrv_addr)
            for topic, expression in subs:
                consumer.subscribe(topic, expression)
            consumer.register_message_listener(self._on_messages)
            await consumer.start()
            self.consumers.append(consumer)
        # Every client must be in the broker's connection list before the dashboard looks.
        async with MQAdmin(self.namesrv_addr) as admin:
            deadline = time.monotonic() + 60
            for group in (MIXED_GROUP, SAME_GROUP, *map(busy_group, range(BUSY_GROUPS))):
                while True:
                    try:
                        if len((await admin.consumer_connection(group)).connection_set) == 2:
                            break
                    except Exception:  # not online yet
                        if time.monotonic() > deadline:
                            raise
                    if time.monotonic() > deadline:
                        raise AssertionError(f"{group}: clients did not all register")
                    await asyncio.sleep(0.2)

    def client_ids(self, group: str) -> list[str]:
        return sorted(c.instance.client_id for c in self.consumers
                      if c.group == group and c.instance is not None)

    @staticmethod
    def _on_messages(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def _aclose(self) -> None:
        for consumer in self.consumers:
            await consumer.shutdown()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("scale")
    seed_store(tmp / "broker-a" / "store")
    with namesrv_and_broker(tmp) as pair:
        yield pair


@pytest.fixture(scope="module")
def consumers(cluster: tuple[ServerProcess, ServerProcess]) -> Iterator[Consumers]:
    with Consumers(cluster[0].address) as c:
        yield c


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, cluster: tuple[ServerProcess, ServerProcess],
              consumers: Consumers) -> Iterator[str]:
    with running_dashboard(tmp_path_factory.mktemp("scale-dash"), cluster[0].address,
                           config="cache_ttl_ms = 600000\n") as base:
        yield base


# -- paging and the cache ----------------------------------------------------------------


def test_group_api_pages_and_caches(http_api: Http) -> None:
    first = http_api.call("GET", "/api/groups?q=ScaleGroup&page=1")
    assert first["total"] == SCALE and first["size"] == 50 and first["pages"] == SCALE // 50
    assert [g["group"] for g in first["groups"]] == [scale_group(i) for i in range(50)]
    last = http_api.call("GET", f"/api/groups?q=ScaleGroup&page={SCALE // 50}")
    assert [g["group"] for g in last["groups"]][-1] == scale_group(SCALE - 1)
    again = http_api.call("GET", "/api/groups?q=ScaleGroup&page=1")
    # Served from the cache: the rows are the very ones read the first time.
    assert [g["as_of"] for g in again["groups"]] == [g["as_of"] for g in first["groups"]]
    big = http_api.call("GET", "/api/groups?q=ScaleGroup&size=500&page=2")
    assert [g["group"] for g in big["groups"]] == [scale_group(i) for i in range(500, 1000)]
    http_api.call("GET", "/api/groups?size=501", status=400)
    http_api.call("GET", "/api/groups?page=0", status=400)


def test_topic_api_pages(http_api: Http) -> None:
    first = http_api.call("GET", "/api/topics?q=ScaleTopic")
    assert first["total"] == SCALE + 2 and first["size"] == 100
    assert [t["topic"] for t in first["topics"]] == [scale_topic(i) for i in range(100)]
    page7 = http_api.call("GET", "/api/topics?q=ScaleTopic&page=7&size=300")
    assert [t["topic"] for t in page7["topics"]] == [
        *(scale_topic(i) for i in range(1800, 2000)), TOPIC_A, TOPIC_B]
    assert page7["pages"] == 7


def test_group_and_topic_pages_in_the_browser(page: Any, dashboard: str, screenshots: Path) -> None:
    cold = go(page, dashboard, "/groups?q=ScaleGroup&page=3", ROUTE_TIMEOUT_MS)
    rows = page.locator("#group-list tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-key", scale_group(100))
    expect(page.locator("#group-pager .range")).to_have_text("101\u2013150 of 2,000")
    page.click("#group-pager .next")
    expect(page.locator("main")).to_have_attribute("data-route", "/groups?q=ScaleGroup&page=4")
    expect(page.locator("#group-list tbody tr").first).to_have_attribute(
        "data-key", scale_group(150))
    warm = go(page, dashboard, "/groups?q=ScaleGroup&page=3", ROUTE_TIMEOUT_MS)
    topics = go(page, dashboard, "/topics", ROUTE_TIMEOUT_MS)
    expect(page.locator("#topic-list tbody tr")).to_have_count(100)
    expect(page.locator("#topic-pager .range")).to_contain_text(f"of {SCALE + 2:,}")
    page.click("#topic-pager .next")
    expect(page.locator("#topic-list tbody tr").first).to_have_attribute(
        "data-key", scale_topic(100))
    conn_cold = go(page, dashboard, "/connections", ROUTE_TIMEOUT_MS)
    expect(page.locator(f'#consumer-connections tr[data-key="{MIXED_GROUP}"]')).to_have_count(2)
    conn_warm = go(page, dashboard, "/connections?", ROUTE_TIMEOUT_MS)
    print(f"groups page (2,000 groups, 50 shown): {cold:.2f} s cold, {warm:.2f} s cached; "
          f"topics page (2,002 topics, 100 shown): {topics:.2f} s; connections page (2,002 "
          f"groups asked): {conn_cold:.2f} s cold, {conn_warm:.2f} s cached")
    page.screenshot(path=str(screenshots / "scale-groups.png"), full_page=True)


# -- inconsistent subscriptions -----------------------------------------------------------


def test_group_api_flags_inconsistent_subscriptions(http_api: Http, consumers: Consumers) -> None:
    rows = {g["group"]: g for q in ("ScaleMixed", "ScaleSame", "ScaleGroup1999")
            for g in http_api.call("GET", f"/api/groups?q={q}")["groups"]}
    assert rows[MIXED_GROUP]["subscription_consistent"] is False
    assert rows[MIXED_GROUP]["members"] == 2
    assert rows[SAME_GROUP]["subscription_consistent"] is True
    assert rows[scale_group(1999)]["subscription_consistent"] is None  # no client online

    mixed = http_api.call("GET", f"/api/groups/{MIXED_GROUP}")
    assert mixed["subscription_consistent"] is False
    first, second = consumers.client_ids(MIXED_GROUP)
    by_client = {c["client_id"]: c["subscriptions"] for c in mixed["clients"]}
    assert {(s["topic"], s["expression"]) for s in by_client[first]} | \
        {(s["topic"], s["expression"]) for s in by_client[second]} == {
            (TOPIC_A, "TagA"), (TOPIC_A, "TagB"), (TOPIC_B, "*")}
    issues = {i["topic"]: i for i in mixed["subscription_issues"]}
    assert set(issues) == {TOPIC_A, TOPIC_B}
    assert sorted(issues[TOPIC_A]["by_expression"]) == ["TagA", "TagB"]
    assert len(issues[TOPIC_B]["missing"]) == 1

    same = http_api.call("GET", f"/api/groups/{SAME_GROUP}")
    assert same["subscription_consistent"] is True and same["subscription_issues"] == []
    assert [c["subscriptions"] for c in same["clients"]] == [
        [{"topic": TOPIC_A, "expression": "*", "expression_type": "TAG"}]] * 2


def test_inconsistent_subscriptions_in_the_browser(page: Any, dashboard: str, consumers: Consumers,
                                                   screenshots: Path) -> None:
    go(page, dashboard, "/groups?q=ScaleMixed", ROUTE_TIMEOUT_MS)
    expect(page.locator(f'#group-list tr[data-key="{MIXED_GROUP}"] td[data-col="subs"]')
           ).to_have_text("inconsistent")
    page.click(f'#group-list tr[data-key="{MIXED_GROUP}"]')
    warning = page.locator("#subscription-warning")
    expect(warning).to_be_visible()
    expect(warning.locator(f'.issue[data-topic="{TOPIC_A}"]')).to_contain_text("'TagA' by")
    expect(warning.locator(f'.issue[data-topic="{TOPIC_A}"]')).to_contain_text("'TagB' by")
    for client_id in consumers.client_ids(MIXED_GROUP):
        expect(page.locator(f'#client-subscriptions tr[data-key="{client_id}/{TOPIC_A}"]')
               ).to_have_count(1)
    page.screenshot(path=str(screenshots / "scale-inconsistent.png"), full_page=True)
    go(page, dashboard, f"/groups/{SAME_GROUP}", ROUTE_TIMEOUT_MS)
    expect(page.locator("#client-subscriptions tbody tr")).to_have_count(2)
    expect(page.locator("#subscription-warning")).to_have_count(0)


def test_a_page_of_groups_with_several_clients_each(http_api: Http) -> None:
    """Nine rows each asking two clients at once must not wait on each other's slots."""
    page = http_api.call("GET", "/api/groups?q=ScaleBusy", timeout=60)
    assert page["total"] == BUSY_GROUPS
    assert [(g["members"], g["subscription_consistent"]) for g in page["groups"]] == [
        (2, True)] * BUSY_GROUPS
