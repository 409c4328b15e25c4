"""Our consumers subscribing by ``MessageSelector.by_sql`` against our broker (docs/PROTOCOL.md 4.6, 6.2).

* push, lite-pull and pull consumers get exactly the messages the expression selects;
* against a broker without ``enablePropertyFilter`` a consumer's ``start()`` fails with the
  broker's CHECK_CLIENT_CONFIG answer (as a stock consumer does against a stock broker);
* a selector that does not compile fails in ``subscribe``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageSelector,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
)
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET

# (tags, properties) of the messages each test sends; body = index
MESSAGES: list[tuple[str | None, dict[str, str]]] = [
    ("TagA", {"a": "1", "color": "red"}),
    ("TagB", {"a": "5", "color": "blue"}),
    ("TagA", {"a": "x"}),
    ("TagC", {"a": "10", "color": "red", "price": "2.5"}),
    (None, {"color": "green", "price": "100"}),
    ("TagB", {"a": "-3", "flag": "true"}),
]
EXPRESSIONS = [
    "a > 1",
    "color = 'red' AND a BETWEEN 1 AND 10",
    "TAGS IN ('TagA', 'TagB') OR price > 50",
    "color IS NULL",
    "flag = TRUE",
    "NOT (a < 5)",
]




def _int_is(p: dict[str, str], key: str, test: Callable[[int], bool]) -> bool:
    """A comparison of property ``key`` with an integer constant: the value is read as
    Java's ``Long.valueOf`` reads it; a missing or non-integer value ("x", "2.5") is
    unknown, and an unknown comparison (or its NOT) selects nothing."""
    v = p.get(key)
    return v is not None and re.fullmatch(r"[+-]?[0-9]+", v) is not None and test(int(v))


Props = dict[str, str]
# The selection rules written out by hand, one per expression, independent of the parser.
ORACLE: dict[str, Callable[[Props], bool]] = {
    "a > 1": lambda p: _int_is(p, "a", lambda a: a > 1),
    "color = 'red' AND a BETWEEN 1 AND 10":
        lambda p: p.get("color") == "red" and _int_is(p, "a", lambda a: 1 <= a <= 10),
    "TAGS IN ('TagA', 'TagB') OR price > 50":
        lambda p: p.get("TAGS") in ("TagA", "TagB") or _int_is(p, "price", lambda v: v > 50),
    "color IS NULL": lambda p: "color" not in p,
    "flag = TRUE": lambda p: p.get("flag", "").lower() == "true",  # Boolean.valueOf
    "NOT (a < 5)": lambda p: _int_is(p, "a", lambda a: not a < 5),
    "a > 1 OR color = 'green'":
        lambda p: _int_is(p, "a", lambda a: a > 1) or p.get("color") == "green",
    "price IS NOT NULL OR a = 5": lambda p: "price" in p or _int_is(p, "a", lambda a: a == 5),
}


def expected(expression: str) -> set[bytes]:
    out = set()
    for i, (tags, props) in enumerate(MESSAGES):
        p = dict(props)
        if tags:
            p["TAGS"] = tags
        if ORACLE[expression](p):
            out.add(str(i).encode())
    return out


def test_oracle_sets() -> None:
    """The oracle's selections, spelled out (message indexes), none empty or everything."""
    assert {e: sorted(int(b) for b in expected(e)) for e in ORACLE} == {
        "a > 1": [1, 3],
        "color = 'red' AND a BETWEEN 1 AND 10": [0, 3],
        "TAGS IN ('TagA', 'TagB') OR price > 50": [0, 1, 2, 4, 5],
        "color IS NULL": [2, 5],
        "flag = TRUE": [5],
        "NOT (a < 5)": [1, 3],
        "a > 1 OR color = 'green'": [1, 3, 4],
        "price IS NOT NULL OR a = 5": [1, 3, 4],
    }


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("client-sql92")
    with namesrv_and_broker(tmp, conf={"enablePropertyFilter": "true"}) as servers:
        yield servers


