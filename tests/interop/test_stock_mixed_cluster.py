"""Mixed clusters: stock Apache RocketMQ 4.9.7 and our servers in one cluster (issue #17, part 3).

Two layouts, both started at module setup:

* ``ours-namesrv``: OUR nameserver, our broker-a and a STOCK broker-b registering with it;
* ``stock-namesrv``: a STOCK nameserver, a stock broker-a and OUR broker-b registering with it.

In each, one topic lives on both brokers (created with ``updateTopic -c``: the stock mqadmin for
one topic, ours for the other), a producer spreads its messages over both brokers and a consumer
gets all of them, exactly once and unaltered: stock producer -> stock and our consumers, our
producer -> stock consumer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from aiorocketmq.client import ClientConfig, ConsumeFromWhere, MessageExt, Producer, PushConsumer
from aiorocketmq.client.push_consumer import ConsumeConcurrentlyStatus
from aiorocketmq.protocol.bodies import TopicRouteData
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.interop import stock
from tests.interop.checks import (
    FAST_BROKER_CONF,
    Spec,
    check_received,
    check_sent,
    event_of,
    our_mqadmin,
)
from tests.interop.flows import Flows
from tests.interop.stock import (
    DriverProcess,
    DriverResult,
    Event,
    JavaEnv,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(150)]

CLUSTER = "MixedCluster"
TIMEOUT_MS = 30000


@dataclass
class Mixed:
    layout: str
    namesrv: ServerProcess
    brokers: dict[str, ServerProcess]  # broker name -> server (one ours, one stock)
    stock_names: set[str]


LAYOUTS = ["ours-namesrv", "stock-namesrv"]


@pytest.fixture(scope="module")
def layouts(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Mixed]]:
    """Both layouts at once (their stock JVMs start in parallel threads)."""
    conf = {"brokerClusterName": CLUSTER, **FAST_BROKER_CONF}
    base_a, base_b = tmp_path_factory.mktemp("mixed-ours-ns"), tmp_path_factory.mktemp("mixed-stock-ns")
    ours: list[ServerProcess] = []
    stocks: list[ServerProcess] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def keep(proc: ServerProcess, into: list[ServerProcess]) -> ServerProcess:
        with lock:
            into.append(proc)
        return proc

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)
        return run

    made: dict[str, Mixed] = {}
    threads: list[threading.Thread] = []
    try:
        ns_a = keep(namesrv_process(base_a).start(), ours)
        found: dict[str, ServerProcess] = {}

        def stock_b_of_a() -> None:
            found["a/broker-b"] = keep(start_stock_broker(base_a, ns_a.address, name="broker-b", conf=conf), stocks)

        def layout_b() -> None:
            ns_b = keep(start_stock_namesrv(base_b), stocks)
            found["b/namesrv"] = ns_b
            found["b/broker-a"] = keep(start_stock_broker(base_b, ns_b.address, name="broker-a", conf=conf), stocks)
            found["b/broker-b"] = keep(broker_process(base_b, ns_b.address, name="broker-b", conf=conf).start(), ours)

        threads += [threading.Thread(target=guarded(fn)) for fn in (stock_b_of_a, layout_b)]
        for t in threads:
            t.start()
        br_a = keep(broker_process(base_a, ns_a.address, name="broker-a", conf=conf).start(), ours)
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        made = {
            "ours-namesrv": Mixed("ours-namesrv", ns_a, {"broker-a": br_a, "broker-b": found["a/broker-b"]},
                                  {"broker-b"}),
            "stock-namesrv": Mixed("stock-namesrv", found["b/namesrv"],
                                   {"broker-a": found["b/broker-a"], "broker-b": found["b/broker-b"]}, {"broker-a"}),
        }
        yield made
    finally:
        for t in threads:
            t.join()
        for proc in reversed(ours):
            proc.stop()
        stop_all(reversed(stocks))
        for proc in [*ours, *stocks]:
            print(f"---- {proc.argv[-1]} ----\n{proc.log_tail(30)}")


@pytest.fixture(params=LAYOUTS)
def mixed(request: pytest.FixtureRequest, layouts: dict[str, Mixed]) -> Mixed:
    return layouts[request.param]


def config(m: Mixed) -> ClientConfig:
    return ClientConfig(namesrv_addr=m.namesrv.address, client_ip="127.0.0.1",
                        poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=5000)


def table_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]


async def our_consume(m: Mixed, topic: str, group: str, count: int, timeout: float = 30.0) -> list[Event]:
    events: list[Event] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        events.extend(event_of(x, broker_name=ctx.message_queue.broker_name)  # type: ignore[attr-defined]
                      for x in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(group, config=config(m), consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    await c.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len({e["msgId"] for e in events}) < count:
            assert loop.time() < deadline, f"{len(events)} of {count} from {topic}"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    finally:
        await c.shutdown()
    return list(events)


def test_cluster_membership(mixed: Mixed, mqadmin: Callable[..., stock.AdminResult]) -> None:
    """Both brokers, ours and the stock one, are in one cluster: stock mqadmin clusterList and
    ours list the same two rows (name, id 0, address)."""
    want = sorted([CLUSTER, name, "0", br.address] for name, br in mixed.brokers.items())
    # A stock broker answers GET_BROKER_RUNTIME_INFO with java.util.NoSuchElementException
    # (LinkedList.getLast of its still-empty stats snapshots) for a moment after it boots.
    deadline = time.monotonic() + 30
    while True:
        result = mqadmin(mixed.namesrv.address, "clusterList")
        if "NoSuchElementException" not in result.stderr or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert "Exception" not in result.stdout + result.stderr, result.describe()
    assert sorted(row[:4] for row in table_rows(result.stdout)) == want, result.describe()
    mine = our_mqadmin(mixed.namesrv.address, "clusterList")
    assert sorted(row[:4] for row in table_rows(mine)) == want, mine


async def test_stock_producer_spreads_over_both(mixed: Mixed, java_driver: Callable[..., DriverProcess],
                                                mqadmin: Callable[..., stock.AdminResult]) -> None:
    """updateTopic -c (stock mqadmin) creates the topic on both brokers; a stock producer's
    sends go to both; a stock push consumer and ours each get every message exactly once."""
    spec = Spec(f"MixStock-{mixed.layout}", 40, body_size=100)
    created = mqadmin(mixed.namesrv.address, "updateTopic", "-c", CLUSTER, "-t", spec.topic, "-r", "4", "-w", "4")
    assert "Exception" not in created.stdout + created.stderr, created.describe()
    assert created.stdout.count("create topic to ") == 2, created.describe()
    await wait_route(mixed, spec.topic)
    sent_result = java_driver("produce-sync", namesrv=mixed.namesrv.address, group=f"PG-{spec.topic}",
                              timeout_ms=TIMEOUT_MS, **spec.driver_options()).wait(60).check()
    sent = check_sent(sent_result, spec)
    per_broker = {name: sum(1 for e in sent.values() if e["brokerName"] == name) for name in mixed.brokers}
    assert per_broker == {"broker-a": 20, "broker-b": 20}, per_broker
    for e in sent.values():
        host = mixed.brokers[e["brokerName"]].address
        assert e["offsetMsgId"][:16] == "7F000001" + f"{int(host.rsplit(':', 1)[1]):08X}", e
    consumer = java_driver("consume-push", namesrv=mixed.namesrv.address, topic=spec.topic,
                           group=f"CG-{spec.topic}", count=spec.count, linger_ms=500, timeout_ms=TIMEOUT_MS)
    ours = await our_consume(mixed, spec.topic, f"CG-ours-{spec.topic}", spec.count)
    received = consumer.wait(60).check()
    check_received(received.of("received"), spec, sent=sent)
    check_received(ours, spec, sent=sent)


async def test_our_producer_spreads_over_both(mixed: Mixed, java_driver: Callable[..., DriverProcess]) -> None:
    """Our mqadmin updateTopic -c creates the topic on both brokers; our producer's sends go to
    both; a stock push consumer gets every message exactly once, unaltered."""
    spec = Spec(f"MixOurs-{mixed.layout}", 40, body_size=100)
    out = our_mqadmin(mixed.namesrv.address, "updateTopic", "-c", CLUSTER, "-t", spec.topic, "-r", "4", "-w", "4")
    assert out.count("create topic to ") == 2, out
    await wait_route(mixed, spec.topic)
    sent: dict[str, Event] = {}
    async with Producer(f"PG-{spec.topic}", config=config(mixed)) as p:
        for i in spec.indexes:
            r = await p.send(spec.message(i))
            sent[spec.key(i)] = {"index": i, "msgId": r.msg_id, "brokerName": r.message_queue.broker_name,
                                 "queueId": r.message_queue.queue_id, "queueOffset": r.queue_offset,
                                 "status": r.status.name}
    per_broker = {name: sum(1 for e in sent.values() if e["brokerName"] == name) for name in mixed.brokers}
    assert per_broker == {"broker-a": 20, "broker-b": 20}, per_broker
    received = java_driver("consume-push", namesrv=mixed.namesrv.address, topic=spec.topic,
                           group=f"CG-{spec.topic}", count=spec.count, linger_ms=500,
                           timeout_ms=TIMEOUT_MS).wait(60).check()
    check_received(received.of("received"), spec, sent=sent)


async def wait_route(m: Mixed, topic: str, timeout: float = 15.0) -> None:
    """Until the nameserver's route of ``topic`` has both brokers (a broker registers a topic
    created by updateTopic at once, but asynchronously)."""
    client = RemotingClient()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            req = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            resp = await client.invoke(m.namesrv.address, req, 3.0)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                route = TopicRouteData.decode(resp.body)
                if {q.broker_name for q in route.queue_datas} == set(m.brokers):
                    return
            assert loop.time() < deadline, f"route of {topic} never had both brokers"
            await asyncio.sleep(0.2)
    finally:
        await client.close()


# -- one stock client, two brokers: what it sees from ours is what it sees from stock -----------

# Properties whose values are the same for every message of one role (the others, such as KEYS,
# TAGS, UNIQ_KEY, MIN_OFFSET or ORIGIN_MESSAGE_ID, are compared by presence only).
SEMANTIC = ("WAIT", "CLUSTER", "RETRY_TOPIC", "REAL_TOPIC", "DELAY", "TRAN_MSG", "PGROUP",
            "MAX_RECONSUME_TIMES", "RECONSUME_TIME", "TRANSACTION_CHECK_TIMES", "color", "size")


def shape(role: str, e: Event) -> tuple[object, ...]:
    props = e["properties"]
    return (role, e["topic"], e["sysFlag"], e["reconsumeTimes"], tuple(sorted(props)),
            tuple((k, props[k]) for k in SEMANTIC if k in props))


def compare_brokers(m: Mixed, roles: list[tuple[str, Event]], *, either: frozenset[str] = frozenset()) -> None:
    """Every role's message shapes are the same from the stock broker as from ours, and each
    broker served some of every role (those in ``either``: at least one of them did)."""
    by_addr = {f"/{br.address}": name for name, br in m.brokers.items()}
    seen: dict[str, dict[str, set[tuple[object, ...]]]] = {name: {} for name in m.brokers}
    for role, e in roles:
        broker = e.get("brokerName") or by_addr[e["storeHost"]]
        seen[broker].setdefault(role, set()).add(shape(role, e))
    (stock_name,) = m.stock_names
    (our_name,) = set(m.brokers) - m.stock_names
    assert seen[stock_name].keys() - either == seen[our_name].keys() - either, seen
    assert either <= seen[stock_name].keys() | seen[our_name].keys(), seen
    for role in seen[stock_name].keys() & seen[our_name].keys():
        assert seen[our_name][role] == seen[stock_name][role], (role, seen[stock_name][role], seen[our_name][role])


def create_on_both(m: Mixed, f: Flows, topic: str) -> None:
    created = f.mqadmin("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    assert created.stdout.count("create topic to ") == 2, created.describe()
    asyncio.run(wait_route(m, topic))


DIFF_REFUSED = "k-([02468]|1[024])"  # 8 of 16, on both brokers


def diff_retry_flow(m: Mixed, kind: str) -> Callable[[Flows], list[DriverResult]]:
    """``kind`` Conc: RECONSUME_LATER, redelivered through %RETRY%; Ord: SUSPEND, retried in the
    client, then sent back past the maximum (straight to %DLQ%)."""
    def flow(f: Flows) -> list[DriverResult]:
        spec = Spec(f"DiffRetry{kind}", 16)
        create_on_both(m, f, spec.topic)
        sent = f.run("produce-sync", group=f"PG-DiffRetry{kind}", timeout_ms=TIMEOUT_MS, **spec.driver_options())
        received = f.run("consume-orderly" if kind == "Ord" else "consume-push", topic=spec.topic,
                         group=f"CG-DiffRetry{kind}", count=8, expect_deliveries=32, reconsume_pattern=DIFF_REFUSED,
                         max_reconsume_times=2, suspend_ms=100, linger_ms=1500, timeout_ms=TIMEOUT_MS)
        dlq = f.run("pull-consumer", topic=f"%DLQ%CG-DiffRetry{kind}", group=f"CG-DiffDlqReader{kind}", count=8,
                    timeout_ms=TIMEOUT_MS)
        return [sent, received, dlq]
    return flow


def diff_delay_flow(m: Mixed) -> Callable[[Flows], list[DriverResult]]:
    def flow(f: Flows) -> list[DriverResult]:
        spec = Spec("DiffDelay", 16)
        create_on_both(m, f, spec.topic)
        sent = f.run("produce-delay", group="PG-DiffDelay", delay_level=3, timeout_ms=TIMEOUT_MS,
                     **spec.driver_options())
        received = f.run("consume-push", topic=spec.topic, group="CG-DiffDelay", count=16, timeout_ms=TIMEOUT_MS)
        return [sent, received]
    return flow


def diff_tx_flow(m: Mixed) -> Callable[[Flows], list[DriverResult]]:
    def flow(f: Flows) -> list[DriverResult]:
        spec = Spec("DiffTx", 24)
        create_on_both(m, f, spec.topic)
        sent = f.run("transaction", group="PG-DiffTx", tx_states=["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"],
                     timeout_ms=TIMEOUT_MS, **spec.driver_options())
        received = f.run("consume-push", topic=spec.topic, group="CG-DiffTx", count=16, linger_ms=1000,
                         timeout_ms=TIMEOUT_MS)
        return [sent, received]
    return flow


@pytest.fixture(scope="module")
def diff(layouts: dict[str, Mixed], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mixed, Flows]]:
    """The differential scenarios, run together on the stock-namesrv layout (stock broker-a,
    our broker-b, every topic on both)."""
    m = layouts["stock-namesrv"]
    f = Flows(tmp_path_factory.mktemp("diff"), m.namesrv.address)
    try:
        f.submit("retry-Conc", diff_retry_flow(m, "Conc"))
        f.submit("retry-Ord", diff_retry_flow(m, "Ord"))
        f.submit("delay", diff_delay_flow(m))
        f.submit("tx", diff_tx_flow(m))
        yield m, f
    finally:
        f.close()


@pytest.mark.parametrize("kind", ["Conc", "Ord"], ids=["concurrently", "orderly"])
def test_same_view_of_retries_and_dlq(diff: tuple[Mixed, Flows], kind: str) -> None:
    """Refused x3 then %DLQ%: each delivery (first, retries 1 and 2, the DLQ copy) has the same
    topic, sysFlag, reconsumeTimes, property keys and retry properties from our broker as from
    the stock one."""
    m, f = diff
    spec = Spec(f"DiffRetry{kind}", 16)
    sent_result, received, dlq = f.result(f"retry-{kind}")
    sent = check_sent(sent_result, spec)
    assert {e["brokerName"] for e in sent.values()} == set(m.brokers)
    events = received.of("received")
    check_received(events, spec, exact=False, sent=sent)
    check_received(dlq.of("received"), spec, indexes=[i for i in spec.indexes if i % 2 == 0],
                   topic=f"%DLQ%CG-DiffRetry{kind}")
    roles = [(f"{e['consumeResult']}#{e['reconsumeTimes']}", e) for e in events]
    roles += [("dlq", e) for e in dlq.of("received")]
    # an orderly consumer sends a message back past the maximum through its inner producer,
    # to whichever broker that picks (the DLQ copy may land on either one)
    compare_brokers(m, roles, either=frozenset({"dlq"}) if kind == "Ord" else frozenset())


def test_same_view_of_delayed_messages(diff: tuple[Mixed, Flows]) -> None:
    m, f = diff
    spec = Spec("DiffDelay", 16)
    sent_result, received = f.result("delay")
    sent = check_sent(sent_result, spec)
    events = received.of("received")
    check_received(events, spec)
    for e in events:
        assert e["msgId"] == sent[e["keys"]]["msgId"] and e["storeTimestamp"] - e["bornTimestamp"] >= 900, e
    compare_brokers(m, [("delayed", e) for e in events])


def test_same_view_of_transactions(diff: tuple[Mixed, Flows]) -> None:
    """Half messages on both brokers: committed (at once or after a check-back) and checked
    messages look the same from both; rolled back ones never arrive."""
    m, f = diff
    spec = Spec("DiffTx", 24)
    sent_result, received = f.result("tx")
    check_sent(sent_result, spec, offset_msg_id=False)
    events = received.of("received")
    check_received([{**e, "userProperties": {k: v for k, v in e["userProperties"].items()
                                            if k != "TRANSACTION_CHECK_TIMES"}} for e in events],
                   spec, indexes=[i for i in spec.indexes if i % 3 != 1])
    checks = sent_result.of("check")
    assert {e["index"] for e in checks} == {i for i in spec.indexes if i % 3 == 2}
    roles = [(f"committed-{'checked' if e['index'] % 3 == 2 else 'at-once'}", e) for e in events]
    roles += [("check", {**e, "brokerName": None}) for e in checks]
    compare_brokers(m, roles)
