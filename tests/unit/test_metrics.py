"""Metrics: registry, label bounding, the Prometheus 0.0.4 text format (parsed back with a
parser of our own), the request observer on real channels, the HTTP endpoint.

Sockets are 127.0.0.1 only; nothing sleeps: tests wait on futures, EOF, or a condition
under a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_server import RemotingServer
from aiorocketmq.server.metrics import (
    CONTENT_TYPE,
    OTHER,
    MetricsHttpServer,
    Registry,
    RemotingObserver,
    ServerMetrics,
    add_metrics_arguments,
    metrics_options,
)
from aiorocketmq.server.metrics.broker import APPEND_BUCKETS
from aiorocketmq.server.metrics.exporter import (
    PMDT_BANDS,
    RUNTIME_GAUGES,
    PutLatencyBands,
    family_names,
    fixed_double,
    machine_readable_byte_count,
    split_tps,
)
from aiorocketmq.server.metrics.registry import format_value
from tests.logs import capture_logs

pytestmark = pytest.mark.timeout(30)


# -- a small parser of the text format ------------------------------------------------------

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)\Z")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|\Z)')


@dataclass
class Family:
    name: str
    help: str = ""
    type: str = ""
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def _unescape(text: str, quotes: bool) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            nxt = text[i + 1]
            if nxt == "n":
                out.append("\n")
            elif nxt == "\\" or (quotes and nxt == '"'):
                out.append(nxt)
            else:
                raise AssertionError(f"bad escape \\{nxt} in {text!r}")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _parse_labels(text: str) -> dict[str, str]:
    inner = text[1:-1]
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(inner):
        m = _LABEL.match(inner, pos)
        assert m, f"bad labels {text!r} at {pos}"
        assert m.group(1) not in labels, f"duplicate label in {text!r}"
        labels[m.group(1)] = _unescape(m.group(2), quotes=True)
        pos = m.end()
    return labels


def _value(text: str) -> float:
    return {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(text) or float(text)


def parse_exposition(text: str) -> dict[str, Family]:
    """Families by name; samples are attributed to the family their name belongs to."""
    assert text == "" or text.endswith("\n")
    families: dict[str, Family] = {}
    current: Family | None = None
    # Only "\n" ends a line in this format (str.splitlines would also split on \x1e, ...).
    for line in text.split("\n")[:-1] if text else []:
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"family {name} twice"
            current = families[name] = Family(name, _unescape(help_text, quotes=False))
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert current is not None and current.name == name, "TYPE without its HELP"
            assert kind in ("counter", "gauge", "histogram")
            assert not current.samples, "TYPE after samples"
            current.type = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            assert current is not None
            name = m.group(1)
            allowed = {current.name}
            if current.type == "histogram":
                allowed = {current.name + s for s in ("_bucket", "_sum", "_count")}
            assert name in allowed, f"{name} inside family {current.name}"
            labels = _parse_labels(m.group(2)) if m.group(2) else {}
            current.samples.append((name, labels, _value(m.group(3))))
    for fam in families.values():
        if fam.type == "histogram":
            check_histogram(fam)
    return families


def check_histogram(fam: Family) -> None:
    """Per series: buckets cumulative and ascending in le, +Inf last and equal to _count."""
    series: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    counts: dict[tuple[tuple[str, str], ...], float] = {}
    for name, labels, value in fam.samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        if name.endswith("_bucket"):
            series.setdefault(key, []).append((_value(labels["le"]), value))
        elif name.endswith("_count"):
            counts[key] = value
    assert series.keys() == counts.keys()
    for key, buckets in series.items():
        les = [le for le, _ in buckets]
        assert les == sorted(les) and les[-1] == math.inf
        values = [v for _, v in buckets]
        assert values == sorted(values), f"buckets not monotonic: {values}"
        assert values[-1] == counts[key]


def value_of(families: dict[str, Family], name: str, **labels: str) -> float:
    family_name = re.sub(r"_(bucket|sum|count)\Z", "", name)
    fam = families.get(name) or families[family_name]
    found = [v for n, ls, v in fam.samples if n == name and ls == labels]
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0]


# -- registry --------------------------------------------------------------------------------


def test_counter_gauge_histogram_render_and_parse_back() -> None:
    reg = Registry()
    sent = reg.counter("rocketmq_messages_in_total", "Messages in.", ("topic",))
    sent.labels("TopicA").inc()
    sent.labels("TopicA").inc(2)
    sent.labels("TopicB").inc(0.5)
    with pytest.raises(ValueError):
        sent.labels("TopicA").inc(-1)
    up = reg.gauge("up", "Up.")
    up.set(1)
    held = reg.gauge("held", "Held.", ("queue",))
    held.labels("0").inc(3)
    held.labels("0").dec()
    lat = reg.histogram("lat_seconds", "Latency.", buckets=(0.1, 1.0, 10.0))
    for v in (0.05, 0.1, 0.5, 1.0, 20.0):
        lat.observe(v)
    fams = parse_exposition(reg.render())
    assert list(fams) == ["rocketmq_messages_in_total", "up", "held", "lat_seconds"]
    assert fams["rocketmq_messages_in_total"].type == "counter"
    assert value_of(fams, "rocketmq_messages_in_total", topic="TopicA") == 3
    assert value_of(fams, "rocketmq_messages_in_total", topic="TopicB") == 0.5
    assert value_of(fams, "up") == 1
    assert value_of(fams, "held", queue="0") == 2
    # le is "less or equal": 0.1 and 1.0 fall in their own buckets.
    assert value_of(fams, "lat_seconds_bucket", le="0.1") == 2
    assert value_of(fams, "lat_seconds_bucket", le="1.0") == 4
    assert value_of(fams, "lat_seconds_bucket", le="10.0") == 4
    assert value_of(fams, "lat_seconds_bucket", le="+Inf") == 5
    assert value_of(fams, "lat_seconds_count") == 5
    assert value_of(fams, "lat_seconds_sum") == pytest.approx(21.65)


def test_exact_text_of_a_small_registry() -> None:
    reg = Registry()
    c = reg.counter("a_total", "Help with \\ and\nnewline.", ("k",))
    c.labels('q"uo\\te\nd').inc(7)
    h = reg.histogram("h", "H.", buckets=(1,))
    h.observe(0.5)
    assert reg.render() == (
        "# HELP a_total Help with \\\\ and\\nnewline.\n"
        "# TYPE a_total counter\n"
        'a_total{k="q\\"uo\\\\te\\nd"} 7\n'
        "# HELP h H.\n"
        "# TYPE h histogram\n"
        'h_bucket{le="1.0"} 1\n'
        'h_bucket{le="+Inf"} 1\n'
        "h_sum 0.5\n"
        "h_count 1\n"
    )


def test_format_value() -> None:
    assert format_value(3) == "3"
    assert format_value(3.0) == "3"
    assert format_value(0.25) == "0.25"
    assert format_value(math.inf) == "+Inf"
    assert format_value(-math.inf) == "-Inf"
    assert format_value(math.nan) == "NaN"


def test_names_are_validated_and_unique() -> None:
    reg = Registry()
    reg.counter("ok_total", "x")
    with pytest.raises(ValueError, match="already registered"):
        reg.gauge("ok_total", "x")
    with pytest.raises(ValueError, match="invalid metric name"):
        reg.counter("0bad", "x")
    with pytest.raises(ValueError, match="invalid label name"):
        reg.counter("c1", "x", ("bad-label",))
    with pytest.raises(ValueError, match="invalid label name"):
        reg.counter("c2", "x", ("__reserved",))
    with pytest.raises(ValueError, match="'le'"):
        reg.histogram("h1", "x", ("le",))
    with pytest.raises(ValueError, match="distinct"):
        reg.histogram("h2", "x", buckets=(1, 1))
    with pytest.raises(ValueError, match="takes labels"):
        reg.counter("c3", "x", ("a", "b")).labels("only-one")


def test_label_sets_are_bounded_and_fold_into_other() -> None:
    reg = Registry(max_series=3)
    c = reg.counter("msgs_total", "x", ("topic",))
    children = [c.labels(f"T{i}") for i in range(3)]
    for i in range(3, 1000):  # a client inventing topic names
        c.labels(f"T{i}").inc()
    assert c.series_count == 4  # three real series + other
    assert c.labels("T0") is children[0]
    assert c.labels("T999") is c.labels(OTHER)
    fams = parse_exposition(reg.render())
    assert value_of(fams, "msgs_total", topic=OTHER) == 997
    assert len(fams["msgs_total"].samples) == 4


def test_scrape_time_families_fold_their_tail_into_other() -> None:
    reg = Registry()
    rows = [((f"G{i}", "T"), float(i)) for i in range(10)] + [(("G0", "T"), 5.0)]
    reg.gauge_func("lag", "x", ("group", "topic"), lambda: rows, max_series=4)
    reg.counter_func("plain_total", "x", (), lambda: [((), 42)])
    fams = parse_exposition(reg.render())
    assert value_of(fams, "lag", group="G0", topic="T") == 5  # repeated keys add up
    assert value_of(fams, "lag", group="G3", topic="T") == 3
    assert value_of(fams, "lag", group=OTHER, topic=OTHER) == sum(range(4, 10))
    assert len(fams["lag"].samples) == 5
    assert fams["plain_total"].type == "counter" and value_of(fams, "plain_total") == 42


def test_collect_hooks_run_once_per_render_before_the_families() -> None:
    reg = Registry()
    snapshot: list[int] = []
    reg.add_collect_hook(lambda: snapshot.append(len(snapshot)))
    reg.gauge_func("a", "x", (), lambda: [((), snapshot[-1])])
    reg.gauge_func("b", "x", (), lambda: [((), len(snapshot))])
    fams = parse_exposition(reg.render())
    assert value_of(fams, "a") == 0 and value_of(fams, "b") == 1
    fams = parse_exposition(reg.render())
    assert value_of(fams, "a") == 1 and value_of(fams, "b") == 2


# -- rocketmq-exporter compatibility (value parsing as BrokerRuntimeStats / Utils) ------------


def test_exporter_parses_runtime_values_as_the_exporter_does() -> None:
    # putTps as StoreStatsService writes it: windows without enough samples are empty.
    assert split_tps("  ") == (0.0, 0.0, 0.0)
    assert split_tps("0.0 0.2998800479808077 ") == (0.0, 0.2998800479808077, 0.0)
    assert split_tps("1.5 2.5 3.5") == (1.5, 2.5, 3.5)
    assert machine_readable_byte_count("512 B") == 512
    assert machine_readable_byte_count("1.5 KiB") == 1536
    assert machine_readable_byte_count("252.0 GiB") == 252.0 * 1024 ** 3
    assert fixed_double(0.2998800479808077) == 0.3 and fixed_double(12.0) == 12
    gauges = dict(RUNTIME_GAUGES)
    info = {"commitLogDirCapacity": "Total : 252.0 GiB, Free : 100.5 MiB.",
            "remainHowManyDataToFlush": "1.2 KiB", "getFoundTps": "4.0 3.0 ",
            "commitLogMaxOffset": "123456789012"}
    assert gauges["rocketmq_brokeruntime_commitlogdir_capacity_total"](info) == 252 * 1024 ** 3
    assert gauges["rocketmq_brokeruntime_commitlogdir_capacity_free"](info) == 100.5 * 1024 ** 2
    assert gauges["rocketmq_brokeruntime_remain_howmanydata_toflush"](info) == 1.2  # unit dropped
    assert gauges["rocketmq_brokeruntime_getfound_tps10"](info) == 4.0
    assert gauges["rocketmq_brokeruntime_getfound_tps600"](info) == 0.0
    assert gauges["rocketmq_brokeruntime_commitlog_maxoffset"](info) == 123456789012
    assert gauges["rocketmq_brokeruntime_put_latency_99"](info) == -1  # exporter's default
    names = list(family_names())
    assert len(names) == len(set(names)) and all(n.startswith("rocketmq_") for n in names)


def test_put_latency_bands_count_the_current_minute() -> None:
    reg = Registry()
    series = reg.histogram("append_seconds", "x", buckets=APPEND_BUCKETS).labels()
    now = [1000.0]
    bands = PutLatencyBands(series, monotonic=lambda: now[0])
    suffixes = [suffix for suffix, _, _ in PMDT_BANDS]
    for seconds in (0.0002, 0.0009, 0.005, 0.15, 0.3, 2.5, 11.0):
        series.observe(seconds)
    counts = dict(zip(suffixes, bands.counts(), strict=True))
    assert counts == {**dict.fromkeys(suffixes, 0), "0ms": 2, "0to10ms": 1, "100to200ms": 1,
                      "200to500ms": 1, "2to3s": 1, "10stomore": 1}
    now[0] += 59.9
    assert sum(bands.counts()) == 7  # still the same minute
    now[0] += 0.1
    assert sum(bands.counts()) == 0  # a new minute
    series.observe(0.02)
    assert dict(zip(suffixes, bands.counts(), strict=True))["10to50ms"] == 1
    with pytest.raises(ValueError, match="band edges"):
        PutLatencyBands(reg.histogram("coarse_seconds", "x", buckets=(1.0,)).labels())


_label_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.dictionaries(st.tuples(_label_text, _label_text),
                       st.integers(min_value=0, max_value=2**53), max_size=8),
       st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
       st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=30))
def test_render_parses_back_to_what_was_recorded(
        values: dict[tuple[str, str], int], help_text: str, observations: list[float]) -> None:
    reg = Registry()
    c = reg.counter("p_total", help_text, ("a", "b"))
    for (a, b), v in values.items():
        c.labels(a, b).inc(v)
    h = reg.histogram("p_seconds", help_text, ("a",), buckets=(0.5, 5, 50))
    for x in observations:
        h.labels("x\n\"\\").observe(x)
    fams = parse_exposition(reg.render())
    assert fams["p_total"].help == help_text
    got = {(ls["a"], ls["b"]): v for _, ls, v in fams["p_total"].samples}
    assert got == {k: float(v) for k, v in values.items()}
    if observations:
        assert value_of(fams, "p_seconds_count", a="x\n\"\\") == len(observations)
        assert value_of(fams, "p_seconds_bucket", a="x\n\"\\", le="5.0") == sum(
            1 for x in observations if x <= 5)


def test_metrics_options_flags_win_over_file_keys() -> None:
    parser = argparse.ArgumentParser()
    add_metrics_arguments(parser)
    assert metrics_options(parser.parse_args([]), {}) == (None, 1000.0)
    assert metrics_options(parser.parse_args([]), {"metricsPort": "0",
                                                    "slowRequestMillis": "250"}) == (0, 250.0)
    args = parser.parse_args(["--metrics-port", "9100", "--slow-request-ms", "0"])
    assert metrics_options(args, {"metricsPort": "1", "slowRequestMillis": "5"}) == (9100, 0.0)
    with pytest.raises(ValueError, match="metricsPort"):
        metrics_options(parser.parse_args([]), {"metricsPort": "x"})
    with pytest.raises(ValueError, match="0..65535"):
        metrics_options(parser.parse_args(["--metrics-port", "70000"]), {})


def test_broker_config_carries_the_metrics_keys_and_flags_win() -> None:
    from aiorocketmq.server.broker.config import BrokerConfig
    from aiorocketmq.server.metrics import apply_metrics_arguments

    parser = argparse.ArgumentParser()
    add_metrics_arguments(parser)
    default = BrokerConfig.from_properties({})
    assert (default.metrics_port, default.slow_request_ms) == (None, 1000.0)
    blank = BrokerConfig.from_properties({"metricsPort": "", "slowRequestMillis": " "})
    assert (blank.metrics_port, blank.slow_request_ms) == (None, 1000.0)
    conf = BrokerConfig.from_properties({"metricsPort": "0", "slowRequestMillis": "250"})
    assert (conf.metrics_port, conf.slow_request_ms) == (0, 250.0)
    assert "metricsPort=0\n" in conf.to_properties()
    assert "slowRequestMillis=250.0\n" in conf.to_properties()
    assert apply_metrics_arguments(parser.parse_args([]), conf) is conf
    flagged = apply_metrics_arguments(
        parser.parse_args(["--metrics-port", "9100", "--slow-request-ms", "0"]), conf)
    assert (flagged.metrics_port, flagged.slow_request_ms) == (9100, 0.0)
    with pytest.raises(ValueError, match="metricsPort"):
        BrokerConfig.from_properties({"metricsPort": "x"})
    with pytest.raises(ValueError, match="0..65535"):
        apply_metrics_arguments(parser.parse_args(["--metrics-port", "70000"]), conf)


# -- the request observer on real channels ----------------------------------------------------

ECHO = 9101
ASYNC_ECHO = 9102
HOLD = 9103
RAISE = 9104
SLOW = 9105


class Handlers:
    def __init__(self) -> None:
        self.held: asyncio.Queue[tuple[Channel, RemotingCommand]] = asyncio.Queue(maxsize=10)

    def table(self) -> dict[int, object]:
        return {ECHO: self.echo, ASYNC_ECHO: self.async_echo, HOLD: self.hold,
                RAISE: self.raising, SLOW: self.slow}

    def echo(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SUCCESS)

    async def async_echo(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0)
        return request.create_response(ResponseCode.SUCCESS)

    def hold(self, channel: Channel, request: RemotingCommand) -> None:
        self.held.put_nowait((channel, request))
        return None

    def raising(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("boom")

    async def slow(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0.05)  # the handler under test is slow (a stuck disk, say)
        return request.create_response(ResponseCode.SYSTEM_BUSY)


@pytest.fixture
async def observed() -> AsyncIterator[tuple[Registry, Handlers, Channel]]:
    reg = Registry()
    handlers = Handlers()
    observer = RemotingObserver(reg, slow_request_ms=20)
    server = RemotingServer(handlers.table(), request_observer=observer)  # type: ignore[arg-type]
    await server.start()
    client = await Channel.connect("127.0.0.1", server.port)
    try:
        yield reg, handlers, client
    finally:
        client.close()
        await client.wait_closed()
        await server.stop()


def req(code: int) -> RemotingCommand:
    return RemotingCommand.create_request(code)


async def test_observer_counts_every_request_and_response_by_code_name(
        observed: tuple[Registry, Handlers, Channel]) -> None:
    reg, handlers, client = observed
    for _ in range(3):
        assert (await client.invoke(req(ECHO), 5)).code == ResponseCode.SUCCESS
    assert (await client.invoke(req(ASYNC_ECHO), 5)).code == ResponseCode.SUCCESS
    assert (await client.invoke(req(RAISE), 5)).code == ResponseCode.SYSTEM_ERROR
    unknown = await client.invoke(req(int(RequestCode.SEND_MESSAGE)), 5)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    pending = asyncio.ensure_future(client.invoke(req(HOLD), 5))
    channel, held = await handlers.held.get()
    fams = parse_exposition(reg.render())
    assert value_of(fams, "rocketmq_requests_total", code=str(HOLD)) == 1
    assert value_of(fams, "rocketmq_responses_total", code="SUCCESS") == 4
    channel.send_response(held.create_response(ResponseCode.PULL_NOT_FOUND))
    assert (await pending).code == ResponseCode.PULL_NOT_FOUND
    await client.invoke_oneway(req(ECHO), 5)
    await client.invoke(req(ECHO), 5)  # answered after the oneway: it has been dispatched

    fams = parse_exposition(reg.render())
    assert value_of(fams, "rocketmq_requests_total", code=str(ECHO)) == 5
    assert value_of(fams, "rocketmq_requests_total", code=str(ASYNC_ECHO)) == 1
    assert value_of(fams, "rocketmq_requests_total", code="SEND_MESSAGE") == 1
    assert value_of(fams, "rocketmq_responses_total", code="SUCCESS") == 5
    assert value_of(fams, "rocketmq_responses_total", code="SYSTEM_ERROR") == 1
    assert value_of(fams, "rocketmq_responses_total", code="REQUEST_CODE_NOT_SUPPORTED") == 1
    assert value_of(fams, "rocketmq_responses_total", code="PULL_NOT_FOUND") == 1


async def test_slow_requests_are_logged_and_held_ones_are_not(
        observed: tuple[Registry, Handlers, Channel]) -> None:
    reg, handlers, client = observed
    with capture_logs() as logs:
        pending = asyncio.ensure_future(client.invoke(req(HOLD), 5))
        channel, held = await handlers.held.get()
        # The held request stays parked for as long as the slow one takes (>= 50 ms).
        assert (await client.invoke(req(SLOW), 5)).code == ResponseCode.SYSTEM_BUSY
        channel.send_response(held.create_response(ResponseCode.SUCCESS))
        await pending
        # A oneway request is timed to its handler's end (nothing is written).
        await client.invoke_oneway(req(SLOW), 5)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while sum(e["event"] == "remoting.slow_request" for e in logs) < 2:
            assert loop.time() < deadline, "no slow-request line for the oneway request"
            await asyncio.sleep(0.01)
    slow_lines = [e for e in logs if e["event"] == "remoting.slow_request"]
    assert [e["code"] for e in slow_lines] == [str(SLOW), str(SLOW)]
    assert slow_lines[1]["response"] is None
    line = slow_lines[0]
    assert line["log_level"] == "warning"
    assert line["code"] == str(SLOW) and line["response"] == "SYSTEM_BUSY"
    assert line["elapsed_ms"] >= 20 and line["peer"] == client.local_addr
    assert line["opaque"] > 0


async def test_debug_request_lines_only_when_asked() -> None:
    handlers = Handlers()
    observer = RemotingObserver(None, slow_request_ms=0, log_requests=True)
    server = RemotingServer(handlers.table(), request_observer=observer)  # type: ignore[arg-type]
    await server.start()
    client = await Channel.connect("127.0.0.1", server.port)
    try:
        with capture_logs() as logs:
            response = await client.invoke(req(ECHO), 5)
    finally:
        client.close()
        await client.wait_closed()
        await server.stop()
    lines = [e for e in logs if e["event"] == "remoting.request"]
    assert len(lines) == 1
    assert lines[0]["log_level"] == "debug"
    assert lines[0]["code"] == str(ECHO) and lines[0]["opaque"] == response.opaque
    assert lines[0]["response"] == "SUCCESS" and lines[0]["duration_ms"] >= 0
    assert not [e for e in logs if e["event"] == "remoting.slow_request"]


# -- HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
async def http_server() -> AsyncIterator[MetricsHttpServer]:
    reg = Registry()
    reg.counter("scrapes_total", "x").inc(3)
    server = MetricsHttpServer(reg.render, max_request_bytes=1024, idle_timeout=0.5,
                               max_connections=2)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    body = await reader.readexactly(int(headers["content-length"]))
    return status, headers, body


async def test_http_get_metrics_keep_alive_and_404(http_server: MetricsHttpServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", http_server.port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = await read_response(reader)
        assert status == 200 and headers["content-type"] == CONTENT_TYPE
        assert value_of(parse_exposition(body.decode()), "scrapes_total") == 3
        writer.write(b"GET /metrics?x=1 HTTP/1.1\r\n\r\nGET /other HTTP/1.1\r\n\r\n")
        assert (await read_response(reader))[0] == 200
        assert (await read_response(reader))[0] == 404
        writer.write(b"POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        status, headers, _ = await read_response(reader)
        assert status == 404 and headers["connection"] == "close"
        assert await reader.read() == b""  # closed as asked
    finally:
        writer.close()


@pytest.mark.parametrize("request_bytes, status", [
    (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 2000 + b"\r\n\r\n", 431),
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400),
])
async def test_http_bad_requests_are_answered_then_closed(
        http_server: MetricsHttpServer, request_bytes: bytes, status: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", http_server.port)
    try:
        writer.write(request_bytes)
        assert (await read_response(reader))[0] == status
        assert await reader.read() == b""
    finally:
        writer.close()


async def test_http_idle_connection_is_closed(http_server: MetricsHttpServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", http_server.port)
    try:
        writer.write(b"GET /met")  # half a request, then silence
        async with asyncio.timeout(10):
            assert await reader.read() == b""
    finally:
        writer.close()


async def test_http_connection_cap_and_http10(http_server: MetricsHttpServer) -> None:
    held = [await asyncio.open_connection("127.0.0.1", http_server.port) for _ in range(2)]
    try:
        # Both are accepted and served (the cap counts live connections).
        for reader, writer in held:
            writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
            assert (await read_response(reader))[0] == 200
        reader, writer = await asyncio.open_connection("127.0.0.1", http_server.port)
        try:
            async with asyncio.timeout(10):
                assert await reader.read() == b""  # a third is closed at accept
        finally:
            writer.close()
    finally:
        for _, writer in held:
            writer.close()
    # HTTP/1.0 without keep-alive: one answer, then close.
    async with asyncio.timeout(10):
        while True:  # the two closed connections leave the table when their tasks end
            reader, writer = await asyncio.open_connection("127.0.0.1", http_server.port)
            writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
            try:
                status = (await read_response(reader))[0]
            except asyncio.IncompleteReadError:
                writer.close()
                await asyncio.sleep(0.01)
                continue
            assert status == 200 and await reader.read() == b""
            writer.close()
            break


async def test_server_metrics_lifecycle_and_zero_cost_when_all_off() -> None:
    off = ServerMetrics(metrics_port=None, slow_request_ms=0)
    assert off.observer is None and off.registry is None and off.address is None
    await off.start()
    await off.stop()
    assert ServerMetrics(metrics_port=None).observer is not None  # slow log on by default
    on = ServerMetrics(metrics_port=0, slow_request_ms=0)
    assert on.observer is not None and on.registry is not None
    await on.start()
    try:
        assert on.address is not None
        host, _, port = on.address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        status, _, body = await read_response(reader)
        writer.close()
        assert status == 200 and "rocketmq_requests_total" in parse_exposition(body.decode())
    finally:
        await on.stop()
        await on.stop()  # idempotent
    assert on.address is None
    with pytest.raises(ValueError):
        ServerMetrics(metrics_port=65536)
