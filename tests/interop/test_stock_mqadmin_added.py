"""The mqadmin commands added after the first fifteen, beside the stock 4.9.7 tool (issue #27):
topicClusterList, allocateMQ, printMsgByQueue, sendMsgStatus, checkMsgSendRT, producerConnection,
producer, getConsumerConfig, statsAll, clusterRT, exportMetadata, exportConfigs.

Each command runs twice against the same servers, once with OUR ``mqadmin`` and once with the
stock one, on both sides: our nameserver + broker and the stock nameserver + broker. Their
stdout is compared line by line; what legitimately differs between two runs (round-trip times,
the ids and offsets of newly sent messages, a producer's last heartbeat time, the export
time in a file) is masked first and only there. Files the export commands write are
compared byte for byte.

"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.client import ClientConfig
from aiorocketmq.client.sync import SyncProducer
from aiorocketmq.protocol.message import Message
from tests.interop import stock
from tests.interop.checks import FAST_BROKER_CONF
from tests.interop.stock import (
    CLIENT_HEAP,
    MQADMIN_MAIN,
    JavaEnv,
    jvm_args,
    start_stock_broker,
    start_stock_namesrv,
    stop_all,
)
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

REPO = str(Path(__file__).resolve().parents[2])
TOPIC, GROUP, PRODUCER_GROUP = "AddedT", "AddedG", "AddedPG"
SIDES = ["our-servers", "stock-servers"]


@dataclass
class Side:
    name: str
    namesrv: str
    broker: str
    tmp: Path

    def ours(self, command: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "aiorocketmq.client.admin.cli", command,
                               "-n", self.namesrv, *args], capture_output=True, text=True,
                              timeout=120, cwd=REPO)
        assert done.returncode == 0, f"ours {command}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def stock(self, command: str, *args: str) -> str:
        result = stock.mqadmin(self.tmp, self.namesrv, command, *args, timeout=120)
        assert result.returncode == 0 and "Exception" not in result.stdout + result.stderr, \
            result.describe()
        return result.stdout

    def both(self, command: str, *args: str) -> tuple[str, str]:
        return self.ours(command, *args), self.stock(command, *args)


def _start_stock(tmp: Path, out: list[ServerProcess], errors: list[BaseException]) -> None:
    try:
        ns = start_stock_namesrv(tmp)
        out.append(ns)
        out.append(start_stock_broker(tmp, ns.address, conf=FAST_BROKER_CONF))
    except BaseException as exc:
        errors.append(exc)


@pytest.fixture(scope="module")
def sides(stock_java: JavaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """Both sides, each with TOPIC (4 queues, 12 messages of two tags), GROUP and a live
    producer of PRODUCER_GROUP."""
    tmp_ours, tmp_stock = (tmp_path_factory.mktemp(name) for name in SIDES)
    servers: list[ServerProcess] = []
    errors: list[BaseException] = []
    starter = threading.Thread(target=_start_stock, args=(tmp_stock, servers, errors))
    starter.start()
    producers: list[SyncProducer] = []
    try:
        with namesrv_and_broker(tmp_ours, conf=FAST_BROKER_CONF) as (ns, br):
            starter.join()
            if errors:
                raise errors[0]
            made = [Side(SIDES[0], ns.address, br.address, tmp_ours),
                    Side(SIDES[1], servers[0].address, servers[1].address, tmp_stock)]
            try:
                for s in made:
                    s.ours("updateTopic", "-b", s.broker, "-t", TOPIC, "-r", "4", "-w", "4")
                    s.ours("updateSubGroup", "-b", s.broker, "-g", GROUP, "-r", "5")
                    p = SyncProducer(PRODUCER_GROUP, config=ClientConfig(namesrv_addr=s.namesrv,
                                                                         client_ip="127.0.0.1"))
                    p.__enter__()
                    producers.append(p)
                    for i in range(12):
                        p.send(Message(TOPIC, f"added body {i}".encode(),
                                       tags="TagA" if i % 3 else "TagB", keys=f"ak{i}"))
                yield {s.name: s for s in made}
            finally:
                for p in producers:
                    p.__exit__(None, None, None)
    finally:
        starter.join()
        stop_all(reversed(servers))


@pytest.fixture(params=SIDES)
def side(request: pytest.FixtureRequest, sides: dict[str, Side]) -> Side:
    return sides[request.param]


def lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def masked(text: str, *patterns: tuple[str, str]) -> list[str]:
    for pattern, repl in patterns:
        text = re.sub(pattern, repl, text)
    return lines(text)


def test_topic_cluster_list_and_allocate_mq(side: Side) -> None:
    ours, theirs = side.both("topicClusterList", "-t", TOPIC)
    assert lines(ours) == lines(theirs) == ["DefaultCluster"]
    ours, theirs = side.both("allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2,10.0.0.3")
    assert ours == theirs, (ours, theirs)
    result = json.loads(ours)["result"]
    assert sorted(q["queueId"] for qs in result.values() for q in qs) == [0, 1, 2, 3]


def test_print_msg_by_queue(side: Side) -> None:
    for args in (("-p", "true", "-d", "true", "-f", "true"), ("-f", "true"), ("-p", "true", "-s", "TagB")):
        ours, theirs = side.both("printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "1", *args)
        assert lines(ours) == lines(theirs), args
    assert "MIN_OFFSET=0" in ours and "TagB" in ours and "TagA" not in ours.replace("TAGS=TagB", "")


def test_producer_connection_and_producer(side: Side) -> None:
    ours, theirs = side.both("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC)
    assert lines(ours) == lines(theirs)
    assert re.fullmatch(r"0001  127\.0\.0\.1@\S+\s+127\.0\.0\.1:\d+\s+PYTHON\s+V4_9_\d+", lines(ours)[0])
    ours, theirs = side.both("producer", "-b", side.broker)
    mine = [ln for ln in masked(ours, (r"lastUpdateTimestamp=\d+", "lastUpdateTimestamp=T"))
            if f"({PRODUCER_GROUP})" in ln]
    assert mine == [ln for ln in masked(theirs, (r"lastUpdateTimestamp=\d+", "lastUpdateTimestamp=T"))
                    if f"({PRODUCER_GROUP})" in ln]
    assert len(mine) == 1 and ", language=PYTHON, version=" in mine[0] and "remoteIP=/127.0.0.1:" in mine[0]


def test_get_consumer_config(side: Side) -> None:
    ours, theirs = side.both("getConsumerConfig", "-g", GROUP)
    assert lines(ours) == lines(theirs)
    assert lines(ours)[0] == "=" * 29 + "DefaultCluster:broker-a" + "=" * 29
    assert "retryMaxTimes                           =  5" in lines(ours)


def test_stats_all(side: Side) -> None:
    # The minute TPS moves with the clock between the two runs: masked.
    tps = (r" +\d+\.\d\d", " TPS")
    ours, theirs = side.both("statsAll", "-t", TOPIC)
    assert masked(ours, tps) == masked(theirs, tps)
    row = lines(ours)[1].split()
    assert row[0] == TOPIC and row[-2:] == ["12", "NO_CONSUMER"], row


def test_send_msg_status_and_check_msg_send_rt(side: Side) -> None:
    sent = ((r"rt=\d+ms", "rt=Tms"), (r"msgId=\w+", "msgId=ID"), (r"offsetMsgId=\w+", "offsetMsgId=ID"),
            (r"queueOffset=\d+", "queueOffset=N"))
    ours, theirs = side.both("sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "30")
    assert masked(ours, *sent) == masked(theirs, *sent)
    assert len(lines(ours)) == 3 and "sendStatus=SEND_OK" in ours and "topic=broker-a" in ours
    rt = ((r"(?m)(true|false)( +)\d+$", r"\1\2RT"), (r"Avg RT: \d+\.\d\d", "Avg RT: X"))
    ours, theirs = side.both("checkMsgSendRT", "-t", TOPIC, "-a", "5", "-s", "16")
    assert masked(ours, *rt) == masked(theirs, *rt)
    assert [ln.split()[:3] for ln in lines(ours)[1:-1]] == [
        ["broker-a", str(i % 4), "true"] for i in range(5)]
    assert masked(ours, *rt)[-1] == "Avg RT: X"


def _stock_until(side: Side, command: str, *args: str, want_lines: int) -> list[str]:
    """A stock command that runs until stopped (clusterRT): its first lines, then killed."""
    env = stock.require_java()
    cmd = [env.java, *jvm_args(side.tmp, side.tmp / "stock-mqadmin", side.namesrv, heap=CLIENT_HEAP),
           "-cp", env.classpath, MQADMIN_MAIN, command, "-n", side.namesrv, *args]
    got: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        try:
            assert proc.stdout is not None
            while len(got) < want_lines:
                line = proc.stdout.readline()
                assert line, f"stock {command} ended after {got}"
                got.append(line.rstrip("\n"))
        finally:
            proc.kill()
    return got


def test_cluster_rt(side: Side) -> None:
    # The round trip and its padding ("%-8s" of "0.33" or "12.50"): masked.
    row = r"^(DefaultCluster +broker-a +)\d+\.\d\d +"
    ours = lines(side.ours("clusterRT", "-a", "4", "-s", "16", "--rounds", "1"))
    theirs = _stock_until(side, "clusterRT", "-a", "4", "-s", "16", want_lines=2)
    assert [re.sub(row, r"\1RT ", ln) for ln in ours] == \
        [re.sub(row, r"\1RT ", ln) for ln in theirs], (ours, theirs)
    assert ours[1].split()[-2:] == ["4", "0"], ours
    tlog = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|DefaultCluster\|broker-a\|\d+$"
    (line,) = lines(side.ours("clusterRT", "-a", "4", "-p", "true", "-m", "room1", "--rounds", "1"))
    assert re.match(tlog, line), line
    (line,) = _stock_until(side, "clusterRT", "-a", "4", "-p", "true", "-m", "room1", want_lines=1)
    assert re.match(tlog, line), line


def _export(side: Side, tmp: Path, command: str, *args: str) -> Callable[[str], tuple[str, str]]:
    ours = side.ours(command, *args, "-f", str(tmp / "ours"))
    theirs = side.stock(command, *args, "-f", str(tmp / "stock"))
    assert ours.replace(str(tmp / "ours"), "DIR") == theirs.replace(str(tmp / "stock"), "DIR")

    def files(name: str) -> tuple[str, str]:
        return (tmp / "ours" / name).read_text(), (tmp / "stock" / name).read_text()
    return files


def test_export_metadata(side: Side, tmp_path: Path) -> None:
    files = _export(side, tmp_path / "bt", "exportMetadata", "-b", side.broker, "-t")
    ours, theirs = files("topic.json")
    assert ours == theirs and TOPIC in json.loads(ours)["topicConfigTable"]
    ours, theirs = _export(side, tmp_path / "bg", "exportMetadata", "-b", side.broker, "-g")(
        "subscriptionGroup.json")
    assert ours == theirs and GROUP in json.loads(ours)["subscriptionGroupTable"]
    when = (r'"exportTime":\d+', '"exportTime":T')
    for args, name in ((("-c", "DefaultCluster"), "metadata.json"),
                       (("-c", "DefaultCluster", "-t", "-s"), "topic.json")):
        ours, theirs = _export(side, tmp_path / name, "exportMetadata", *args)(name)
        assert masked(ours, when) == masked(theirs, when), args
        exported = json.loads(ours)
        assert exported["exportTime"] > time.time() * 1000 - 3_600_000
        assert exported["topicConfigTable"][TOPIC]["readQueueNums"] == 4
    assert f"%RETRY%{GROUP}" not in json.loads(files("topic.json")[0])["topicConfigTable"]


def test_export_configs(side: Side, tmp_path: Path) -> None:
    ours, theirs = _export(side, tmp_path, "exportConfigs", "-c", "DefaultCluster")("configs.json")
    assert ours == theirs
    exported = json.loads(ours)
    assert exported["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    config = exported["brokerConfigs"]["broker-a"]
    assert len(config) == 16 and config["brokerClusterName"] == "DefaultCluster"
    assert (config["useTLS"], config["filterServerNums"]) == ("false", "0")
