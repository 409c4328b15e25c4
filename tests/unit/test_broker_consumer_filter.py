"""ConsumerFilterManager and ExpressionMessageFilter without sockets (upstream 4.9.7 rules)."""

from __future__ import annotations

import json
from pathlib import Path

from aiorocketmq.protocol.bodies import SubscriptionData, build_subscription_data
from aiorocketmq.protocol.codes import MessageSysFlag
from aiorocketmq.protocol.message import (
    decode_message,
    encode_properties,
    encode_stored_record,
    socket_address_to_bytes,
)
from aiorocketmq.server.broker.filter import (
    ConsumerFilterManager,
    ExpressionMessageFilter,
    record_properties,
)
from aiorocketmq.server.broker.filter.consumer_filter import FILTER_DATA_CLEAN_TIME_SPAN_MS


def sql(topic: str, expression: str, version: int) -> SubscriptionData:
    return SubscriptionData(topic, expression, sub_version=version, expression_type="SQL92")


def manager(tmp_path: Path) -> ConsumerFilterManager:
    m = ConsumerFilterManager(tmp_path)
    m.mark_dirty = lambda: None  # type: ignore[method-assign]  # no loop needed here
    return m


def test_register_versions_and_death(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.register_group("G", [sql("T", "a > 1", 10), build_subscription_data("U", "TagA")])
    data = m.get("T", "G")
    assert data is not None and data.client_version == 10 and not data.is_dead
    assert m.get("U", "G") is None  # TAG subscriptions have no filter data
    compiled = data.compiled
    # same expression, newer version: the compiled expression is kept, the version moves
    assert m.register("T", "G", "a > 1", "SQL92", 11)
    assert m.get("T", "G") is data and data.client_version == 11 and data.compiled is compiled
    # older version: ignored
    assert not m.register("T", "G", "a > 2", "SQL92", 5)
    assert m.get("T", "G") is data
    # changed expression: rebuilt
    assert m.register("T", "G", "a > 2", "SQL92", 12)
    rebuilt = m.get("T", "G")
    assert rebuilt is not None and rebuilt is not data and rebuilt.expression == "a > 2"
    # a topic left out of the heartbeat dies; the same version heard again revives it
    m.register_group("G", [])
    assert rebuilt.is_dead
    assert m.register("T", "G", "a > 2", "SQL92", 12)
    assert not rebuilt.is_dead
    m.unregister("G")
    assert rebuilt.is_dead
    # a newer expression that does not compile removes the entry
    assert not m.register("T", "G", "a >", "SQL92", 13)
    assert m.get("T", "G") is None


def test_persisted_as_upstream_and_loaded_dead(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.register_group("G", [sql("T", "a > 1", 10)])
    m.persist_sync()
    data = json.loads((tmp_path / "config" / "consumerFilter.json").read_text())
    entry = data["filterDataByTopic"]["T"]["groupFilterData"]["G"]
    assert sorted(entry) == ["bornTime", "clientVersion", "consumerGroup", "dead", "deadTime",
                             "expression", "expressionType", "topic"]
    assert (entry["dead"], entry["deadTime"]) == (False, 0)
    loaded = manager(tmp_path)
    assert loaded.load()
    got = loaded.get("T", "G")
    assert got is not None and got.is_dead and got.compiled is not None
    assert got.compiled.matches({"a": "2"})


def test_clean_drops_long_dead(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.register_group("G", [sql("T", "a > 1", 10)])
    m.unregister("G")
    data = m.get("T", "G")
    assert data is not None
    m.clean(data.dead_time + FILTER_DATA_CLEAN_TIME_SPAN_MS - 1)
    assert m.get("T", "G") is data
    m.clean(data.dead_time + FILTER_DATA_CLEAN_TIME_SPAN_MS)
    assert m.get("T", "G") is None and m.table == {}


def _record(topic: str, props: dict[str, str], *, v6: bool = False) -> bytearray:
    host = socket_address_to_bytes("[::1]:1" if v6 else "127.0.0.1:1")
    return encode_stored_record(
        topic=topic, queue_id=0, flag=0, queue_offset=0, physical_offset=0,
        sys_flag=(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
        if v6 else 0, born_timestamp=0, born_host=host, store_timestamp=0, store_host=host,
        reconsume_times=0, prepared_transaction_offset=0, body=b"body",
        properties=encode_properties(props))


def test_record_properties_of_stored_records() -> None:
    props = {"a": "1", "TAGS": "x", "u": "\u00e9t\u00e9"}
    for topic in ("T", "T" * 127):
        for v6 in (False, True):
            record = _record(topic, props, v6=v6)
            assert record_properties(memoryview(record)) == props == decode_message(record)[0].properties
    assert record_properties(_record("T", {})) == {}


def test_expression_message_filter(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.register_group("G", [sql("T", "a > 1", 10)])
    mf = ExpressionMessageFilter(sql("T", "a > 1", 10), m.get("T", "G"), m)
    assert mf.needs_properties and mf.code_set is None
    assert mf.is_matched_by_consume_queue(12345)
    assert mf.is_matched_by_commit_log({"a": "2"}) and not mf.is_matched_by_commit_log({"a": "x"})
    tag = ExpressionMessageFilter(build_subscription_data("T", "TagA"))
    assert not tag.needs_properties and tag.code_set is not None
    assert tag.is_matched_by_consume_queue(None)
    # retry topics judged by the original topic's filter (filterSupportRetry)
    retry = ExpressionMessageFilter(build_subscription_data("%RETRY%G", "*"), None, m,
                                    support_retry=True)
    assert retry.needs_properties
    assert retry.is_matched_by_commit_log({"RETRY_TOPIC": "T", "a": "5"})
    assert not retry.is_matched_by_commit_log({"RETRY_TOPIC": "T", "a": "0"})
    assert retry.is_matched_by_commit_log({"RETRY_TOPIC": "Other", "a": "0"})
