"""The mqadmin command registry and the added commands' pure parts (no sockets)."""

from __future__ import annotations

import json

from aiorocketmq.client.admin.cli import build_parser
from aiorocketmq.client.admin.commands import load
from aiorocketmq.client.admin.commands.export import java_properties_order, pretty_json
from aiorocketmq.client.admin.commands.formatting import java_hash_order, java_int, queue_hash
from aiorocketmq.client.admin.commands.producer import format_producer_table
from aiorocketmq.client.admin.commands.stats import compute_24hour_sum
from aiorocketmq.client.admin.commands.topic import allocate_mq_json
from aiorocketmq.protocol.bodies import BrokerStatsData, BrokerStatsItem, QueueData, TopicRouteData
from aiorocketmq.protocol.javautil import java_hashmap_order, java_string_hash

ADDED = ("topicClusterList", "printMsgByQueue", "sendMsgStatus", "producerConnection", "producer",
         "allocateMQ", "checkMsgSendRT", "clusterRT", "getConsumerConfig", "statsAll",
         "exportMetadata", "exportConfigs")


def test_registry_has_the_added_commands() -> None:
    registry = load()
    for name in ADDED:
        assert name in registry, name
    # Every registered name builds a parser; aliases share their command.
    parser = build_parser()
    a = parser.parse_args(["printMsgByQueue", "-n", "h:1", "-t", "T", "-a", "b", "-i", "3",
                           "-p", "true"])
    assert (a.topic, a.brokerName, a.queueId, a.printMsg) == ("T", "b", 3, "true")
    a = parser.parse_args(["clusterRT", "-n", "h:1"])
    assert (a.amount, a.size, a.interval, a.rounds) == (100, 128, 10, 0)
    assert registry["deleteAccessConfig"] is registry["deleteAclConfig"]


def test_java_hash_order_matches_strings() -> None:
    keys = [f"key-{i}" for i in range(40)]
    assert java_hash_order(keys, java_string_hash) == java_hashmap_order(keys)
    assert java_int(2**31) == -(2**31) and java_int(-1) == -1
    # MessageQueue("T", "b", 0).hashCode() in Java: 31*(31*(31+98)+0)+84.
    assert queue_hash("T", "b", 0) == 31 * (31 * (31 + 98)) + 84


def test_allocate_mq_json() -> None:
    route = TopicRouteData(queue_datas=[QueueData("broker-a", 4, 4, 6, 0)])
    data, text = allocate_mq_json("TT", route, ["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    # What the stock tool printed for this route (tests/interop/test_stock_mqadmin_added.py).
    assert text == ('{"result":{"10.0.0.3":[{"brokerName":"broker-a","queueId":0,"topic":"TT"}],'
                    '"10.0.0.2":[{"brokerName":"broker-a","queueId":3,"topic":"TT"}],'
                    '"10.0.0.1":[{"brokerName":"broker-a","queueId":2,"topic":"TT"},'
                    '{"brokerName":"broker-a","queueId":1,"topic":"TT"}]}}\n')
    assert json.loads(text) == data


def test_producer_table_lines() -> None:
    table = {"PG": [{"clientId": "c1", "remoteIP": "/127.0.0.1:5", "language": "JAVA",
                     "version": 409, "lastUpdateTimestamp": 7}], "EMPTY": []}
    text = format_producer_table(table)
    assert "producer group (PG) instance : clientId=c1,remoteIP=/127.0.0.1:5, language=JAVA, " \
           "version=409, lastUpdateTimestamp=7\n" in text
    assert "producer group (EMPTY) instances are empty\n" in text


def test_stats_24_hour_sum() -> None:
    assert compute_24hour_sum(BrokerStatsData(BrokerStatsItem(3), BrokerStatsItem(0),
                                              BrokerStatsItem(0))) == 3
    assert compute_24hour_sum(BrokerStatsData(BrokerStatsItem(3), BrokerStatsItem(5),
                                              BrokerStatsItem(9))) == 9


def test_export_layout() -> None:
    assert pretty_json({"a": {"b": 1}}) == '{\n\t"a":{\n\t\t"b":1\n\t}\n}'
    keys = ["brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
            "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
            "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
            "autoCreateTopicEnable", "autoCreateSubscriptionGroup"]
    # The order stock's exportConfigs (Java 17) wrote them in (a HashMap's differs).
    assert java_properties_order(keys) == [
        "brokerId", "traceOn", "flushDiskType", "msgTraceTopicName", "traceTopicEnable",
        "messageDelayLevel", "autoCreateTopicEnable", "brokerRole", "slaveReadEnable",
        "fileReservedTime", "brokerClusterName", "brokerName", "filterServerNums",
        "maxMessageSize", "useTLS", "autoCreateSubscriptionGroup"]
    assert java_hashmap_order(keys) != java_properties_order(keys)
