"""Issue #15 against stock Apache RocketMQ 4.9.7: SQL92 filtering and message trace.

1. Stock push and lite-pull consumers (``sql92-consume`` in the Java driver) subscribed with
   each expression of ``EXPRESSIONS`` get exactly the messages the expression selects, from
   our broker and from a stock broker (``enablePropertyFilter=true`` on both) alike: the same
   ``MESSAGES`` are produced to both, the expected set is our evaluator's (held to upstream's
   rules by tests/unit/test_sql92_filter.py), so ours == stock == expected. ``INVALID``
   expressions make both brokers refuse the consumer's start with SUBSCRIPTION_PARSE_FAILED
   and the same remark (upstream's ``cause.toString()``, JavaCC's ParseException text included).
2. Our pull, lite-pull and push consumers with ``MessageSelector.by_sql`` against the stock
   broker get exactly the matching messages too.
3. Message trace both ways: stock producer + consumer with ``enableMsgTrace`` against our
   broker, ours against a stock broker (``traceTopicEnable=true``); for a message of each, the
   stock ``mqadmin queryMsgTraceById`` and ours print the same full trace (Pub, then Sub of the
   consumer group).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
from aiorocketmq.protocol.filter import compile_sql92
from tests.interop.stock import DriverProcess, JavaServer
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

REPO = str(Path(__file__).resolve().parents[2])
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET

# (tags, properties); every message also gets idx=<its index>
MESSAGES: list[tuple[str | None, dict[str, str]]] = [
    ("TagA", {"a": "1", "b": "abc", "c": "1.5", "flag": "true"}),
    ("TagB", {"a": "5", "b": "xyz", "c": "-2.25"}),
    ("TagA", {"a": "10", "flag": "false", "s": "it's"}),
    ("TagC", {"a": "x", "b": "abc"}),
    (None, {"b": "", "c": "3e2"}),
    ("TagB", {"a": "-7", "c": "NaN", "flag": "TRUE"}),
    ("TagD", {"a": "2147483648", "c": "0.1"}),
    ("TagA", {"a": "3", "b": "ABC", "c": "10"}),
    ("TagC", {"a": " 4", "b": "abc "}),
    ("TagB", {"a": "+6", "c": "1e400"}),
    ("TagA", {"a": "8", "b": "a'b", "flag": "yes"}),
    ("TagD", {"a": "0", "c": "-0.0"}),
]

EXPRESSIONS = [
    "a > 3",
    "a >= 5 AND a <= 10",
    "a BETWEEN 2 AND 8",
    "a NOT BETWEEN 2 AND 8",
    "b = 'abc'",
    "b <> 'abc'",
    "b IN ('abc', 'xyz')",
    "b NOT IN ('abc', 'xyz')",
    "TAGS = 'TagA'",
    "TAGS IN ('TagB', 'TagC') AND a > 0",
    "a IS NULL",
    "b IS NOT NULL",
    "flag = TRUE",
    "flag = FALSE OR flag IS NULL",
    "NOT (a > 3)",
    "c > 1.0",
    "c < -1.0",
    "c < 0",  # every c is a decimal string: Integer.valueOf throws, so nothing matches
    "a = 2147483648",
    "a > 5 OR b = 'abc'",
    "b = 'abc' OR a > 5",
    "(a > 1 AND b IS NOT NULL) OR TAGS = 'TagD'",
    "a <> 5",
    "missing = 1 OR a = 1",
    "TRUE",
    "a > -8 AND a < +8",
    "c = 1.5",
    "b = 'a''b'",
    "c >= 1e2",
    "a > c",
    "NOT flag",
]
INVALID = ["a > 'x'", "TRUE = 1", "a BETWEEN 5 AND 1", "a ="]

BROKER_CONF = {"enablePropertyFilter": "true", "traceTopicEnable": "true"}


def props_of(i: int) -> dict[str, str]:
    """The properties a broker evaluates: an empty value does not survive the stored
    properties string (``MessageDecoder.string2messageProperties`` drops it)."""
    tags, props = MESSAGES[i]
    out = {k: v for k, v in props.items() if v}
    out["idx"] = str(i)
    if tags:
        out["TAGS"] = tags
    return out


def expected(expression: str) -> list[int]:
    sel = compile_sql92(expression)
    return [i for i in range(len(MESSAGES)) if sel.matches(props_of(i))]


def test_expectations_are_not_trivial() -> None:
    sizes = {e: len(expected(e)) for e in EXPRESSIONS}
    assert len(EXPRESSIONS) >= 20
    assert sum(0 < n < len(MESSAGES) for n in sizes.values()) >= 20, sizes


async def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` (in-memory, cheap) until true; AssertionError after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def produce(namesrv: str, topic: str) -> None:
    async with Producer("PG_sql92_interop", namesrv) as producer:
        for i, (tags, props) in enumerate(MESSAGES):
            await producer.send(Message(topic, f"m{i}".encode(), tags=tags,
                                        properties=dict(props, idx=str(i))))


@pytest.fixture
def our_servers(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with namesrv_and_broker(tmp_path / "ours", conf=BROKER_CONF) as servers:
        yield servers


@pytest.fixture
def stock_servers_sql(stock_namesrv: Callable[..., JavaServer],
                      stock_broker: Callable[..., JavaServer]) -> tuple[JavaServer, JavaServer]:
    ns = stock_namesrv()
    return ns, stock_broker(ns.address, conf=dict(BROKER_CONF))


Key = tuple[str, int]  # (push | lite, index of the expression)


def _results(driver: DriverProcess) -> tuple[dict[Key, list[int]], dict[Key, dict[str, Any]]]:
    result = driver.wait(300).check()
    got = {(e["kind"], e["expr"]): e["idx"] for e in result.of("sql92-result")}
    errors = {(e["kind"], e["expr"]): e for e in result.of("sql92-start-error")}
    return got, errors


def test_stock_consumers_by_sql92_our_broker_and_stock_broker(
        tmp_path: Path, our_servers: tuple[ServerProcess, ServerProcess],
        stock_servers_sql: tuple[JavaServer, JavaServer],
        java_driver: Callable[..., DriverProcess]) -> None:
    topic = "Sql92Interop"
    ours_ns, stock_ns = our_servers[0].address, stock_servers_sql[0].address

    async def produce_both() -> None:
        await produce(ours_ns, topic)
        await produce(stock_ns, topic)

    asyncio.run(produce_both())
    expr_file = tmp_path / "expressions.txt"
    all_exprs = EXPRESSIONS + INVALID
    expr_file.write_text("\n".join(all_exprs) + "\n", encoding="utf-8")
    drivers = {
        "ours": java_driver("sql92-consume", name="sql92-ours", namesrv=ours_ns, topic=topic,
                            expr_file=str(expr_file), timeout_ms=180000),
        "stock": java_driver("sql92-consume", name="sql92-stock", namesrv=stock_ns, topic=topic,
                             expr_file=str(expr_file), timeout_ms=180000),
    }
    results = {name: _results(d) for name, d in drivers.items()}
    for name, (got, errors) in results.items():
        for i, expression in enumerate(EXPRESSIONS):
            for kind in ("push", "lite"):
                assert got.get((kind, i)) == expected(expression), (name, kind, expression)
        assert sorted(errors) == [(kind, i) for kind in ("lite", "push")
                                  for i in range(len(EXPRESSIONS), len(all_exprs))], (name, errors)
        for e in errors.values():
            assert e["responseCode"] == 23, (name, e)  # SUBSCRIPTION_PARSE_FAILED
    ours_errors, stock_errors = results["ours"][1], results["stock"][1]
    for key in ours_errors:  # the remarks too: RuntimeException texts and JavaCC's ParseException
        assert ours_errors[key]["errorMessage"] == stock_errors[key]["errorMessage"], key
    assert results["ours"][0] == results["stock"][0]


def test_our_consumers_by_sql92_against_stock_broker(
        stock_servers_sql: tuple[JavaServer, JavaServer]) -> None:
    namesrv = stock_servers_sql[0].address
    topic = "Sql92OurClient"

    async def run() -> None:
        await produce(namesrv, topic)
        async with PullConsumer("CG_sql92_pull", namesrv) as puller:
            mqs = await puller.fetch_subscribe_message_queues(topic)
            for expression in EXPRESSIONS:
                got: set[int] = set()
                for mq in mqs:
                    r = await puller.pull(mq, MessageSelector.by_sql(expression), 0, 32)
                    if r.status is PullStatus.FOUND:
                        got.update(int(m.properties["idx"]) for m in r.msg_found_list)
                assert sorted(got) == expected(expression), ("pull", expression)

        lites = []
        for i, expression in enumerate(EXPRESSIONS):
            lite = LitePullConsumer(f"CG_sql92_lite{i}", namesrv, consume_from_where=FIRST)
            lite.subscribe(topic, MessageSelector.by_sql(expression))
            await lite.start()
            lites.append(lite)
        try:
            for lite, expression in zip(lites, EXPRESSIONS, strict=True):
                want = expected(expression)
                seen: set[int] = set()
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 60
                while sorted(seen) != want and loop.time() < deadline:
                    seen.update(int(m.properties["idx"]) for m in await lite.poll(0.5))
                seen.update(int(m.properties["idx"]) for m in await lite.poll(0.5))
                assert sorted(seen) == want, ("lite", expression)
        finally:
            for lite in lites:
                await lite.shutdown()

        for i, expression in enumerate(EXPRESSIONS[:6]):
            pushed: set[int] = set()

            def listener(msgs: list[MessageExt], ctx: object, into: set[int] = pushed
                         ) -> ConsumeConcurrentlyStatus:
                into.update(int(m.properties["idx"]) for m in msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            push = PushConsumer(f"CG_sql92_push{i}", namesrv, consume_from_where=FIRST)
            push.subscribe(topic, MessageSelector.by_sql(expression))
            push.register_message_listener(listener)
            await push.start()
            try:
                want = expected(expression)
                await wait_until(lambda p=pushed, w=want: sorted(p) == w, 60,  # type: ignore[misc]
                                 f"push {expression!r}")
                await asyncio.sleep(1.0)  # and nothing more
                assert sorted(pushed) == want, ("push", expression)
            finally:
                await push.shutdown()

    asyncio.run(run())


# -- trace ----------------------------------------------------------------------------------


def ours_trace(namesrv: str, msg_id: str) -> str:
    done = subprocess.run([sys.executable, "-m", "aiorocketmq.client.admin.cli",
                           "queryMsgTraceById", "-n", namesrv, "-i", msg_id],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def stock_trace(mqadmin: Callable[..., Any], namesrv: str, msg_id: str) -> str:
    result = mqadmin(namesrv, "queryMsgTraceById", "-i", msg_id)
    assert result.returncode == 0 and "Exception" not in result.stdout + result.stderr, \
        result.describe()
    return str(result.stdout)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def assert_full_trace(text: str, producer_group: str, consumer_group: str) -> None:
    got = rows(text)
    pub = [r for r in got if r[0] == "Pub"]
    sub = [r for r in got if r[0] == "Sub"]
    assert len(pub) == 1 and pub[0][1] == producer_group and pub[0][-1] == "success", text
    assert sub and all(r[1] == consumer_group and r[-1] == "success" for r in sub), text


async def _wait_for_trace(namesrv: str, msg_id: str, producer_group: str,
                          consumer_group: str) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        text = await asyncio.to_thread(ours_trace, namesrv, msg_id)
        try:
            assert_full_trace(text, producer_group, consumer_group)
            return text
        except AssertionError:
            if loop.time() > deadline:
                raise
        await asyncio.sleep(0.5)


def test_trace_stock_clients_our_broker_and_ours_stock_broker(
        our_servers: tuple[ServerProcess, ServerProcess],
        stock_servers_sql: tuple[JavaServer, JavaServer],
        java_driver: Callable[..., DriverProcess], mqadmin: Callable[..., Any]) -> None:
    ours_ns, stock_ns = our_servers[0].address, stock_servers_sql[0].address

    # stock producer + consumer with enableMsgTrace -> our broker
    run = java_driver("trace-roundtrip", name="trace", namesrv=ours_ns, topic="TraceInterop",
                      group="TraceJava", count=3, timeout_ms=120000).wait(240).check()
    java_id = run.done["msgIds"][0]  # type: ignore[index]
    ours_text = asyncio.run(_wait_for_trace(ours_ns, java_id, "TraceJava-producer",
                                            "TraceJava-consumer"))
    stock_text = stock_trace(mqadmin, ours_ns, java_id)
    assert_full_trace(stock_text, "TraceJava-producer", "TraceJava-consumer")
    assert rows(ours_text) == rows(stock_text)

    # our producer + consumer with enable_msg_trace -> stock broker
    async def ours_roundtrip() -> tuple[str, str]:
        async with Producer("TracePy-producer", stock_ns, enable_msg_trace=True) as producer:
            sent = await producer.send(Message("TraceInteropPy", b"traced", tags="TagT",
                                               keys="trace-key-py"))
        got: list[MessageExt] = []

        def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            got.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("TracePy-consumer", stock_ns, enable_msg_trace=True,
                                consume_from_where=FIRST)
        consumer.subscribe("TraceInteropPy", "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            await wait_until(lambda: bool(got), 60, "the traced message")
        finally:
            await consumer.shutdown()
        assert sent.msg_id
        return sent.msg_id, await _wait_for_trace(stock_ns, sent.msg_id, "TracePy-producer",
                                                  "TracePy-consumer")

    py_id, py_text = asyncio.run(ours_roundtrip())
    stock_text = stock_trace(mqadmin, stock_ns, py_id)
    assert_full_trace(stock_text, "TracePy-producer", "TracePy-consumer")
    assert rows(py_text) == rows(stock_text)


def test_stock_consumer_refused_without_property_filter(
        tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
        stock_broker: Callable[..., JavaServer],
        java_driver: Callable[..., DriverProcess]) -> None:
    """enablePropertyFilter=false (the default): a stock consumer subscribing by SQL92 fails to
    start with the same code and remark from our broker as from the stock one, instead of
    silently receiving every message."""
    stock_ns = stock_namesrv()
    stock_broker(stock_ns.address)
    expr_file = tmp_path / "one.txt"
    expr_file.write_text("a > 1\n", encoding="utf-8")
    with namesrv_and_broker(tmp_path / "ours-nofilter") as (ours_ns, _):
        answers = {}
        for name, ns in (("ours", ours_ns.address), ("stock", stock_ns.address)):
            asyncio.run(produce(ns, "Sql92Refused"))
            got, errors = _results(java_driver(
                "sql92-consume", name=f"refused-{name}", namesrv=ns, topic="Sql92Refused",
                expr_file=str(expr_file), quiet_ms=1000, timeout_ms=60000))
            assert got == {}, (name, got)
            answers[name] = {(e["kind"], e["responseCode"], e["errorMessage"])
                             for e in errors.values()}
    refused = "The broker does not support consumer to filter message by SQL92"
    assert answers["ours"] == answers["stock"] == {("push", 1, refused), ("lite", 1, refused)}
