"""RouteInfoManager semantics (upstream RouteInfoManager, docs/PROTOCOL.md 4.3, 4.4, 6.8).

Pure: no loop, no sockets; time is an injected clock, so expiry needs no sleeping.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.bodies import DataVersion, TopicConfig
from aiorocketmq.protocol.codes import Perm, TopicSysFlag
from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.server.namesrv.route_info import MAX_QUEUE_NUMS, RouteInfoManager

CLUSTER = "DefaultCluster"
ADDR_A0 = "10.0.0.1:10911"
ADDR_A1 = "10.0.0.2:10911"
ADDR_B0 = "10.0.0.3:10911"


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def tc(name: str, queues: int = 4, perm: int = 6, sys_flag: int = 0) -> TopicConfig:
    return TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues,
                       perm=perm, topic_sys_flag=sys_flag)


def table(*configs: TopicConfig) -> dict[str, TopicConfig]:
    return {c.topic_name: c for c in configs}


def dv(counter: int, timestamp: int = 1700000000000) -> DataVersion:
    return DataVersion(timestamp=timestamp, counter=counter)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def routes(clock: Clock) -> RouteInfoManager:
    return RouteInfoManager(clock=clock, broker_channel_expired_ms=120_000)


def register(routes: RouteInfoManager, name: str = "broker-a", addr: str = ADDR_A0,
             broker_id: int = 0, configs: dict[str, TopicConfig] | None = None,
             version: DataVersion | None = None, channel: object = None,
             cluster: str = CLUSTER, filters: list[str] | None = None):
    return routes.register_broker(
        cluster, addr, name, broker_id, addr.replace("10911", "10912"),
        version or dv(1), configs if configs is not None else table(tc("TopicA")),
        filters, channel)


def snapshot(routes: RouteInfoManager) -> tuple:
    return copy.deepcopy((routes.topic_queue_table, routes.broker_addr_table,
                          routes.cluster_addr_table,
                          {a: (li.last_update_ms, li.data_version, li.ha_server_addr)
                           for a, li in routes.broker_live_table.items()},
                          routes.filter_server_table))


# -- register and route -------------------------------------------------------------------


def test_master_registration_builds_route(routes: RouteInfoManager) -> None:
    register(routes, configs=table(tc("TopicA", 8, 7), tc("TopicB")))
    route = routes.pick_topic_route("TopicA")
    assert route is not None
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
            for q in route.queue_datas] == [("broker-a", 8, 8, 7, 0)]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        (CLUSTER, "broker-a", {0: ADDR_A0})]
    assert route.filter_server_table == {}
    assert route.order_topic_conf is None
    assert routes.pick_topic_route("Nope") is None


def test_route_encodes_like_the_captured_forms(routes: RouteInfoManager) -> None:
    register(routes, configs=table(tc("T", 4, 6)))
    route = routes.pick_topic_route("T")
    assert route is not None
    assert route.encode(standard=True) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
    assert route.encode().startswith(b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"}')


def test_route_needs_a_broker_entry(routes: RouteInfoManager) -> None:
    register(routes)
    del routes.broker_addr_table["broker-a"]
    assert routes.pick_topic_route("TopicA") is None


def test_order_topic_conf_is_passed_through(routes: RouteInfoManager) -> None:
    register(routes)
    route = routes.pick_topic_route("TopicA", order_topic_conf="broker-a:4")
    assert route is not None and route.order_topic_conf == "broker-a:4"


def test_two_brokers_share_a_topic(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, configs=table(tc("Shared", 4)))
    register(routes, "broker-b", ADDR_B0, configs=table(tc("Shared", 2)))
    route = routes.pick_topic_route("Shared")
    assert route is not None
    assert sorted((q.broker_name, q.write_queue_nums) for q in route.queue_datas) == [
        ("broker-a", 4), ("broker-b", 2)]
    assert sorted(b.broker_name for b in route.broker_datas) == ["broker-a", "broker-b"]


def test_unchanged_data_version_does_not_rebuild_queue_data(routes: RouteInfoManager) -> None:
    register(routes, configs=table(tc("TopicA", 4)), version=dv(1))
    assert routes.wipe_write_perm("broker-a") == 1
    # Same DataVersion, different body: upstream ignores the body (no rebuild).
    register(routes, configs=table(tc("TopicA", 8)), version=dv(1))
    qd = routes.topic_queue_table["TopicA"]["broker-a"]
    assert (qd.write_queue_nums, qd.perm) == (4, Perm.READ)
    # A new DataVersion rebuilds from the body.
    register(routes, configs=table(tc("TopicA", 8)), version=dv(2))
    qd = routes.topic_queue_table["TopicA"]["broker-a"]
    assert (qd.write_queue_nums, qd.perm) == (8, 6)


def test_data_version_equality_needs_timestamp_and_counter(routes: RouteInfoManager) -> None:
    register(routes, configs=table(tc("TopicA", 4)), version=dv(1, timestamp=5))
    register(routes, configs=table(tc("TopicA", 2)), version=dv(1, timestamp=6))
    assert routes.topic_queue_table["TopicA"]["broker-a"].write_queue_nums == 2


def test_topics_missing_from_a_later_body_stay(routes: RouteInfoManager) -> None:
    register(routes, configs=table(tc("Old"), tc("Kept")), version=dv(1))
    register(routes, configs=table(tc("New")), version=dv(2))
    assert set(routes.topic_queue_table) == {"Old", "Kept", "New"}
    assert routes.pick_topic_route("Old") is not None


def test_capped_perms_are_stored_as_sent(routes: RouteInfoManager) -> None:
    # A broker with brokerPermission=4 (read only) registers every topic with perm 4.
    register(routes, configs=table(tc("A", perm=4), tc("B", perm=4)))
    assert {qd.perm for m in routes.topic_queue_table.values() for qd in m.values()} == {4}


def test_slave_registration_adds_no_queue_data_and_learns_master(
        routes: RouteInfoManager) -> None:
    result = register(routes, "broker-a", ADDR_A1, broker_id=1,
                      configs=table(tc("SlaveOnly")))
    assert (result.master_addr, result.ha_server_addr) == (None, None)
    assert "SlaveOnly" not in routes.topic_queue_table
    register(routes, "broker-a", ADDR_A0, broker_id=0, configs=table(tc("TopicA")))
    result = register(routes, "broker-a", ADDR_A1, broker_id=1, configs=table(tc("SlaveOnly")))
    assert result.master_addr == ADDR_A0
    assert result.ha_server_addr == "10.0.0.1:10912"
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: ADDR_A0, 1: ADDR_A1}
    assert "SlaveOnly" not in routes.topic_queue_table


def test_master_result_carries_nothing(routes: RouteInfoManager) -> None:
    result = register(routes)
    assert (result.master_addr, result.ha_server_addr) == (None, None)


def test_slave_switch_to_master_drops_the_old_id(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, broker_id=0)
    register(routes, "broker-a", ADDR_A1, broker_id=1)
    # The master dies; the slave at ADDR_A1 comes back as brokerId 0.
    routes.unregister_broker(CLUSTER, ADDR_A0, "broker-a", 0)
    register(routes, "broker-a", ADDR_A1, broker_id=0, configs=table(tc("TopicA")))
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: ADDR_A1}
    route = routes.pick_topic_route("TopicA")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: ADDR_A1}


def test_every_register_refreshes_liveness(routes: RouteInfoManager, clock: Clock) -> None:
    register(routes)
    clock.now += 100_000
    register(routes)
    clock.now += 100_000
    assert routes.scan_not_active_brokers() == []
    assert routes.pick_topic_route("TopicA") is not None


def test_register_without_body_keeps_routes_and_stores_zero_version(
        routes: RouteInfoManager) -> None:
    register(routes, version=dv(3))
    routes.register_broker(CLUSTER, ADDR_A0, "broker-a", 0, "h", DataVersion(0, 0), {}, [], None)
    assert routes.pick_topic_route("TopicA") is not None
    assert routes.broker_live_table[ADDR_A0].data_version == DataVersion(0, 0)


def test_filter_servers_appear_in_routes(routes: RouteInfoManager) -> None:
    register(routes, filters=["10.0.0.9:1"])
    route = routes.pick_topic_route("TopicA")
    assert route is not None and route.filter_server_table == {ADDR_A0: ["10.0.0.9:1"]}
    register(routes, filters=[])
    route = routes.pick_topic_route("TopicA")
    assert route is not None and route.filter_server_table == {}


# -- validation: bad identity refused, bad topic configs left out -----------------------------------------------------------


@pytest.mark.parametrize("bad", [
    tc("X", queues=-1),
    tc("X", queues=MAX_QUEUE_NUMS + 1),
    tc("X", perm=16),
    tc("X", perm=-2),
    tc("X", sys_flag=-1),
    TopicConfig(topic_name="", read_queue_nums=1, write_queue_nums=1),
])
def test_bad_topic_config_is_left_out_and_the_rest_registers(
        routes: RouteInfoManager, bad: TopicConfig) -> None:
    # A stock broker registers whatever int a client gave it; one unusable topic must not
    # take the broker's other routes with it (issue #18).
    register(routes, configs=table(tc("TopicA")), version=dv(1))
    configs = {"Good": tc("Good"), "Bad": bad}
    register(routes, "broker-b", ADDR_B0, configs=configs, version=dv(2))
    register(routes, "broker-a", ADDR_A0, configs=configs, version=dv(2))
    assert set(routes.topic_queue_table["Good"]) == {"broker-a", "broker-b"}
    assert "Bad" not in routes.topic_queue_table and "X" not in routes.topic_queue_table
    assert set(routes.topic_queue_table["TopicA"]) == {"broker-a"}


@pytest.mark.parametrize("field,value", [
    ("cluster", ""), ("addr", ""), ("name", ""), ("broker_id", -1)])
def test_bad_identity_changes_nothing(routes: RouteInfoManager, field: str, value: object) -> None:
    register(routes)
    before = snapshot(routes)
    args = {"cluster": CLUSTER, "addr": ADDR_B0, "name": "broker-b", "broker_id": 0}
    args[field] = value
    with pytest.raises(ProtocolError):
        routes.register_broker(args["cluster"], args["addr"], args["name"], args["broker_id"],
                               "h", dv(1), table(tc("T")), [], None)
    assert snapshot(routes) == before


def test_queue_count_bounds_are_inclusive(routes: RouteInfoManager) -> None:
    register(routes, configs=table(tc("Zero", 0), tc("Max", MAX_QUEUE_NUMS)))
    assert routes.topic_queue_table["Max"]["broker-a"].read_queue_nums == MAX_QUEUE_NUMS


# -- unregister, channel close, expiry ----------------------------------------------------


def test_unregister_last_address_removes_broker_cluster_and_topics(
        routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, configs=table(tc("OnlyA"), tc("Shared")))
    register(routes, "broker-b", ADDR_B0, configs=table(tc("Shared")))
    routes.unregister_broker(CLUSTER, ADDR_A0, "broker-a", 0)
    assert "broker-a" not in routes.broker_addr_table
    assert routes.cluster_addr_table == {CLUSTER: {"broker-b"}}
    assert "OnlyA" not in routes.topic_queue_table
    assert list(routes.topic_queue_table["Shared"]) == ["broker-b"]
    assert ADDR_A0 not in routes.broker_live_table
    routes.unregister_broker(CLUSTER, ADDR_B0, "broker-b", 0)
    assert routes.cluster_addr_table == {}
    assert routes.topic_queue_table == {}
    assert routes.broker_addr_table == {}


def test_unregister_master_keeps_slave_and_topics(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, broker_id=0)
    register(routes, "broker-a", ADDR_A1, broker_id=1)
    routes.unregister_broker(CLUSTER, ADDR_A0, "broker-a", 0)
    assert routes.broker_addr_table["broker-a"].broker_addrs == {1: ADDR_A1}
    route = routes.pick_topic_route("TopicA")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: ADDR_A1}


def test_channel_close_removes_the_broker_registered_over_it(routes: RouteInfoManager) -> None:
    conn_a, conn_b, admin = object(), object(), object()
    register(routes, "broker-a", ADDR_A0, channel=conn_a)
    register(routes, "broker-b", ADDR_B0, channel=conn_b, configs=table(tc("TopicB")))
    assert routes.on_channel_destroy("127.0.0.1:50000", admin) is None
    assert set(routes.broker_addr_table) == {"broker-a", "broker-b"}
    assert routes.on_channel_destroy("127.0.0.1:50001", conn_a) == ADDR_A0
    assert set(routes.broker_addr_table) == {"broker-b"}
    assert routes.pick_topic_route("TopicA") is None
    assert routes.pick_topic_route("TopicB") is not None


def test_channel_close_falls_back_to_the_remote_address(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, channel=None)
    assert routes.on_channel_destroy(ADDR_A0, object()) == ADDR_A0
    assert routes.broker_addr_table == {}


def test_expiry_after_the_configured_silence(routes: RouteInfoManager, clock: Clock) -> None:
    channel = object()
    register(routes, "broker-a", ADDR_A0, channel=channel)
    register(routes, "broker-b", ADDR_B0, configs=table(tc("TopicB")))
    clock.now += 60_000
    register(routes, "broker-b", ADDR_B0, configs=table(tc("TopicB")))
    clock.now += 60_000
    assert routes.scan_not_active_brokers() == []  # exactly at the limit: still alive
    clock.now += 1
    assert routes.scan_not_active_brokers() == [(ADDR_A0, channel)]
    assert routes.pick_topic_route("TopicA") is None
    assert routes.pick_topic_route("TopicB") is not None
    assert routes.scan_not_active_brokers(now_ms=clock.now + 60_001) == [(ADDR_B0, None)]
    assert routes.cluster_addr_table == {}


def test_shorter_expiry_setting(clock: Clock) -> None:
    routes = RouteInfoManager(clock=clock, broker_channel_expired_ms=500)
    register(routes)
    clock.now += 501
    assert [a for a, _ in routes.scan_not_active_brokers()] == [ADDR_A0]


def test_query_data_version_refreshes_liveness(routes: RouteInfoManager, clock: Clock) -> None:
    assert routes.query_data_version(ADDR_A0, dv(1)) == (True, None)
    register(routes, version=dv(1))
    clock.now += 100_000
    changed, stored = routes.query_data_version(ADDR_A0, dv(2))
    assert changed is True and stored == dv(1)
    clock.now += 30_000  # 130 s after the register: only a refresh keeps it alive
    changed, stored = routes.query_data_version(ADDR_A0, dv(1))
    assert changed is False and stored == dv(1)
    clock.now += 100_000
    assert routes.scan_not_active_brokers() == []


# -- lists and admin ----------------------------------------------------------------------


def test_cluster_info(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0)
    register(routes, "broker-a", ADDR_A1, broker_id=1)
    register(routes, "broker-b", ADDR_B0, cluster="Other")
    info = routes.cluster_info()
    assert info.cluster_addr_table == {CLUSTER: ["broker-a"], "Other": ["broker-b"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: ADDR_A0, 1: ADDR_A1}
    body = info.encode()
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in body


def test_topic_lists(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, configs=table(tc("A1"), tc("Both")))
    register(routes, "broker-b", ADDR_B0, cluster="Other", configs=table(tc("B1"), tc("Both")))
    assert sorted(routes.all_topics().topic_list) == ["A1", "B1", "Both"]
    assert sorted(routes.topics_by_cluster(CLUSTER).topic_list) == ["A1", "Both"]
    assert sorted(routes.topics_by_cluster("Other").topic_list) == ["B1", "Both"]
    assert routes.topics_by_cluster("Unknown").topic_list == []


def test_system_topics(routes: RouteInfoManager) -> None:
    assert routes.system_topics().topic_list == []
    register(routes, "broker-a", ADDR_A1, broker_id=1)
    register(routes, "broker-a", ADDR_A0, broker_id=0)
    topics = routes.system_topics()
    assert sorted(topics.topic_list) == [CLUSTER, "broker-a"]
    assert topics.broker_addr == ADDR_A0


def test_unit_topic_lists(routes: RouteInfoManager) -> None:
    register(routes, configs=table(
        tc("Plain", sys_flag=0),
        tc("Unit", sys_flag=TopicSysFlag.UNIT),
        tc("UnitSub", sys_flag=TopicSysFlag.UNIT_SUB),
        tc("Both", sys_flag=TopicSysFlag.UNIT | TopicSysFlag.UNIT_SUB)))
    assert sorted(routes.unit_topics().topic_list) == ["Both", "Unit"]
    assert sorted(routes.has_unit_sub_topics().topic_list) == ["Both", "UnitSub"]
    assert routes.has_unit_sub_ununit_topics().topic_list == ["UnitSub"]


def test_delete_topic_everywhere_and_by_cluster(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, configs=table(tc("T"), tc("U")))
    register(routes, "broker-b", ADDR_B0, cluster="Other", configs=table(tc("T"), tc("U")))
    routes.delete_topic("T", CLUSTER)
    assert list(routes.topic_queue_table["T"]) == ["broker-b"]
    routes.delete_topic("T", "Other")
    assert "T" not in routes.topic_queue_table
    routes.delete_topic("U", "NoSuchCluster")
    assert set(routes.topic_queue_table["U"]) == {"broker-a", "broker-b"}
    routes.delete_topic("U")
    assert routes.topic_queue_table == {}


def test_wipe_and_add_write_perm(routes: RouteInfoManager) -> None:
    register(routes, "broker-a", ADDR_A0, configs=table(tc("A", perm=7), tc("B", perm=6)))
    register(routes, "broker-b", ADDR_B0, configs=table(tc("A", perm=6)))
    assert routes.wipe_write_perm("broker-a") == 2
    assert routes.topic_queue_table["A"]["broker-a"].perm == 5
    assert routes.topic_queue_table["B"]["broker-a"].perm == 4
    assert routes.topic_queue_table["A"]["broker-b"].perm == 6
    assert routes.add_write_perm("broker-a") == 2
    assert routes.topic_queue_table["A"]["broker-a"].perm == 6
    assert routes.wipe_write_perm("nobody") == 0


def test_generation_moves_only_when_routes_change(routes: RouteInfoManager) -> None:
    register(routes, version=dv(1))
    g = routes.generation
    register(routes, version=dv(1))  # periodic re-registration, nothing new
    assert routes.generation == g
    register(routes, version=dv(2))
    assert routes.generation > g


# -- invariants under random operations ---------------------------------------------------

_NAMES = ["broker-a", "broker-b", "broker-c"]
_ADDRS = ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1"]
_TOPICS = ["T0", "T1", "T2", "T3"]
_CLUSTER_OF = {"broker-a": "C1", "broker-b": "C1", "broker-c": "C2"}

_op = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(_NAMES), st.sampled_from(_ADDRS),
              st.integers(0, 2), st.integers(0, 3),
              st.lists(st.sampled_from(_TOPICS), max_size=4)),
    st.tuples(st.just("unregister"), st.sampled_from(_NAMES), st.sampled_from(_ADDRS),
              st.integers(0, 2)),
    st.tuples(st.just("close"), st.sampled_from(_ADDRS)),
    st.tuples(st.just("delete"), st.sampled_from(_TOPICS), st.sampled_from([None, "C1", "C2"])),
    st.tuples(st.just("tick"), st.integers(0, 200_000)),
    st.tuples(st.just("wipe"), st.sampled_from(_NAMES)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_op, max_size=40))
def test_tables_stay_consistent(ops: list[tuple]) -> None:
    clock = Clock()
    routes = RouteInfoManager(clock=clock)
    channels = {addr: object() for addr in _ADDRS}
    for op in ops:
        kind = op[0]
        if kind == "register":
            _, name, addr, bid, counter, topics = op
            routes.register_broker(_CLUSTER_OF[name], addr, name, bid, "ha", dv(counter),
                                   table(*(tc(t) for t in topics)), [], channels[addr])
        elif kind == "unregister":
            _, name, addr, bid = op
            routes.unregister_broker(_CLUSTER_OF[name], addr, name, bid)
        elif kind == "close":
            routes.on_channel_destroy("127.0.0.1:9", channels[op[1]])
        elif kind == "delete":
            routes.delete_topic(op[1], op[2])
        elif kind == "tick":
            clock.now += op[1]
            routes.scan_not_active_brokers()
        else:
            routes.wipe_write_perm(op[1])
        # No empty containers are left behind.
        assert all(routes.topic_queue_table.values())
        assert all(routes.cluster_addr_table.values())
        assert all(bd.broker_addrs for bd in routes.broker_addr_table.values())
        # An address is listed once per broker name.
        for bd in routes.broker_addr_table.values():
            assert len(set(bd.broker_addrs.values())) == len(bd.broker_addrs)
        # Every route answered names a broker we know.
        for topic in routes.topic_queue_table:
            route = routes.pick_topic_route(topic)
            if route is not None:
                assert {b.broker_name for b in route.broker_datas} <= set(
                    routes.broker_addr_table)
