"""SQL92 filtering in our broker, raw protocol (upstream 4.9.7 ``PullMessageProcessor``,
``ClientManageProcessor.checkClientConfig``, ``ConsumerFilterManager``).

* CHECK_CLIENT_CONFIG: refused with SYSTEM_ERROR and the stock remark when
  ``enablePropertyFilter=false`` (what makes a stock consumer fail to start), an expression
  that does not compile answered SUBSCRIPTION_PARSE_FAILED with upstream's remark;
* pulls carrying the expression (SUBSCRIPTION flag, as the lite-pull consumer) and pulls by
  heartbeat subscription (FILTER_DATA_NOT_EXIST / FILTER_DATA_NOT_LATEST) select exactly the
  matching messages, with NO_MATCHED_MESSAGE past a run of non-matching ones;
* a parked SQL92 pull is not woken by a message it does not select, and is by one it does;
* ``consumerFilter.json`` holds the registered filter data.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiorocketmq.protocol.bodies import (
    CheckClientRequestBody,
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
    build_subscription_data,
)
from aiorocketmq.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import PullMessageRequestHeader
from aiorocketmq.protocol.message import decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import pull_header, send
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = pytest.mark.timeout(120)

TIMEOUT = 10.0
NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Nameserver + a broker with ``enablePropertyFilter=true`` (each test uses its own topics)."""
    tmp: Path = tmp_path_factory.mktemp("sql92")
    with namesrv_and_broker(tmp, conf={"enablePropertyFilter": "true"}) as servers:
        yield servers


@pytest.fixture
async def client() -> Iterator[RemotingClient]:  # type: ignore[misc]
    c = RemotingClient()
    try:
        yield c
    finally:
        await c.close()


def sql_sub(topic: str, expression: str, version: int = 1000) -> SubscriptionData:
    return SubscriptionData(topic, expression, sub_version=version, expression_type="SQL92")


def check_client_config(sub: SubscriptionData) -> RemotingCommand:
    body = CheckClientRequestBody("127.0.0.1@test", "CG", sub).encode()
    return RemotingCommand.create_request(RequestCode.CHECK_CLIENT_CONFIG, body=body)


def sql_pull(group: str, topic: str, offset: int, expression: str | None, *, flag: int | None = None,
             suspend_ms: int = 0, sub_version: int = 0) -> RemotingCommand:
    sys_flag = (PullSysFlag.SUBSCRIPTION if expression is not None else 0) if flag is None else flag
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32,
        sys_flag=sys_flag, commit_offset=0, suspend_timeout_millis=suspend_ms,
        subscription=expression, sub_version=sub_version, expression_type="SQL92")
    return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


def heartbeat(group: str, subs: list[SubscriptionData]) -> RemotingCommand:
    data = HeartbeatData("127.0.0.1@sql92", consumer_data_set=[ConsumerData(
        group, "CONSUME_ACTIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET", subs)])
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, body=data.encode())


async def produce(client: RemotingClient, addr: str, topic: str,
                  messages: list[dict[str, str]]) -> None:
    for i, props in enumerate(messages):
        r = await send(client, addr, topic, str(i).encode(), props=props)
        assert r.code == ResponseCode.SUCCESS, r.remark


MESSAGES = [
    {"TAGS": "TagA", "a": "1", "color": "red"},
    {"TAGS": "TagB", "a": "5", "color": "blue"},
    {"TAGS": "TagA", "a": "x"},
    {"TAGS": "TagC", "a": "10", "color": "red"},
    {"color": "green"},
]


async def test_check_client_config_refused_without_property_filter(
        tmp_path: Path, client: RemotingClient) -> None:
    with namesrv_and_broker(tmp_path) as (_, broker):
        r = await client.invoke(broker.address, check_client_config(sql_sub("T", "a > 1")), TIMEOUT)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
        # a TAG subscription, or none, is fine
        tag = build_subscription_data("T", "TagA")
        r = await client.invoke(broker.address, check_client_config(tag), TIMEOUT)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        # a pull carrying an SQL92 expression is refused too, never served unfiltered
        await produce(client, broker.address, "NoFilter", MESSAGES[:1])
        r = await client.invoke(broker.address, sql_pull("CG", "NoFilter", 0, "a > 0"), TIMEOUT)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)


