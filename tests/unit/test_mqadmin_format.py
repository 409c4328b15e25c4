"""mqadmin formatting and argument parsing: pure functions, no sockets."""

from __future__ import annotations

import time

import pytest

from aiorocketmq.client.admin.api import MessageTrack
from aiorocketmq.client.admin.cli import (
    UsageError,
    build_parser,
    describe_error,
    format_cluster_list,
    format_consumer_progress,
    format_human_ms,
    format_message_tracks,
    format_subscription_group_config,
    format_topic_config,
    format_topic_status,
    java_map_string,
    main,
    parse_timestamp,
    perm_to_string,
)
from aiorocketmq.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    ConsumeStats,
    MessageQueue,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicOffset,
    TopicStatsTable,
)
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError
from tests.vectors import body_bytes


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("now", now_ms=1234) == 1234
    assert parse_timestamp("1700000000000") == 1700000000000
    expected = int(time.mktime((2024, 3, 5, 6, 7, 8, 0, 0, -1))) * 1000 + 9
    assert parse_timestamp("2024-03-05#06:07:08:009") == expected
    for bad in ("yesterday", "2024-03-05 06:07:08", "2024-03-05#06:07:08:9"):
        with pytest.raises(UsageError):
            parse_timestamp(bad)


def test_human_ms_has_millis() -> None:
    ms = int(time.mktime((2024, 1, 2, 3, 4, 5, 0, 0, -1))) * 1000 + 42
    assert format_human_ms(ms) == "2024-01-02 03:04:05,042"


def test_consumer_progress_from_captured_body() -> None:
    stats = ConsumeStats.decode(body_bytes(1021))  # mqadmin consumerProgress answer, 4.9.7
    data, text = format_consumer_progress(stats)
    lines = text.splitlines()
    assert lines[0].split() == ["#Topic", "#Broker", "Name", "#QID", "#Broker", "Offset",
                                "#Consumer", "Offset", "#Diff", "#LastTime"]
    rows = [ln.split() for ln in lines[1:5]]
    assert [r[2] for r in rows] == ["0", "1", "2", "3"]  # sorted by queue id
    assert [r[5] for r in rows] == ["0", "0", "0", "1"]  # diffs: broker - consumer
    assert rows[0][6] == "N/A" and rows[1][6] != "N/A"
    assert data["diffTotal"] == 1 and lines[-1] == "Diff Total: 1"
    assert lines[-2] == "Consume TPS: 0.00"
    # The upstream column widths: topic 64, broker 32, qid 4.
    assert lines[1].index("broker-a") == 66 and lines[1].index("broker-a") + 34 == 100


def test_topic_status_rows_sorted_with_widths() -> None:
    t = TopicStatsTable({MessageQueue("T", "b", q): TopicOffset(0, q, 0) for q in (2, 0, 1)})
    rows, text = format_topic_status(t)
    assert [r["queueId"] for r in rows] == [0, 1, 2]
    first = text.splitlines()[1]
    assert first.startswith("b" + " " * 31 + "  0   ")


def test_cluster_list_columns() -> None:
    info = ClusterInfo({"broker-a": BrokerData("C1", "broker-a", {0: "127.0.0.1:10911"})},
                       {"C1": ["broker-a"]})
    kv = {"putTps": "12.5 3.0 ", "getTransferedTps": "", "brokerVersionDesc": "V4_9_8",
          "sendThreadPoolQueueSize": "0", "pullThreadPoolQueueSize": "1",
          "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "2",
          "pageCacheLockTimeMills": "0", "earliestMessageTimeStamp": str(1_000_000 - 3_600_000),
          "commitLogDiskRatio": "0.25"}
    rows, text = format_cluster_list(info, {"127.0.0.1:10911": kv}, now_ms=1_000_000)
    assert rows[0]["inTps"] == 12.5 and rows[0]["outTps"] == 0.0
    line = text.splitlines()[1]
    assert "   12.50(0,0ms)" in line and "    0.00(1,2ms)" in line
    assert line.rstrip().endswith("1.00 0.2500")
    header = text.splitlines()[0]
    assert header.startswith("#Cluster Name     #Broker Name")
    # Broker that did not answer: zeros, not a crash.
    _, text2 = format_cluster_list(info, {}, now_ms=0)
    assert "0.00()" in text2.replace(" ", "").replace(",ms", "")


