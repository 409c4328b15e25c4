"""Prometheus metrics and operator logs of real mqnamesrv + mqbroker processes on 127.0.0.1.

The servers run with ``--metrics-port 0`` and print ``metrics listening on HOST:PORT`` after
their readiness line; the test scrapes ``GET /metrics`` over HTTP and parses the text with
the unit tests' parser. Every wait is on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import Message, Producer, PullResult, PullStatus
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.protocol.bodies import BrokerStatsData
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.headers import ViewBrokerStatsDataRequestHeader
from aiorocketmq.server.metrics.exporter import family_names, fixed_double
from tests.procs import ServerProcess, broker_process, namesrv_process
from tests.unit.test_metrics import Family, parse_exposition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

METRICS_LINE = re.compile(r"metrics listening on (\S+)")

N = 20  # messages produced
M = 7  # messages consumed and committed
BODY = b"m" * 100
TOPIC = "MetricsT"
GROUP = "CG_metrics"
CLUSTER = "DefaultCluster"
BROKER = "broker-a"  # broker_process's default name


def metrics_address(proc: ServerProcess) -> str:
    """The address on the stdout line that follows the readiness line.

    The server prints it right after the readiness line, with no await in between, so a
    plain read cannot hang: the line is there or the process died (EOF). A selector would
    not do: the readiness read may already have pulled this line into the pipe's buffer.
    """
    assert proc.proc is not None and proc.proc.stdout is not None
    line = proc.proc.stdout.readline()
    m = METRICS_LINE.search(line)
    assert m, f"expected the metrics line, got {line!r}\n{proc.log_tail()}"
    return m.group(1)


async def scrape(address: str) -> dict[str, Family]:
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        async with asyncio.timeout(10):
            raw = await reader.read()  # HTTP/1.0: the server closes after the answer
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    return parse_exposition(body.decode("utf-8"))


def sample(fams: dict[str, Family], name: str, **labels: str) -> float:
    """One sample's value; 0 when the series does not exist (yet)."""
    fam = fams[re.sub(r"_(bucket|sum|count)\Z", "", name)] if name not in fams else fams[name]
    found = [v for n, ls, v in fam.samples if n == name and ls == labels]
    assert len(found) <= 1
    return found[0] if found else 0.0


def matching(fams: dict[str, Family], name: str, **labels: str
             ) -> list[tuple[dict[str, str], float]]:
    """The samples of ``name`` whose labels include ``labels``."""
    return [(ls, v) for n, ls, v in fams[name].samples
            if n == name and labels.items() <= ls.items()]


def total(fams: dict[str, Family], name: str) -> float:
    return sum(v for n, _, v in fams[name].samples if n == name)


async def eventually(address: str, cond: Callable[[dict[str, Family]], bool], what: str,
                     timeout: float = 30.0) -> dict[str, Family]:
    """Scrape until ``cond`` holds (deadline ``timeout`` seconds); the last scrape."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        fams = await scrape(address)
        if cond(fams):
            return fams
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


async def log_eventually(proc: ServerProcess, pattern: str, what: str,
                         timeout: float = 30.0) -> list[str]:
    """Lines of the server log matching ``pattern``, once there is at least one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    rx = re.compile(pattern)
    while True:
        text = proc.log_path.read_text(errors="replace") if proc.log_path.exists() else ""
        lines = [ln for ln in text.splitlines() if rx.search(ln)]
        if lines:
            return lines
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