async def produce(namesrv: str, topic: str) -> None:
    async with Producer("PG_sql92", namesrv, default_topic_queue_nums=2) as producer:
        for i, (tags, props) in enumerate(MESSAGES):
            await producer.send(Message(topic, str(i).encode(), tags=tags, properties=props))


async def wait_until(cond: object, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():  # type: ignore[operator]
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("index", range(len(EXPRESSIONS)))
async def test_push_consumer_by_sql(servers: tuple[ServerProcess, ServerProcess], index: int) -> None:
    namesrv = servers[0].address
    topic = f"SqlPush{index}"
    expression = EXPRESSIONS[index]
    await produce(namesrv, topic)
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(f"CG_sqlpush{index}", namesrv, consume_from_where=FIRST)
    consumer.subscribe(topic, MessageSelector.by_sql(expression))
    consumer.register_message_listener(listener)
    want = expected(expression)
    assert want and len(want) < len(MESSAGES)
    await consumer.start()
    try:
        await wait_until(lambda: {m.body for m in got} >= want, 60, f"{want} by {expression!r}")
        # nothing else arrives: the queues' offsets reach their ends with no other delivery
        await asyncio.sleep(1.0)
        assert {m.body for m in got} == want
    finally:
        await consumer.shutdown()


async def test_lite_pull_consumer_by_sql(servers: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv = servers[0].address
    topic = "SqlLite"
    expression = "a > 1 OR color = 'green'"
    await produce(namesrv, topic)
    consumer = LitePullConsumer("CG_sqllite", namesrv, consume_from_where=FIRST)
    consumer.subscribe(topic, MessageSelector.by_sql(expression))
    await consumer.start()
    try:
        got: list[bytes] = []
        want = expected(expression)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while set(got) != want and loop.time() < deadline:
            got.extend(m.body for m in await consumer.poll(0.5))
        got.extend(m.body for m in await consumer.poll(1.0))
        assert sorted(got) == sorted(want)
    finally:
        await consumer.shutdown()


async def test_pull_consumer_by_sql(servers: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv = servers[0].address
    topic = "SqlPull"
    expression = "price IS NOT NULL OR a = 5"
    await produce(namesrv, topic)
    async with PullConsumer("CG_sqlpull", namesrv) as consumer:
        got: set[bytes] = set()
        for mq in await consumer.fetch_subscribe_message_queues(topic):
            result = await consumer.pull(mq, MessageSelector.by_sql(expression), 0, 32)
            if result.status is PullStatus.FOUND:
                got.update(m.body for m in result.msg_found_list)
            else:
                assert result.status in (PullStatus.NO_MATCHED_MSG, PullStatus.NO_NEW_MSG)
        assert got == expected(expression)


async def test_start_fails_without_property_filter(tmp_path: Path) -> None:
    with namesrv_and_broker(tmp_path) as (ns, _):
        await produce(ns.address, "SqlRefused")
        consumer = PushConsumer("CG_sqlrefused", ns.address, consume_from_where=FIRST)
        consumer.subscribe("SqlRefused", MessageSelector.by_sql("a > 1"))
        consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        with pytest.raises(MQBrokerError) as info:
            await consumer.start()
        assert info.value.code == ResponseCode.SYSTEM_ERROR
        assert "The broker does not support consumer to filter message by SQL92" in str(info.value)
        lite = LitePullConsumer("CG_sqlrefused_lite", ns.address)
        lite.subscribe("SqlRefused", MessageSelector.by_sql("a > 1"))
        with pytest.raises(MQBrokerError):
            await lite.start()
        # TAG selectors are fine there
        tag = LitePullConsumer("CG_tag_lite", ns.address)
        tag.subscribe("SqlRefused", MessageSelector.by_tag("TagA"))
        await tag.start()
        await tag.shutdown()


def test_subscribe_refuses_invalid_sql() -> None:
    consumer = PushConsumer("CG_invalid", "127.0.0.1:1")
    with pytest.raises(MQClientError, match="Value ''x'' cannot be compared"):
        consumer.subscribe("T", MessageSelector.by_sql("a > 'x'"))
    with pytest.raises(MQClientError, match="Expression can't be null"):
        consumer.subscribe("T", MessageSelector.by_sql(""))
