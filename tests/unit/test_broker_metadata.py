"""Broker metadata without sockets: BrokerConfig keys, system topics, auto-create, persistence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorocketmq.protocol.bodies import RegisterBrokerBody
from aiorocketmq.server.broker.config import BrokerConfig, load_broker_configs
from aiorocketmq.server.broker.consumer_offset import ConsumerOffsetManager
from aiorocketmq.server.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.server.broker.topic_config import TopicConfigManager, validate_topic
from tests.vectors import body_bytes


def test_broker_config_reads_upstream_keys_and_renders_them() -> None:
    cfg, store = load_broker_configs({
        "brokerName": "b1", "brokerIP1": "10.0.0.1", "listenPort": "10911",
        "autoCreateTopicEnable": "FALSE", "shortPollingTimeMills": "250",
        "registerNameServerPeriod": "5000", "namesrvAddr": "a:1; b:2",
        "flushDiskType": "SYNC_FLUSH", "maxMessageSize": "1024", "unknownKey": "x"})
    assert (cfg.broker_name, cfg.broker_addr, cfg.ha_server_addr) == ("b1", "10.0.0.1:10911",
                                                                      "127.0.0.1:10912")
    assert not cfg.auto_create_topic_enable and cfg.short_polling_time_ms == 250
    assert cfg.register_period_ms == 10000  # clamped to 10..60 s
    assert cfg.namesrv_addr_list == ["a:1", "b:2"]
    assert store.is_sync_flush and store.max_message_size == 1024
    text = cfg.to_properties(store)
    assert "brokerIP1=10.0.0.1\n" in text and "autoCreateTopicEnable=false\n" in text
    assert "shortPollingTimeMills=250\n" in text and "flushDiskType=SYNC_FLUSH\n" in text
    again = BrokerConfig.from_properties(dict(line.split("=", 1) for line in text.splitlines()))
    assert again == cfg
    with pytest.raises(ValueError):
        BrokerConfig.from_properties({"listenPort": "ten"})


def test_system_topics_match_a_fresh_4_9_7_broker(tmp_path: Path) -> None:
    captured = RegisterBrokerBody.decode(body_bytes(0)).topic_config_serialize_wrapper
    mgr = TopicConfigManager(BrokerConfig(broker_name="broker-a"), tmp_path)
    ours = mgr.build_serialize_wrapper().topic_config_table
    assert set(ours) == set(captured.topic_config_table)
    for name, tc in captured.topic_config_table.items():
        assert ours[name] == tc, name
    no_auto = TopicConfigManager(BrokerConfig(broker_name="b", auto_create_topic_enable=False), tmp_path)
    assert no_auto.select("TBW102") is None
    assert mgr.is_system_topic("broker-a") and mgr.is_system_topic("rmq_sys_x")
    assert not mgr.is_system_topic("Plain")


def test_auto_create_and_persistence(tmp_path: Path) -> None:
    created: list[str] = []
    mgr = TopicConfigManager(BrokerConfig(broker_name="broker-a"), tmp_path)
    mgr.on_topic_created = lambda: created.append("x")
    counter = mgr.data_version.counter
    tc = mgr.create_topic_in_send_message_method("New", "TBW102", "1.2.3.4:5", 16, 0)
    assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (8, 8, 6)
    assert mgr.create_topic_in_send_message_method("Other", "NoSuch", "h", 4, 0) is None
    assert mgr.create_topic_in_send_message_method("Other", "New", "h", 4, 0) is None  # no INHERIT
    retry = mgr.create_topic_in_send_message_back_method("%RETRY%G", 1, 6, 0)
    assert retry.write_queue_nums == 1
    assert created == ["x", "x"] and mgr.data_version.counter == counter + 2
    mgr.persist_sync()
    doc = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert set(doc) == {"dataVersion", "topicConfigTable"}
    loaded = TopicConfigManager(BrokerConfig(broker_name="broker-a"), tmp_path)
    assert loaded.load()
    assert loaded.select("New") == tc and loaded.data_version == mgr.data_version
    # A corrupt file falls back to the .bak written by the previous persist.
    mgr.delete_topic_config("New")
    mgr.persist_sync()
    (tmp_path / "config" / "topics.json").write_text("{not json")
    fallback = TopicConfigManager(BrokerConfig(broker_name="broker-a"), tmp_path)
    assert fallback.load() and fallback.select("New") == tc


def test_validate_topic_remarks() -> None:
    assert validate_topic("Ok_topic-1%|") is None
    assert validate_topic("") == "The specified topic is blank."
    assert validate_topic("a b") is not None and "illegal characters" in validate_topic("a b")  # type: ignore[operator]
    assert validate_topic("x" * 128) == "The specified topic is longer than topic max length."


def test_subscription_groups_and_offsets_round_trip(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(tmp_path)
    cfg = groups.find("CG")
    assert cfg is not None and (cfg.retry_queue_nums, cfg.retry_max_times) == (1, 16)
    assert groups.get("TOOLS_CONSUMER") is not None
    strict = SubscriptionGroupManager(tmp_path, auto_create=False)
    assert strict.find("Unknown") is None and strict.find("CID_RMQ_SYS_TRANS") is not None
    groups.persist_sync()
    again = SubscriptionGroupManager(tmp_path, auto_create=False)
    assert again.load() and again.get("CG") == cfg

    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("h", "G", "T", 0, 5)
    offsets.commit_offset("h", "G", "T", 3, 9)
    offsets.commit_offset("h", "G2", "T", 0, 1)
    assert offsets.query_offset("G", "T", 3) == 9 and offsets.query_offset("G", "T", 1) == -1
    assert offsets.which_group_by_topic("T") == {"G", "G2"}
    offsets.persist_sync()
    assert b'"T@G":{0:5,3:9}' in (tmp_path / "config" / "consumerOffset.json").read_bytes()
    loaded = ConsumerOffsetManager(tmp_path)
    assert loaded.load() and loaded.offset_table == offsets.offset_table
    loaded.remove_offset("G")
    assert loaded.which_topic_by_consumer("G") == set()
