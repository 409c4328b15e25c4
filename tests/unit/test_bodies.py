"""protocol.bodies: field names, Java defaults, and byte-identity with the captured 4.9.7 bodies."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol import bodies
from aiorocketmq.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    Connection,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerData,
    ConsumerListBody,
    ConsumerOffsetSerializeWrapper,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    DataVersion,
    GetConsumerStatusBody,
    GroupList,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    OffsetWrapper,
    ProducerData,
    QueryConsumeTimeSpanBody,
    QueueData,
    QueueTimeSpan,
    RegisterBrokerBody,
    ResetOffsetBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
    UnlockBatchRequestBody,
    build_subscription_data,
    properties_to_string,
    string_to_properties,
)
from aiorocketmq.protocol.codes import LanguageCode
from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.protocol.fastjson import ObjectKey, dumps, loads
from tests.vectors import body_bytes, frame, frames_where, vector_file

# (request code name, is_response) -> body class, for every JSON body in the vectors.
BODY_CLASS: dict[tuple[str, bool], type[Any]] = {
    ("GET_ALL_TOPIC_LIST_FROM_NAMESERVER", True): TopicList,
    ("GET_BROKER_CLUSTER_INFO", True): ClusterInfo,
    ("GET_BROKER_RUNTIME_INFO", True): KVTable,
    ("GET_CONSUMER_CONNECTION_LIST", True): ConsumerConnection,
    ("GET_CONSUMER_LIST_BY_GROUP", True): ConsumerListBody,
    ("GET_CONSUMER_RUNNING_INFO", True): ConsumerRunningInfo,
    ("GET_CONSUME_STATS", True): ConsumeStats,
    ("GET_ROUTEINFO_BY_TOPIC", True): TopicRouteData,
    ("GET_TOPIC_STATS_INFO", True): TopicStatsTable,
    ("HEART_BEAT", False): HeartbeatData,
    ("LOCK_BATCH_MQ", False): LockBatchRequestBody,
    ("LOCK_BATCH_MQ", True): LockBatchResponseBody,
    ("QUERY_TOPIC_CONSUME_BY_WHO", True): GroupList,
    ("REGISTER_BROKER", False): RegisterBrokerBody,
    ("UNLOCK_BATCH_MQ", False): UnlockBatchRequestBody,
    ("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", False): SubscriptionGroupConfig,
}


def _body_class(rec: dict[str, Any]) -> type[Any]:
    name = rec["request_code_name"] if rec["is_response"] else rec["code_name"]
    return BODY_CLASS[(name, rec["is_response"])]


# -- byte identity with fastjson's output (the frames docs/PROTOCOL.md names) --------------


@pytest.mark.parametrize(
    ("frame_id", "cls", "standard"),
    [
        (1339, TopicRouteData, False),
        (1341, TopicRouteData, True),
        (991, ClusterInfo, False),
        (0, RegisterBrokerBody, False),
        (350, HeartbeatData, False),
        (1021, ConsumeStats, False),
        (1077, TopicStatsTable, False),
        (1171, ConsumerConnection, False),
        (1190, ConsumerRunningInfo, False),
    ],
)
def test_named_frames_reencode_byte_identical(frame_id: int, cls: type[Any], standard: bool) -> None:
    body = body_bytes(frame_id)
    assert cls.decode(body).encode(standard=standard) == body


@pytest.mark.parametrize(
    "rec", frames_where(body_format="json-text"), ids=lambda f: f"frame{f['id']}"
)
def test_every_captured_json_body_decodes_and_reencodes(rec: dict[str, Any]) -> None:
    body = bytes.fromhex(rec["body_hex"])
    cls = _body_class(rec)
    obj = cls.decode(body)
    assert cls.from_json(obj.to_json()) == obj
    assert obj.encode(standard=rec["body_is_standard_json"] and cls is TopicRouteData) == body


def test_route_legacy_and_standard_decode_alike() -> None:
    legacy = TopicRouteData.decode(vector_file("route_data.json"))
    standard = TopicRouteData.decode(vector_file("route_data_standard.json"))
    assert legacy == standard
    assert legacy.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert legacy.broker_datas[0].select_broker_addr() == "127.0.0.1:10911"
    assert legacy.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    assert legacy.order_topic_conf is None and legacy.filter_server_table == {}
    assert legacy.encode() == vector_file("route_data.json").strip()
    assert legacy.encode(standard=True) == vector_file("route_data_standard.json").strip()


def test_standard_route_sorts_broker_ids_numerically() -> None:
    bd = BrokerData("c", "b", {10: "h:10", 2: "h:2", 0: "h:0"})
    route = TopicRouteData(queue_datas=[], broker_datas=[bd])
    assert b'"brokerAddrs":{"0":"h:0","2":"h:2","10":"h:10"}' in route.encode(standard=True)
    assert b'"brokerAddrs":{10:"h:10",2:"h:2",0:"h:0"}' in route.encode()


def test_queue_data_reads_the_old_topic_syn_flag_name() -> None:
    qd = QueueData.from_json({"brokerName": "b", "perm": 6, "topicSynFlag": 3})
    assert qd.topic_sys_flag == 3
    assert qd.to_json() == {
        "brokerName": "b", "perm": 6, "readQueueNums": 0, "topicSysFlag": 3, "writeQueueNums": 0,
    }


def test_register_body_crc_matches_the_header() -> None:
    rec = frame(0)
    body = RegisterBrokerBody.decode(body_bytes(0)).encode()
    assert zlib.crc32(body) & 0x7FFFFFFF == int(rec["header"]["extFields"]["bodyCrc32"])


def test_register_body_contents() -> None:
    body = RegisterBrokerBody.decode(vector_file("register_broker_body.txt"))
    wrapper = body.topic_config_serialize_wrapper
    assert list(wrapper.topic_config_table)[:2] == ["SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC"]
    assert wrapper.topic_config_table["TBW102"] == TopicConfig("TBW102", 8, 8, 7)
    assert wrapper.data_version == DataVersion(1795318946073, 0)
    assert body.filter_server_list == []


def test_heartbeat_frame_350_fields() -> None:
    hb = HeartbeatData.decode(vector_file("heartbeat_body.json"))
    assert hb.client_id == "192.0.2.2@vec-VecPropsConsumer"
    assert hb.producer_data_set == [ProducerData("CLIENT_INNER_PRODUCER")]
    (cd,) = hb.consumer_data_set
    assert (cd.group_name, cd.consume_type, cd.message_model, cd.unit_mode) == (
        "VecPropsConsumer", "CONSUME_PASSIVELY", "CLUSTERING", False,
    )
    sub = next(s for s in cd.subscription_data_set if s.topic == "VecPropsTopic")
    built = build_subscription_data("VecPropsTopic", "TagA || TagB")
    assert (sub.tags_set, sub.code_set) == (built.tags_set, built.code_set)
    assert sub.code_set == [2598919, 2598920]


def test_consume_stats_and_topic_stats_are_keyed_by_message_queue() -> None:
    stats = ConsumeStats.decode(body_bytes(1021))
    mq1 = MessageQueue("VecPropsTopic", "broker-a", 1)
    assert stats.offset_table[mq1] == OffsetWrapper(1, 1, 1795318960733)
    assert stats.consume_tps == 0.0
    assert stats.compute_total_diff() == 1
    table = TopicStatsTable.decode(body_bytes(1077))
    assert table.offset_table[MessageQueue("VecPropsTopic", "broker-a", 3)] == TopicOffset(0, 1, 1795319040492)


def test_consume_stats_list_writes_the_plain_map_form_and_reads_it_back() -> None:
    # No captured GET_BROKER_CONSUME_STATS answer: the field names and order are
    # ConsumeStatsList.java's, each group's ConsumeStats is frame 1021's shape.
    stats = ConsumeStats.decode(body_bytes(1021))
    body = ConsumeStatsList(broker_addr="127.0.0.1:10911",
                            consume_stats_list=[{"G1": [stats]}, {"G2": []}],
                            total_diff=stats.compute_total_diff())
    plain = {"brokerAddr": "127.0.0.1:10911",
             "consumeStatsList": [{"G1": [stats.to_json()]}, {"G2": []}],
             "totalDiff": 1}
    assert body.encode() == dumps(plain)
    assert body.encode().startswith(b'{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"G1":')
    assert ConsumeStatsList.decode(body.encode()) == body
    assert ConsumeStatsList.decode(b"{}") == ConsumeStatsList()


def test_consumer_running_info_frame_1190() -> None:
    info = ConsumerRunningInfo.decode(body_bytes(1190))
    assert info.properties[ConsumerRunningInfo.PROP_CLIENT_VERSION] == "V4_9_7"
    pq = info.mq_table[MessageQueue("TestTopic", "broker-a", 0)]
    assert pq.commit_offset == 11 and pq.locked and not pq.dropped
    assert info.status_table["TestTopic"].consume_rt == 0.025
    assert info.status_table["TestTopic"].pull_rt == 9.75
    assert info.jstack is None


def test_consumer_connection_frame_1171() -> None:
    cc = ConsumerConnection.decode(body_bytes(1171))
    assert cc.connection_set == [
        Connection("192.0.2.2@vec-VecIdleConsumer", "127.0.0.1:39306", LanguageCode.JAVA, 407)
    ]
    assert set(cc.subscription_table) == {"TestTopic", "%RETRY%VecIdleConsumer"}


# -- MessageQueue ------------------------------------------------------------------------


def test_message_queue_order_hash_and_keys() -> None:
    a = MessageQueue("T", "b", 1)
    assert sorted([MessageQueue("U", "a", 0), MessageQueue("T", "b", 2), a, MessageQueue("T", "a", 9)]) == [
        MessageQueue("T", "a", 9), a, MessageQueue("T", "b", 2), MessageQueue("U", "a", 0),
    ]
    assert {a: 1}[MessageQueue("T", "b", 1)] == 1
    key = a.to_object_key()
    assert key == ObjectKey({"topic": "T", "brokerName": "b", "queueId": 1})
    assert MessageQueue.from_json(key) == a
    assert MessageQueue.decode(a.encode()) == a
    assert a.encode() == b'{"brokerName":"b","queueId":1,"topic":"T"}'
    with pytest.raises(AttributeError):
        a.queue_id = 2  # type: ignore[misc]


def test_lock_bodies() -> None:
    mq = MessageQueue("T", "b", 0)
    req = LockBatchRequestBody("G", "cid", [mq])
    assert req.encode() == b'{"clientId":"cid","consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}'
    assert UnlockBatchRequestBody.decode(req.encode()) == UnlockBatchRequestBody("G", "cid", [mq])
    resp = LockBatchResponseBody([mq])
    assert resp.encode() == b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}'


# -- DataVersion, TopicConfig, RegisterBrokerBody ------------------------------------------


def test_data_version_next_version() -> None:
    dv = DataVersion(100, 7)
    dv.next_version(now_ms=200)
    assert dv == DataVersion(200, 8)
    assert dv.encode() == b'{"counter":8,"timestamp":200}'
    other = DataVersion(1, 1)
    other.assign_new_one(dv)
    assert other == dv
    fresh = DataVersion()
    fresh.next_version()
    assert fresh.counter == 1 and fresh.timestamp > 0


def test_topic_config_defaults_and_compact_form() -> None:
    tc = TopicConfig("T")
    assert tc.encode() == (
        b'{"order":false,"perm":6,"readQueueNums":16,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"T","topicSysFlag":0,"writeQueueNums":16}'
    )
    assert tc.encode_compact() == "T 16 16 6 SINGLE_TAG"
    assert TopicConfig.decode_compact("T 4 8 7 MULTI_TAG") == TopicConfig("T", 4, 8, 7, "MULTI_TAG")
    for bad in ("T 4 8 7", "T x 8 7 SINGLE_TAG", "", "a b c d e f"):
        with pytest.raises(ProtocolError):
            TopicConfig.decode_compact(bad)


def test_compressed_register_body_round_trip() -> None:
    body = RegisterBrokerBody.decode(vector_file("register_broker_body.txt"))
    packed = body.encode(compressed=True)
    assert packed[:1] == b"\x78"  # a zlib stream
    back = RegisterBrokerBody.decode(packed, compressed=True)
    assert back == body  # the captured topics all have topicSysFlag 0, order false
    raw = zlib.decompress(packed)
    dv_len = int.from_bytes(raw[:4], "big")
    assert raw[4 : 4 + dv_len] == b'{"counter":0,"timestamp":1795318946073}'
    assert int.from_bytes(raw[4 + dv_len : 8 + dv_len], "big") == 8


def test_compressed_register_body_drops_what_the_compact_form_lacks() -> None:
    wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", 2, 2, 6, topic_sys_flag=1, order=True)})
    back = RegisterBrokerBody.decode(RegisterBrokerBody(wrapper, ["f:1"]).encode(compressed=True), compressed=True)
    assert back.topic_config_serialize_wrapper.topic_config_table["T"] == TopicConfig("T", 2, 2, 6)
    assert back.filter_server_list == ["f:1"]


@pytest.mark.parametrize(
    "payload",
    [
        b"not zlib",
        zlib.compress(b"\x00\x00"),
        zlib.compress(b"\x00\x00\x00\x05{}"),
        zlib.compress(b"\xff\xff\xff\xff"),
        zlib.compress(b"\x00\x00\x00\x02{}\x00\x00\x00\x01\x00\x00\x00\x03a b"),
    ],
)
def test_malformed_compressed_register_body(payload: bytes) -> None:
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode(payload, compressed=True)


def test_compressed_register_body_inflation_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies, "_MAX_INFLATED", 1024)
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode(zlib.compress(b"\x00" * 4096), compressed=True)


# -- subscriptions -------------------------------------------------------------------------


@pytest.mark.parametrize("sub", [None, "", "*"])
def test_subscribe_all(sub: str | None) -> None:
    sd = build_subscription_data("T", sub)
    assert (sd.sub_string, sd.tags_set, sd.code_set, sd.expression_type) == ("*", [], [], "TAG")


def test_tag_expression_parsing() -> None:
    sd = build_subscription_data("T", " TagA ||TagB|| ||TagA||\tTagC\x01 ")
    assert sd.sub_string == " TagA ||TagB|| ||TagA||\tTagC\x01 "
    assert sd.tags_set == ["TagA", "TagB", "TagC"]
    assert sd.code_set == [2598919, 2598920, 2598921]
    assert build_subscription_data("T", "||").tags_set == []


def test_sql92_expression_is_kept_verbatim() -> None:
    sd = build_subscription_data("T", "a > 1", "SQL92")
    assert (sd.sub_string, sd.expression_type, sd.tags_set) == ("a > 1", "SQL92", [])
    with pytest.raises(ValueError):
        build_subscription_data("T", "", "SQL92")


def test_subscription_data_wire_form() -> None:
    sd = SubscriptionData("T", "TagA", ["TagA"], [2598919], 1700000000000)
    assert sd.encode() == (
        b'{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
        b'"subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}'
    )


# -- defaults, tolerance and errors ---------------------------------------------------------


def test_subscription_group_config_defaults() -> None:
    cfg = SubscriptionGroupConfig.from_json({"groupName": "G"})
    assert cfg == SubscriptionGroupConfig("G")
    assert cfg.encode() == (
        b'{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
        b'"consumeFromMinEnable":true,"groupName":"G","notifyConsumerIdsChangedEnable":true,'
        b'"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}'
    )


def test_unknown_keys_ignored_and_numbers_as_strings_accepted() -> None:
    qd = QueueData.from_json({"brokerName": "b", "readQueueNums": "8", "perm": 6, "future": {"x": 1}})
    assert qd == QueueData("b", 8, 0, 6, 0)
    bd = BrokerData.from_json({"brokerName": "b", "brokerAddrs": {"1": "s", 0: "m"}, "zoneName": "z"})
    assert bd.broker_addrs == {1: "s", 0: "m"}
    tc = TopicConfig.from_json({"topicName": "T", "order": "TRUE", "perm": None})
    assert tc.order is True and tc.perm == 6


def test_language_by_name() -> None:
    c = Connection.from_json({"clientId": "c", "language": "CPP", "version": 1})
    assert c.language is LanguageCode.CPP
    assert c.to_json()["language"] == "CPP"
    assert Connection.from_json({"language": "COBOL"}).language is LanguageCode.OTHER


def test_select_broker_addr_without_master() -> None:
    assert BrokerData("c", "b", {1: "s1"}).select_broker_addr() == "s1"
    assert BrokerData("c", "b", {}).select_broker_addr() is None


@pytest.mark.parametrize(
    ("cls", "body"),
    [
        (TopicRouteData, b'{"queueDatas":{}}'),
        (TopicRouteData, b'{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}'),
        (QueueData, b'{"perm":"rw"}'),
        (HeartbeatData, b'{"clientID":{}}'),
        (HeartbeatData, b"[]"),
        (ConsumeStats, b'{"offsetTable":{1:{}}}'),
        (ConsumeStats, b'{"consumeTps":true}'),
        (TopicConfig, b'{"order":2.5}'),
        (KVTable, b"{"),
    ],
)
def test_wrong_shapes_raise_protocol_error(cls: type[Any], body: bytes) -> None:
    with pytest.raises(ProtocolError):
        cls.decode(body)


@settings(max_examples=300)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=20), c, max_size=4),
        max_leaves=12,
    ),
    st.sampled_from(sorted({c.__name__: c for c in BODY_CLASS.values()}.items())),
)
def test_from_json_on_arbitrary_values_raises_only_protocol_error(obj: Any, named: tuple[str, type[Any]]) -> None:
    try:
        named[1].from_json(obj)
    except ProtocolError:
        pass


# -- other admin bodies ----------------------------------------------------------------------


def test_reset_offset_body_both_forms() -> None:
    mq = MessageQueue("T", "b", 0)
    body = ResetOffsetBody({mq: 123})
    assert body.encode() == b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:123}}'
    assert body.encode_for_c() == b'{"offsetTable":[{"brokerName":"b","offset":123,"queueId":0,"topic":"T"}]}'
    assert ResetOffsetBody.decode(body.encode()) == body
    assert ResetOffsetBody.decode(body.encode_for_c()) == body
    assert ResetOffsetBody.decode(body.encode(standard=True)) == body


def test_consumer_offset_wrapper_has_bare_int_keys() -> None:
    w = ConsumerOffsetSerializeWrapper({"T@G": {0: 5, 1: 7}})
    assert w.encode() == b'{"offsetTable":{"T@G":{0:5,1:7}}}'
    assert ConsumerOffsetSerializeWrapper.decode(w.encode()) == w


def test_consume_message_directly_result_wire_form() -> None:
    r = ConsumeMessageDirectlyResult(consume_result="CR_SUCCESS", remark="ok", spent_time_mills=3)
    assert r.encode() == b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"ok","spentTimeMills":3}'


def test_get_consumer_status_body_round_trip() -> None:
    mq = MessageQueue("T", "b", 0)
    body = GetConsumerStatusBody({mq: 1}, {"cid": {mq: 2}})
    assert GetConsumerStatusBody.decode(body.encode()) == body
    assert GetConsumerStatusBody.decode(body.encode(standard=True)) == body


def test_queue_time_span_writes_the_derived_date_strings() -> None:
    span = QueueTimeSpan(MessageQueue("T", "b", 0), 1, 2, 3, 4)
    obj = json.loads(QueryConsumeTimeSpanBody([span]).encode(standard=True))
    keys = list(obj["consumeTimeSpanSet"][0])
    assert keys == sorted(keys)
    assert {"minTimeStampStr", "maxTimeStampStr", "consumeTimeStampStr"} <= set(keys)
    assert QueryConsumeTimeSpanBody.decode(QueryConsumeTimeSpanBody([span]).encode()).consume_time_span_set == [span]


def test_cluster_info_helpers() -> None:
    info = ClusterInfo.decode(body_bytes(991))
    assert info.retrieve_all_cluster_names() == ["DefaultCluster"]
    assert info.retrieve_all_addr_by_cluster("DefaultCluster") == ["127.0.0.1:10911"]
    assert info.retrieve_all_addr_by_cluster("nope") == []


# -- hypothesis round trips for bodies --------------------------------------------------------

_names = st.text(min_size=1, max_size=8)
_longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_mqs = st.builds(MessageQueue, _names, _names, st.integers(0, 1023))

_routes = st.builds(
    TopicRouteData,
    st.none() | _names,
    st.lists(st.builds(QueueData, _names, st.integers(0, 64), st.integers(0, 64), st.integers(0, 7), st.integers(0, 3)), max_size=3),
    st.lists(st.builds(BrokerData, _names, _names, st.dictionaries(st.integers(0, 20), _names, max_size=3)), max_size=3),
    st.dictionaries(_names, st.lists(_names, max_size=2), max_size=2),
)
_consume_stats = st.builds(
    ConsumeStats,
    st.dictionaries(_mqs, st.builds(OffsetWrapper, _longs, _longs, _longs), max_size=4),
    st.floats(allow_nan=False, allow_infinity=False),
)
_heartbeats = st.builds(
    HeartbeatData,
    _names,
    st.lists(st.builds(ProducerData, _names), max_size=2),
    st.lists(
        st.builds(
            ConsumerData,
            _names,
            st.sampled_from(["CONSUME_PASSIVELY", "CONSUME_ACTIVELY"]),
            st.sampled_from(["CLUSTERING", "BROADCASTING"]),
            st.none() | st.just("CONSUME_FROM_LAST_OFFSET"),
            st.lists(st.builds(build_subscription_data, _names, st.text(max_size=20)), max_size=3),
            st.booleans(),
        ),
        max_size=2,
    ),
)


@settings(max_examples=150)
@given(st.one_of(_routes, _consume_stats, _heartbeats), st.booleans())
def test_body_round_trip(body: Any, standard: bool) -> None:
    cls = type(body)
    assert cls.decode(body.encode(standard=standard)) == body
    assert cls.from_json(body.to_json()) == body
    if standard:
        json.loads(body.encode(standard=True))


@settings(max_examples=100)
@given(
    st.dictionaries(
        _names.filter(lambda s: s.isprintable()).map(lambda s: "T" + s.replace(" ", "_")),
        st.builds(TopicConfig, st.just(""), st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 7),
                  st.sampled_from(["SINGLE_TAG", "MULTI_TAG"])),
        max_size=5,
    ),
    st.builds(DataVersion, _longs, _longs),
    st.lists(_names, max_size=2),
)
def test_compressed_register_round_trip(table: dict[str, TopicConfig], dv: DataVersion, filters: list[str]) -> None:
    for name, tc in table.items():
        tc.topic_name = name
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, dv), filters)
    assert RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True) == body
    assert RegisterBrokerBody.decode(body.encode()) == body


# -- Java properties text ----------------------------------------------------------------------


def test_broker_config_text_from_vectors() -> None:
    text = body_bytes(1089).decode("utf-8")
    props = string_to_properties(text)
    assert props["shortPollingTimeMills"] == "1000"
    assert props["storePathRootDir"].startswith("/opt/rmq")
    assert properties_to_string(props) == text


def test_properties_to_string() -> None:
    assert properties_to_string({"a": 1, "b": True, "c": None, "d": "x y", "e": 0.5}) == "a=1\nb=true\nd=x y\ne=0.5\n"


def test_string_to_properties_java_rules() -> None:
    text = (
        "# comment\n"
        "  ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d\n"
        "e=\n"
        "f=x=y:z\n"
        "g\\=h=v\n"
        "k\\ ey=v\\tw\\u0041\\\\\n"
        "long=one \\\n"
        "    two \\\n"
        "  # not a comment\n"
        "last\\\n"
        "  =8\r\n"
        "crlf=9\r"
        "a=override"
    )
    assert string_to_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "",
        "e": "",
        "f": "x=y:z",
        "g=h": "v",
        "k ey": "v\twA\\",
        "long": "one two # not a comment",
        "last": "8",
        "crlf": "9",
    }


def test_string_to_properties_rejects_bad_unicode_escape() -> None:
    with pytest.raises(ProtocolError):
        string_to_properties("a=\\u12G4\n")


_prop_keys = st.text(alphabet=st.characters(blacklist_characters="=: \t\f\r\n\\#!", codec="utf-8"), min_size=1, max_size=8)
_prop_values = st.text(alphabet=st.characters(blacklist_characters="\r\n\\", codec="utf-8"), max_size=12).map(lambda s: s.lstrip(" \t\f"))


@settings(max_examples=200)
@given(st.dictionaries(_prop_keys, _prop_values, max_size=6))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert string_to_properties(properties_to_string(props)) == props


def test_object_keys_from_loads_convert_to_message_queues() -> None:
    raw = loads(b'{"offsetTable":{{"brokerName":"b","queueId":2,"topic":"T"}:{"maxOffset":3}}}')
    table = TopicStatsTable.from_json(raw)
    assert table.offset_table == {MessageQueue("T", "b", 2): TopicOffset(max_offset=3)}
    assert dumps(table) == table.encode()