def test_parser_upstream_flags() -> None:
    p = build_parser()
    a = p.parse_args(["updateTopic", "-n", "h:1", "-c", "C", "-t", "T", "-r", "4", "-w", "2",
                      "-p", "4", "-o", "true"])
    assert (a.clusterName, a.topic, a.readQueueNums, a.writeQueueNums, a.perm, a.order) == (
        "C", "T", 4, 2, 4, "true")
    a = p.parse_args(["updateTopic", "-n", "h:1", "-b", "h:2", "-t", "T"])
    assert (a.brokerAddr, a.readQueueNums, a.writeQueueNums, a.perm) == ("h:2", 8, 8, 6)
    a = p.parse_args(["resetOffsetByTime", "-n", "h:1", "-g", "G", "-t", "T", "-s", "now"])
    assert (a.group, a.topic, a.timestamp) == ("G", "T", "now")
    a = p.parse_args(["queryMsgByOffset", "-n", "h:1", "-t", "T", "-b", "b", "-i", "3", "-o", "7"])
    assert (a.brokerName, a.queueId, a.offset) == ("b", 3, 7)
    a = p.parse_args(["consumerProgress", "-n", "h:1", "--json"])
    assert a.groupName is None and a.json
    with pytest.raises(UsageError):
        p.parse_args(["updateTopic", "-n", "h:1", "-b", "x", "-c", "y", "-t", "T"])
    with pytest.raises(UsageError):
        p.parse_args(["topicStatus", "-n", "h:1"])


def test_main_usage_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topicRoute", "-n", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-t/--topic" in err and "Traceback" not in err
    assert main(["noSuchCommand"]) == 1  # MQAdminStartup: "The sub command ... not exist."
    assert capsys.readouterr().err == "The sub command noSuchCommand not exist.\n"


def test_describe_error() -> None:
    exc = MQBrokerError.for_code(ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[G] not online",
                                 "127.0.0.1:10911")
    assert describe_error(exc) == (
        "127.0.0.1:10911 answered CONSUMER_NOT_ONLINE (206): the consumer group[G] not online")
    missing = MQBrokerError.for_code(ResponseCode.TOPIC_NOT_EXIST,
                                     "topic 'X' not found on nameserver 127.0.0.1:9876")
    assert describe_error(missing) == "topic 'X' not found on nameserver 127.0.0.1:9876"
    assert describe_error(OffsetError()) == "OffsetError"


class OffsetError(Exception):
    pass


def test_java_to_string_formats() -> None:
    # TopicConfig.toString, PermName.perm2String, SubscriptionGroupConfig.toString (4.9.7).
    assert [perm_to_string(p) for p in (0, 1, 2, 4, 6, 7)] == [
        "---", "--X", "-W-", "R--", "RW-", "RWX"]
    assert format_topic_config(TopicConfig("T", 8, 4, 6, order=True)) == (
        "TopicConfig [topicName=T, readQueueNums=8, writeQueueNums=4, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=true]")
    assert format_subscription_group_config(SubscriptionGroupConfig("G")) == (
        "SubscriptionGroupConfig [groupName=G, consumeEnable=true, consumeFromMinEnable=true, "
        "consumeBroadcastEnable=true, retryQueueNums=1, retryMaxTimes=16, brokerId=0, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]")
    assert java_map_string({}) == "{}"
    assert java_map_string({"KEYS": "a b", "TAGS": "t"}) in ("{KEYS=a b, TAGS=t}",
                                                             "{TAGS=t, KEYS=a b}")
    assert format_message_tracks([]) == "\n\nWARN: No Consumer\n"
    assert format_message_tracks([MessageTrack("G", "NOT_ONLINE", "CODE:206 DESC:x")]) == (
        "\n\nMessageTrack [consumerGroup=G, trackType=NOT_ONLINE, exceptionDesc=CODE:206 DESC:x]\n")


def test_usage_without_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    # MQAdminStartup.printHelp, not argparse's "see 'mqadmin mqadmin -h'".
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("The most commonly used mqadmin commands are:\n")
    assert out.endswith("\nSee 'mqadmin help <command>' for more information on a specific "
                        "command.\n")
    assert "mqadmin mqadmin" not in out