async def test_broker_and_namesrv_metrics_move_by_exact_amounts(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    namesrv = server_factory(namesrv_process(tmp_path, "--metrics-port", "0",
                                             "--log-level", "DEBUG"))
    ns_metrics = metrics_address(namesrv)
    broker = server_factory(broker_process(
        tmp_path, namesrv.address, conf={"metricsPort": "0"},
        extra=("--slow-request-ms", "0.001")))
    br_metrics = metrics_address(broker)

    before = await scrape(br_metrics)
    assert sample(before, "rocketmq_messages_in_total", topic=TOPIC) == 0
    assert sample(before, "rocketmq_commitlog_bytes") == 0
    assert sample(before, "rocketmq_pull_requests_held") == 0

    sent_after_ms = int(time.time() * 1000)  # before any message of TOPIC was stored
    async with Producer("PG_metrics", namesrv.address, default_topic_queue_nums=1) as producer:
        for i in range(N):
            await producer.send(Message(TOPIC, BODY, keys=f"k{i:03d}"))
        fams = await eventually(
            br_metrics, lambda f: sample(f, "rocketmq_connections", role="producer") >= 1,
            "the producer's heartbeat", timeout=45)
    assert sample(fams, "rocketmq_messages_in_total", topic=TOPIC) == N
    assert sample(fams, "rocketmq_requests_total", code="SEND_MESSAGE_V2") == N
    assert sample(fams, "rocketmq_responses_total", code="SUCCESS") >= N
    assert sample(fams, "rocketmq_store_append_seconds_count") >= N

    async with PullConsumer(GROUP, namesrv.address) as consumer:
        (mq,) = await consumer.fetch_subscribe_message_queues(TOPIC)
        result = await consumer.pull(mq, "*", 0, M)
        assert result.status is PullStatus.FOUND and len(result.msg_found_list) == M
        sizes = {m.store_size for m in result.msg_found_list}
        assert len(sizes) == 1  # same body, same property lengths: same record size
        (record_size,) = sizes
        consumer.update_consume_offset(mq, M)
        await consumer.persist_consumer_offset()

        fams = await eventually(
            br_metrics,
            lambda f: sample(f, "rocketmq_consumer_lag", group=GROUP, topic=TOPIC,
                             queue=str(mq.queue_id)) == N - M,
            "the committed offset")
        assert sample(fams, "rocketmq_bytes_in_total", topic=TOPIC) == N * record_size
        assert sample(fams, "rocketmq_commitlog_bytes") == N * record_size
        assert sample(fams, "rocketmq_messages_out_total", topic=TOPIC, group=GROUP) == M
        assert sample(fams, "rocketmq_bytes_out_total", topic=TOPIC, group=GROUP) == \
            M * record_size
        assert sample(fams, "rocketmq_requests_total", code="PULL_MESSAGE") >= 1
        await eventually(br_metrics,
                         lambda f: sample(f, "rocketmq_connections", role="consumer") >= 1,
                         "the consumer's heartbeat", timeout=45)
        await check_exporter_families(namesrv.address, broker.address, br_metrics,
                                      record_size, sent_after_ms)

        # A long poll past the end is held (not slow), then woken by one more message.
        blocked: asyncio.Task[PullResult] = asyncio.create_task(
            consumer.pull_block_if_not_found(mq, "*", N, 32))
        await eventually(br_metrics, lambda f: sample(f, "rocketmq_pull_requests_held") == 1,
                         "the parked pull")
        async with Producer("PG_metrics_late", namesrv.address) as late:
            await late.send(Message(TOPIC, b"late"))
        woken = await asyncio.wait_for(blocked, 30)
        assert woken.status is PullStatus.FOUND
        fams = await eventually(
            br_metrics, lambda f: sample(f, "rocketmq_pull_requests_held") == 0, "the wake-up")
        assert sample(fams, "rocketmq_longpoll_wake_seconds_count") >= 1
        assert sample(fams, "rocketmq_messages_in_total", topic=TOPIC) == N + 1
        assert sample(fams, "rocketmq_messages_out_total", topic=TOPIC, group=GROUP) == M + 1
        assert sample(fams, "rocketmq_responses_total", code="SUCCESS") >= N + 2

    # Every client connection gone: the gauge follows.
    await eventually(br_metrics, lambda f: total(f, "rocketmq_connections") == 0,
                     "the client connections to close")

    # The broker answered every request slower than its 0.001 ms threshold.
    slow = await log_eventually(broker, r"remoting\.slow_request.*code=SEND_MESSAGE_V2",
                                "a slow-request line")
    assert re.search(r"elapsed_ms=[\d.]+", slow[0]) and re.search(r"opaque=\d+", slow[0])
    assert re.search(r"peer=127\.0\.0\.1:\d+", slow[0])

    ns = await scrape(ns_metrics)
    assert sample(ns, "rocketmq_requests_total", code="REGISTER_BROKER") >= 1
    assert sample(ns, "rocketmq_requests_total", code="GET_ROUTEINFO_BY_TOPIC") >= 1
    assert sample(ns, "rocketmq_responses_total", code="SUCCESS") >= 2
    assert sample(ns, "rocketmq_brokers_live") == 1
    assert sample(ns, "rocketmq_topics") >= 1
    assert sample(ns, "rocketmq_connections") >= 1  # the broker's own connection
    # --log-level DEBUG: one line per request with code, opaque, peer and duration.
    lines = await log_eventually(namesrv, r"remoting\.request .*code=REGISTER_BROKER",
                                 "a DEBUG request line")
    assert all(k in lines[0] for k in ("opaque=", "peer=", "duration_ms="))


async def check_exporter_families(namesrv_addr: str, broker_addr: str, br_metrics: str,
                                  record_size: int, sent_after_ms: int) -> None:
    """rocketmq-exporter's families after N sends (stored at or after ``sent_after_ms``,
    epoch ms) and M committed by GROUP (one queue)."""
    online = {"group": GROUP, "topic": TOPIC, "countOfOnlineConsumers": "1", "msgModel": "1"}
    fams = await eventually(
        br_metrics, lambda f: bool(matching(f, "rocketmq_group_diff", **online)),
        "the group's diff with its online consumer")
    scraped_by_ms = math.ceil(time.time() * 1000)
    for name in family_names():
        assert fams[name].type == "gauge", name
    # RMQMetricsCollector's label lists, names and order.
    topic_labels = {"cluster": CLUSTER, "broker": BROKER, "topic": TOPIC}
    group_labels = {**topic_labels, "group": GROUP}
    assert sample(fams, "rocketmq_producer_offset", **topic_labels) == N
    assert sample(fams, "rocketmq_consumer_offset", **group_labels) == M
    assert sample(fams, "rocketmq_group_diff", **online) == N - M
    assert matching(fams, "rocketmq_group_retrydiff", group=GROUP) == []
    lag_ms = sample(fams, "rocketmq_group_get_latency_by_storetime", **group_labels)
    # The oldest unconsumed message was stored after sent_after_ms and the scrape answered
    # before scraped_by_ms: its age then is positive and no more than the time between.
    assert 0 < lag_ms <= scraped_by_ms - sent_after_ms
    ((count_labels, count),) = matching(fams, "rocketmq_group_count", group=GROUP)
    assert count == 1 and re.fullmatch(r"127\.0\.0\.1:\d+", count_labels["caddr"])
    assert count_labels["localaddr"]  # the client id
    assert [ls for ls, _ in matching(fams, "rocketmq_broker_tps")] == [
        {"cluster": CLUSTER, "brokerIP": broker_addr, "broker": BROKER}]

    async with MQAdmin(namesrv_addr) as admin:
        runtime = await admin.broker_runtime_info(broker_addr)
        labels = {"cluster": CLUSTER, "brokerIP": broker_addr, "brokerHost": "",
                  "des": runtime["brokerVersionDesc"], "boottime": runtime["bootTimestamp"],
                  "broker_version": runtime["brokerVersion"]}
        assert labels["des"].startswith("V4_9_")
        fams = await scrape(br_metrics)
        for name, key in (("rocketmq_brokeruntime_commitlog_maxoffset", "commitLogMaxOffset"),
                          ("rocketmq_brokeruntime_msg_put_total_today_now", "msgPutTotalTodayNow"),
                          ("rocketmq_brokeruntime_put_message_size_total", "putMessageSizeTotal")):
            assert sample(fams, name, **labels) == int(runtime[key]), name
        assert sample(fams, "rocketmq_brokeruntime_commitlog_maxoffset", **labels) == \
            N * record_size
        assert sample(fams, "rocketmq_brokeruntime_msg_put_total_today_now", **labels) == N
        assert sample(fams, "rocketmq_brokeruntime_msg_gettotal_today_now", **labels) == M
        assert sample(fams, "rocketmq_brokeruntime_commitlogdir_capacity_total", **labels) > 0
        pmdt = sum(v for n in family_names() if n.startswith("rocketmq_brokeruntime_pmdt_")
                   for _, v in matching(fams, n, **labels))
        assert 0 <= pmdt <= N

        # The TPS families are the VIEW_BROKER_STATS_DATA minute views, rounded to 2 places.
        async def minute_tps(stats_name: str, stats_key: str) -> float:
            header = ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key)
            response = await admin.invoke(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA, header)
            return fixed_double(BrokerStatsData.decode(response.body or b"").stats_minute.tps)

        checks = (
            ("rocketmq_producer_tps", topic_labels, "TOPIC_PUT_NUMS", TOPIC),
            ("rocketmq_producer_message_size", topic_labels, "TOPIC_PUT_SIZE", TOPIC),
            ("rocketmq_consumer_tps", group_labels, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}"),
            ("rocketmq_consumer_message_size", group_labels, "GROUP_GET_SIZE", f"{TOPIC}@{GROUP}"),
            ("rocketmq_broker_tps", {"broker": BROKER}, "BROKER_PUT_NUMS", CLUSTER),
            ("rocketmq_broker_qps", {"broker": BROKER}, "BROKER_GET_NUMS", CLUSTER),
        )
        for name, name_labels, stats_name, stats_key in checks:
            # The view moves at 10 s sampling boundaries: retry until both reads agree.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while True:
                expected = await minute_tps(stats_name, stats_key)
                ((_, got),) = matching(await scrape(br_metrics), name, **name_labels)
                if got == expected or loop.time() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert got == expected, name


async def test_metrics_port_off_by_default(
        tmp_path: Path, server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    namesrv = server_factory(namesrv_process(tmp_path))
    broker = server_factory(broker_process(tmp_path, namesrv.address))
    assert all("metrics listening" not in ln for ln in namesrv.stdout_lines + broker.stdout_lines)
    started = await log_eventually(broker, r"broker\.started", "the startup log line")
    assert "metrics=None" in started[0]
    async with Producer("PG_nometrics", namesrv.address) as producer:
        result = await producer.send(Message("NoMetricsT", b"x"))
    assert result.msg_id