async def test_check_client_config(servers: tuple[ServerProcess, ServerProcess],
                                   client: RemotingClient) -> None:
    addr = servers[1].address
    r = await client.invoke(addr, check_client_config(sql_sub("T", "a > 1 AND TAGS IN ('A')")),
                            TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    r = await client.invoke(addr, check_client_config(sql_sub("T", "a > 'x'")), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                  "java.lang.RuntimeException: Value ''x'' cannot be compared.")
    r = await client.invoke(addr, check_client_config(sql_sub("T", "a >")), TIMEOUT)
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert r.remark.startswith('org.apache.rocketmq.filter.parser.ParseException: Encountered "<EOF>"')


@pytest.mark.parametrize("expression,expected", [
    ("a > 1", [b"1", b"3"]),
    ("a BETWEEN 1 AND 5 AND color = 'blue'", [b"1"]),
    ("color IN ('red', 'green')", [b"0", b"3", b"4"]),
    ("color IS NULL", [b"2"]),
    ("TAGS = 'TagA' OR a = 10", [b"0", b"2", b"3"]),
    ("NOT (a < 5)", [b"1", b"3"]),
])
async def test_pull_with_expression(servers: tuple[ServerProcess, ServerProcess],
                                    client: RemotingClient, expression: str,
                                    expected: list[bytes]) -> None:
    addr = servers[1].address
    topic = f"Sql{abs(hash(expression)) % 10**8}"
    await produce(client, addr, topic, MESSAGES)
    r = await client.invoke(addr, sql_pull("CG", topic, 0, expression), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, "FOUND")
    assert [m.body for m in decode_messages(r.body)] == expected
    assert pull_header(r).next_begin_offset == len(MESSAGES)


async def test_pull_no_match_and_parse_failure(servers: tuple[ServerProcess, ServerProcess],
                                               client: RemotingClient) -> None:
    addr = servers[1].address
    await produce(client, addr, "SqlNone", MESSAGES)
    r = await client.invoke(addr, sql_pull("CG", "SqlNone", 0, "a > 100"), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert pull_header(r).next_begin_offset == len(MESSAGES)
    r = await client.invoke(addr, sql_pull("CG", "SqlNone", 0, "a > 'x'"), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                  "parse the consumer's subscription failed")


async def test_pull_by_heartbeat_subscription(servers: tuple[ServerProcess, ServerProcess],
                                              client: RemotingClient) -> None:
    addr = servers[1].address
    topic = "SqlHeartbeat"
    await produce(client, addr, topic, MESSAGES)
    # no heartbeat yet
    r = await client.invoke(addr, sql_pull("HG", topic, 0, None, flag=0, sub_version=1000), TIMEOUT)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    r = await client.invoke(addr, heartbeat("HG", [sql_sub(topic, "color = 'red'", 1000)]), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS
    r = await client.invoke(addr, sql_pull("HG", topic, 0, None, flag=0, sub_version=1000), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"0", b"3"]
    # the client says it has a newer subscription than the broker's filter data
    r = await client.invoke(addr, sql_pull("HG", topic, 0, None, flag=0, sub_version=999), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS
    # an expression that does not compile is never registered
    r = await client.invoke(addr, heartbeat("BadG", [sql_sub(topic, "color = ", 1000)]), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS
    r = await client.invoke(addr, sql_pull("BadG", topic, 0, None, flag=0, sub_version=1000), TIMEOUT)
    assert (r.code, r.remark) == (ResponseCode.FILTER_DATA_NOT_EXIST,
                                  "The broker's consumer filter data is not exist!Your expression "
                                  "may be wrong!")


async def test_changed_expression(servers: tuple[ServerProcess, ServerProcess],
                                  client: RemotingClient) -> None:
    addr = servers[1].address
    topic = "SqlChanged"
    await produce(client, addr, topic, MESSAGES)
    assert (await client.invoke(addr, heartbeat("CHG", [sql_sub(topic, "a > 1", 2000)]),
                                TIMEOUT)).code == 0
    r = await client.invoke(addr, sql_pull("CHG", topic, 0, None, flag=0, sub_version=2000), TIMEOUT)
    assert [m.body for m in decode_messages(r.body)] == [b"1", b"3"]
    # a newer subscription replaces the filter: compiled once, used by every pull after it
    assert (await client.invoke(addr, heartbeat("CHG", [sql_sub(topic, "a < 2", 3000)]),
                                TIMEOUT)).code == 0
    r = await client.invoke(addr, sql_pull("CHG", topic, 0, None, flag=0, sub_version=3000), TIMEOUT)
    assert [m.body for m in decode_messages(r.body)] == [b"0"]
    # an older heartbeat changes nothing; a pull announcing a newer one than the broker has
    assert (await client.invoke(addr, heartbeat("CHG", [sql_sub(topic, "a > 1", 2500)]),
                                TIMEOUT)).code == 0
    r = await client.invoke(addr, sql_pull("CHG", topic, 0, None, flag=0, sub_version=3000), TIMEOUT)
    assert [m.body for m in decode_messages(r.body)] == [b"0"]
    r = await client.invoke(addr, sql_pull("CHG", topic, 0, None, flag=0, sub_version=4000), TIMEOUT)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    # a newer expression that does not compile drops the filter data: the client hears of it
    assert (await client.invoke(addr, heartbeat("CHG", [sql_sub(topic, "a <", 5000)]),
                                TIMEOUT)).code == 0
    r = await client.invoke(addr, sql_pull("CHG", topic, 0, None, flag=0, sub_version=5000), TIMEOUT)
    assert r.code == ResponseCode.FILTER_DATA_NOT_EXIST


async def test_parked_pull_woken_only_by_matching_message(
        servers: tuple[ServerProcess, ServerProcess], client: RemotingClient) -> None:
    addr = servers[1].address
    topic = "SqlLongPoll"
    await produce(client, addr, topic, [{"a": "0"}])
    flag = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    parked = asyncio.ensure_future(client.invoke(
        addr, sql_pull("CG", topic, 1, "a > 5", flag=flag, suspend_ms=20000), 30))
    # ordered on the same connection: the pull is parked once this is answered
    assert (await client.invoke(addr, sql_pull("CG", topic, 0, "a >= 0"), TIMEOUT)).code == 0
    # A put wakes the pulls it matches before its send is answered, on the same connection:
    # once the sends are answered, the pull has been woken if (and only if) they woke it.
    await produce(client, addr, topic, [{"a": "1"}, {"a": "x"}])
    assert not parked.done(), "woken by messages its filter does not select"
    await produce(client, addr, topic, [{"a": "7"}])
    assert parked.done(), "not woken by the message its filter selects"
    r = await parked
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, "FOUND")
    assert [m.properties["a"] for m in decode_messages(r.body)] == ["7"]
    assert pull_header(r).next_begin_offset == 4


async def test_consumer_filter_json(tmp_path: Path, client: RemotingClient) -> None:
    with namesrv_and_broker(tmp_path, conf={"enablePropertyFilter": "true"}) as (_, broker):
        r = await client.invoke(broker.address, heartbeat("PG1", [
            sql_sub("PTopic", "a > 1", 1234), build_subscription_data("Other", "*")]), TIMEOUT)
        assert r.code == ResponseCode.SUCCESS
        await client.close()
    path = tmp_path / "broker-a" / "store" / "config" / "consumerFilter.json"
    data = json.loads(path.read_text())
    entry = data["filterDataByTopic"]["PTopic"]
    assert entry["topic"] == "PTopic"
    filt = entry["groupFilterData"]["PG1"]
    assert {k: filt[k] for k in ("consumerGroup", "topic", "expression", "expressionType",
                                 "clientVersion")} == {
        "consumerGroup": "PG1", "topic": "PTopic", "expression": "a > 1",
        "expressionType": "SQL92", "clientVersion": 1234}
    assert filt["bornTime"] > 0 and "dead" in filt and "deadTime" in filt
    assert "Other" not in data["filterDataByTopic"]
