"""``MQAdmin``: the admin calls mqadmin makes, as typed coroutines (upstream ``DefaultMQAdminExtImpl``).

docs/PROTOCOL.md 3.1, 3.4, 4.3, 4.10, 4.11. One ``MQAdmin`` owns one ``RemotingClient`` (use
``async with MQAdmin(namesrv)``) and every call has one timeout budget (``timeout``
seconds, default 3 s like ``mqClientApiTimeout``; forwarded consumer calls get the
broker's 10 s plus slack). Which requests each call sends follows the 4.9.7 tools, as
the vectors show:

* cluster-wide calls ask the nameserver for ``ClusterInfo`` (106) and then every master
  of the cluster; topic-wide calls ask for the topic route (105) and then every broker
  in it;
* group calls find the group's brokers through the route of ``%RETRY%<group>`` first
  (``consumerProgress``, ``consumerConnection``, ``consumerStatus``), falling back to every
  broker of every cluster when that route does not exist;
* ``view_message(offset_msg_id)`` sends VIEW_MESSAGE_BY_ID (33) straight to the store host
  embedded in the id.

Failures raise the error tree of ``protocol.errors``: ``MQBrokerError`` subclasses for a
refusal (``TopicNotExistError`` for an unknown topic route), the ``RemotingError`` family
for transport trouble, ``MQClientError`` for bad arguments. Nothing here prints.
"""

# ASYNC109: ``timeout`` is each call's budget, handed down to the channel timers.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiorocketmq.client.api import MQClientAPI, PullResult, SendResult
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.protocol.acl import RPCHook
from aiorocketmq.protocol.bodies import (
    BrokerStatsData,
    ClusterInfo,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    KVTable,
    MessageQueue,
    ProducerConnection,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
    build_subscription_data,
    properties_to_string,
    string_to_properties,
)
from aiorocketmq.protocol.codes import (
    MixAll,
    PullSysFlag,
    RequestCode,
    ResponseCode,
    SerializeType,
    SystemTopic,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    RemotingError,
    TopicNotExistError,
)
from aiorocketmq.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    CloneGroupOffsetRequestHeader,
    CommandHeader,
    CreateTopicRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicsByClusterRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PullMessageRequestHeader,
    PutKVConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from aiorocketmq.protocol.message import (
    Message,
    MessageDecodeError,
    MessageExt,
    decode_offset_msg_id,
    uniq_id_timestamp,
)
from aiorocketmq.protocol.remoting_client import RemotingClient, parse_namesrv_addr

__all__ = ["MQAdmin", "BrokerInfo", "MessageTrack", "RollbackStats", "DEFAULT_TIMEOUT",
           "LONG_MAX", "namesrv_addr_from_env"]

DEFAULT_TIMEOUT = 3.0
LONG_MAX = 2**63 - 1
_CALL_CONSUMER_TIMEOUT = 12.0  # the broker waits 10 s for the client (Broker2Client.callClient)
_SUCCESS = ResponseCode.SUCCESS
_TOOLS_GROUP = MixAll.TOOLS_CONSUMER_GROUP
# DefaultMQAdminExtImpl.SYSTEM_GROUP_SET: groups getUserSubscriptionGroup leaves out.
_SYSTEM_GROUPS = frozenset({
    MixAll.DEFAULT_CONSUMER_GROUP, MixAll.DEFAULT_PRODUCER_GROUP, MixAll.TOOLS_CONSUMER_GROUP,
    MixAll.FILTERSRV_CONSUMER_GROUP, MixAll.MONITOR_CONSUMER_GROUP,
    MixAll.CLIENT_INNER_PRODUCER_GROUP, MixAll.SELF_TEST_PRODUCER_GROUP,
    MixAll.SELF_TEST_CONSUMER_GROUP, MixAll.ONS_HTTP_PROXY_GROUP,
    MixAll.CID_ONSAPI_PERMISSION_GROUP, MixAll.CID_ONSAPI_OWNER_GROUP,
    MixAll.CID_ONSAPI_PULL_GROUP, "CID_RMQ_SYS_TRANS",
})


@dataclass(slots=True)
class BrokerInfo:
    """One broker address of ``ClusterInfo`` (``clusterList`` rows)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str


@dataclass(slots=True)
class MessageTrack:
    """``MessageTrack``: what one consumer group did with a message (``queryMsgById``)."""

    consumer_group: str
    track_type: str = "UNKNOWN"  # TrackType: CONSUMED, CONSUMED_BUT_FILTERED, PULL, ...
    exception_desc: str | None = None

    def __str__(self) -> str:
        # Java's toString: a null exceptionDesc prints as "null" (CONSUMED tracks have none)
        desc = "null" if self.exception_desc is None else self.exception_desc
        return (f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type}, "
                f"exceptionDesc={desc}]")


@dataclass(slots=True)
class RollbackStats:
    """``RollbackStats``: one queue of an offline ``resetOffsetByTime``."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


def namesrv_addr_from_env() -> str:
    """``NAMESRV_ADDR`` from the environment (upstream ``MixAll.NAMESRV_ADDR_ENV``), or ""."""
    return os.environ.get(MixAll.NAMESRV_ADDR_ENV, "").strip()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MQAdmin:
    """Admin client over one nameserver list; see the module docstring.

    Args:
        namesrv_addr: ``"host:port;host:port"``; empty: ``NAMESRV_ADDR`` from the environment.
        timeout: default budget of one call, in seconds.
        serialize_type: header encoding of every request (``ClientConfig.serialize_type``;
            None: its default, ``ROCKETMQ_SERIALIZE_TYPE`` or JSON).
        rpc_hook: signs every request (``AclClientRPCHook``; stock mqadmin signs with
            ``conf/tools.yml``, see client/admin/acl.py ``tools_rpc_hook``).
        client_options: more ``ClientConfig`` fields (``access_key``/``secret_key``,
            ``use_tls``, ``tls_verify``, ...).
    """

    def __init__(self, namesrv_addr: str, *, timeout: float = DEFAULT_TIMEOUT,
                 serialize_type: SerializeType | str | None = None,
                 rpc_hook: RPCHook | None = None,
                 client_options: Mapping[str, Any] | None = None) -> None:
        addrs = parse_namesrv_addr(namesrv_addr or namesrv_addr_from_env())
        if not addrs:
            raise MQClientError("no name server address: give -n host:port or set "
                                f"{MixAll.NAMESRV_ADDR_ENV}")
        self.namesrv_addrs = addrs
        self.timeout = timeout
        options: dict[str, Any] = {} if serialize_type is None else {
            "serialize_type": serialize_type}
        self.config = ClientConfig(namesrv_addr=";".join(addrs),
                                   mq_client_api_timeout_ms=int(timeout * 1000), **options,
                                   **dict(client_options or {}), rpc_hook=rpc_hook)
        self.remoting = RemotingClient(serialize_type=self.config.serialize_type,
                                       rpc_hook=self.config.build_rpc_hook(),
                                       ssl=self.config.build_ssl_context())
        self.remoting.update_namesrv_address_list(addrs)
        self.api = MQClientAPI(self.remoting, self.config)

    async def __aenter__(self) -> MQAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.remoting.close()

    # -- plumbing -------------------------------------------------------------------------

    def _t(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    @staticmethod
    def _request(code: int, header: CommandHeader | None = None,
                 body: bytes | None = None) -> RemotingCommand:
        return RemotingCommand.create_request(
            code, header.to_ext_fields() if header is not None else None, body)

    async def invoke(self, addr: str, code: int, header: CommandHeader | None = None,
                     body: bytes | None = None, *, timeout: float | None = None,
                     ok: Iterable[int] = (_SUCCESS,)) -> RemotingCommand:
        """Send one request to ``addr``; raise ``MQBrokerError`` unless its code is in ``ok``."""
        response = await self.remoting.invoke(addr, self._request(code, header, body),
                                              self._t(timeout))
        if response.code not in tuple(ok):
            raise MQBrokerError.for_code(response.code, response.remark, addr)
        return response

    async def invoke_namesrv(self, code: int, header: CommandHeader | None = None,
                             body: bytes | None = None, *, timeout: float | None = None,
                             addr: str | None = None,
                             ok: Iterable[int] = (_SUCCESS,)) -> RemotingCommand:
        """One request to the chosen nameserver (or to ``addr``)."""
        request = self._request(code, header, body)
        if addr is not None:
            response = await self.remoting.invoke(addr, request, self._t(timeout))
        else:
            response = await self.remoting.invoke_namesrv(request, self._t(timeout))
            addr = self.remoting.namesrv_addr_chosen
        if response.code not in tuple(ok):
            raise MQBrokerError.for_code(response.code, response.remark, addr)
        return response

    # -- nameserver: cluster, topics, routes ----------------------------------------------

    async def cluster_info(self, *, timeout: float | None = None) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106)."""
        response = await self.invoke_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO, timeout=timeout)
        return ClusterInfo.decode(response.body or b"{}")

    async def brokers(self, cluster: str | None = None, *,
                      masters_only: bool = False) -> list[BrokerInfo]:
        """Every broker address of ``cluster`` (or of all clusters), sorted by name and id."""
        info = await self.cluster_info()
        out: list[BrokerInfo] = []
        for cname, names in sorted(info.cluster_addr_table.items()):
            if cluster is not None and cname != cluster:
                continue
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                if bd is None:
                    continue
                for bid, addr in sorted(bd.broker_addrs.items()):
                    if masters_only and bid != MixAll.MASTER_ID:
                        continue
                    out.append(BrokerInfo(cname, name, bid, addr))
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise MQClientError(f"cluster '{cluster}' not found on nameserver "
                                f"{self.remoting.namesrv_addr_chosen}")
        return out

    async def topic_list(self, *, timeout: float | None = None) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
        response = await self.invoke_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
                                             timeout=timeout)
        return list(TopicList.decode(response.body or b"{}").topic_list)

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER (224)."""
        response = await self.invoke_namesrv(RequestCode.GET_TOPICS_BY_CLUSTER,
                                             GetTopicsByClusterRequestHeader(cluster=cluster))
        return list(TopicList.decode(response.body or b"{}").topic_list)

    async def topic_route(self, topic: str, *, timeout: float | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105); ``TopicNotExistError`` when the nameserver has none."""
        try:
            return await self.api.get_topic_route_info(topic, self._t(timeout))
        except TopicNotExistError as exc:
            raise TopicNotExistError(
                exc.code, f"topic '{topic}' not found on nameserver "
                f"{self.remoting.namesrv_addr_chosen}", exc.addr) from None

    @staticmethod
    def _route_masters(route: TopicRouteData) -> dict[str, str]:
        """broker name -> master address."""
        out = {}
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MixAll.MASTER_ID)
            if addr is not None:
                out[bd.broker_name] = addr
        return out

    async def _group_brokers(self, group: str) -> dict[str, str]:
        """Masters that may hold ``group``: the ``%RETRY%<group>`` route, else every master."""
        try:
            route = await self.api.get_topic_route_info(MixAll.retry_topic(group), self.timeout)
            masters = self._route_masters(route)
            if masters:
                return masters
        except TopicNotExistError:
            pass
        return {b.broker_name: b.addr for b in await self.brokers(masters_only=True)}

    # -- topics on brokers ----------------------------------------------------------------

    async def create_topic(self, broker_addr: str, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) on one broker."""
        header = CreateTopicRequestHeader(
            topic=config.topic_name, default_topic=SystemTopic.AUTO_CREATE_TOPIC_KEY,
            read_queue_nums=config.read_queue_nums, write_queue_nums=config.write_queue_nums,
            perm=int(config.perm), topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag, order=config.order)
        await self.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def create_topic_in_cluster(self, cluster: str, config: TopicConfig) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on every master of ``cluster``; the addresses done."""
        masters = [b.addr for b in await self.brokers(cluster, masters_only=True)]
        for addr in masters:
            await self.create_topic(addr, config)
        return masters

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """``deleteTopic -c``: DELETE_TOPIC_IN_BROKER on every master, then DELETE_TOPIC_IN_NAMESRV."""
        masters = [b.addr for b in await self.brokers(cluster, masters_only=True)]
        for addr in masters:
            await self.invoke(addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                              DeleteTopicRequestHeader(topic=topic))
        header = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster)
        for addr in self.namesrv_addrs:
            await self.invoke_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, header, addr=addr)
        return masters

    async def topic_config(self, broker_addr: str, topic: str) -> TopicConfig | None:
        """The topic's config on one broker (from GET_ALL_TOPIC_CONFIG, 21)."""
        response = await self.invoke(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = TopicConfigSerializeWrapper.decode(response.body or b"{}")
        return wrapper.topic_config_table.get(topic)

    async def topic_stats(self, topic: str) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO (202) on every master of the route, merged."""
        route = await self.topic_route(topic)
        merged = TopicStatsTable()
        for addr in self._route_masters(route).values():
            response = await self.invoke(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                         GetTopicStatsInfoRequestHeader(topic=topic))
            merged.offset_table.update(TopicStatsTable.decode(response.body or b"{}").offset_table)
        return merged

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300) on every master of the route, merged."""
        route = await self.topic_route(topic)
        groups: set[str] = set()
        for addr in self._route_masters(route).values():
            response = await self.invoke(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                         QueryTopicConsumeByWhoRequestHeader(topic=topic))
            groups.update(GroupList.decode(response.body or b"{}").group_list)
        return sorted(groups)

    # -- brokers --------------------------------------------------------------------------

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28)."""
        response = await self.invoke(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.decode(response.body or b"{}").table)

    async def timer_metrics(self, broker_addr: str) -> dict[str, tuple[int, int]]:
        """GET_TIMER_METRICS (61, stock 5.x): pending timers per real topic, as
        ``{topic: (count, last change in epoch ms)}``."""
        response = await self.invoke(broker_addr, RequestCode.GET_TIMER_METRICS)
        data = json.loads(bytes(response.body or b"{}")) or {}
        return {str(topic): (int(m.get("count", 0)), int(m.get("timeStamp", 0)))
                for topic, m in (data.get("timingCount") or {}).items()}

    async def broker_config(self, broker_addr: str) -> tuple[dict[str, str], str | None]:
        """GET_BROKER_CONFIG (26): the properties and the DataVersion JSON of the header."""
        response = await self.invoke(broker_addr, RequestCode.GET_BROKER_CONFIG)
        text = bytes(response.body or b"").decode("utf-8", "replace")
        version = GetBrokerConfigResponseHeader.from_ext_fields(response.ext_fields or {
            "version": ""}).version or None
        return string_to_properties(text), version

    async def update_broker_config(self, broker_addr: str, props: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG (25) with ``key=value`` lines."""
        await self.invoke(broker_addr, RequestCode.UPDATE_BROKER_CONFIG,
                          body=properties_to_string(props).encode("utf-8"))

    # -- subscription groups --------------------------------------------------------------

    async def create_subscription_group(self, broker_addr: str,
                                        config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)."""
        await self.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=config.encode())

    async def subscription_groups(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)."""
        response = await self.invoke(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return dict(SubscriptionGroupWrapper.decode(response.body or b"{}").subscription_group_table)

    async def delete_subscription_group(self, broker_addr: str, group: str, *,
                                        remove_offset: bool = False) -> None:
        """DELETE_SUBSCRIPTIONGROUP (207)."""
        await self.invoke(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                          DeleteSubscriptionGroupRequestHeader(group_name=group,
                                                               remove_offset=remove_offset))

    # -- consumers ------------------------------------------------------------------------

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """``consumerProgress``: GET_CONSUME_STATS (208) on each of the group's masters, merged
        (``consumeTps`` summed)."""
        merged = ConsumeStats()
        for addr in (await self._group_brokers(group)).values():
            response = await self.invoke(addr, RequestCode.GET_CONSUME_STATS,
                                         GetConsumeStatsRequestHeader(consumer_group=group,
                                                                      topic=topic))
            part = ConsumeStats.decode(response.body or b"{}")
            merged.offset_table.update(part.offset_table)
            merged.consume_tps += part.consume_tps
        return merged

    async def consumer_connection(self, group: str) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST (203) from the first master that knows the group.

        Raises:
            ConsumerNotOnlineError: no broker has a live client of ``group``.
        """
        last: MQBrokerError | None = None
        for addr in (await self._group_brokers(group)).values():
            try:
                response = await self.invoke(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                             GetConsumerConnectionListRequestHeader(
                                                 consumer_group=group))
            except MQBrokerError as exc:
                last = exc
                continue
            return ConsumerConnection.decode(response.body or b"{}")
        if last is not None:
            raise last
        raise MQBrokerError.for_code(ResponseCode.CONSUMER_NOT_ONLINE,
                                     f"the consumer group[{group}] not online")

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST (204) from the topic's masters, merged."""
        merged = ProducerConnection()
        for addr in self._route_masters(await self.topic_route(topic)).values():
            response = await self.invoke(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                         GetProducerConnectionListRequestHeader(
                                             producer_group=group))
            merged.connection_set.extend(
                ProducerConnection.decode(response.body or b"{}").connection_set)
        return merged

    async def consumer_running_info(self, group: str, client_id: str, *,
                                    jstack: bool = False) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (307) through a broker the client is connected to."""
        last: MQBrokerError | None = None
        for addr in (await self._group_brokers(group)).values():
            try:
                response = await self.invoke(
                    addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                    GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id,
                                                        jstack_enable=jstack),
                    timeout=max(self.timeout, _CALL_CONSUMER_TIMEOUT))
            except MQBrokerError as exc:
                last = exc
                continue
            return ConsumerRunningInfo.decode(response.body or b"{}")
        if last is not None:
            raise last
        raise MQBrokerError.for_code(ResponseCode.SYSTEM_ERROR,
                                     f"The Consumer <{group}> <{client_id}> not online")

    async def reset_offset_by_time(self, topic: str, group: str, timestamp_ms: int, *,
                                   force: bool = True) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET (222) on every master of the topic's route.

        Raises:
            ConsumerNotOnlineError: no broker had an online consumer of ``group``.
        """
        route = await self.topic_route(topic)
        out: dict[MessageQueue, int] = {}
        not_online: MQBrokerError | None = None
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms,
                                          is_force=force)
        for addr in self._route_masters(route).values():
            try:
                response = await self.invoke(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                             header)
            except MQBrokerError as exc:
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                not_online = exc
                continue
            out.update(ResetOffsetBody.decode(response.body or b"{}").offset_table)
        if not out and not_online is not None:
            raise not_online
        return out

    async def reset_offset_by_time_offline(self, topic: str, group: str, timestamp_ms: int, *,
                                           force: bool = True) -> list[RollbackStats]:
        """``resetOffsetByTimestampOld``: rewrite the group's stored offsets itself.

        The path of ``ResetOffsetByTimeCommand`` when no consumer of ``group`` is online:
        per master of the route, GET_CONSUME_STATS (208) for the group's offsets (or, for a
        group that never consumed the topic, GET_TOPIC_STATS_INFO, 202), then per queue the
        offset for ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP, 29; -1: GET_MAX_OFFSET, 30)
        written with UPDATE_CONSUMER_OFFSET (15) when ``force`` or when it moves back.
        """
        route = await self.topic_route(topic)
        read_nums = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
        out: list[RollbackStats] = []
        for name, addr in self._route_masters(route).items():
            response = await self.invoke(addr, RequestCode.GET_CONSUME_STATS,
                                         GetConsumeStatsRequestHeader(consumer_group=group))
            table = {mq: (w.broker_offset, w.consumer_offset) for mq, w in
                     ConsumeStats.decode(response.body or b"{}").offset_table.items()
                     if mq.topic == topic}
            if not table:
                response = await self.invoke(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                             GetTopicStatsInfoRequestHeader(topic=topic))
                stats = TopicStatsTable.decode(response.body or b"{}").offset_table
                for qid in range(read_nums.get(name, 0)):
                    o = stats.get(MessageQueue(topic, name, qid))
                    if o is not None:
                        table[MessageQueue(topic, name, qid)] = (o.max_offset, o.min_offset)
            for mq in sorted(table):
                broker_offset, consumer_offset = table[mq]
                if timestamp_ms == -1:
                    target = await self.api.get_max_offset(addr, mq, self.timeout)
                else:
                    target = await self.api.search_offset(addr, mq, timestamp_ms, self.timeout)
                rollback = consumer_offset
                if force or target <= consumer_offset:
                    rollback = target
                    await self.api.update_consumer_offset(addr, UpdateConsumerOffsetRequestHeader(
                        consumer_group=group, topic=topic, queue_id=mq.queue_id,
                        commit_offset=target, bname=mq.broker_name), self.timeout, oneway=False)
                out.append(RollbackStats(mq.broker_name, mq.queue_id, broker_offset,
                                         consumer_offset, target, rollback))
        return out

    async def clone_group_offset(self, src_group: str, dest_group: str, topic: str, *,
                                 offline: bool = False) -> None:
        """CLONE_GROUP_OFFSET (314) on every master of the topic's route."""
        route = await self.topic_route(topic)
        header = CloneGroupOffsetRequestHeader(src_group=src_group, dest_group=dest_group,
                                               topic=topic, offline=offline)
        for addr in self._route_masters(route).values():
            await self.invoke(addr, RequestCode.CLONE_GROUP_OFFSET, header)

    # -- messages -------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID (33) at the store host the offset id names."""
        try:
            addr, offset = decode_offset_msg_id(offset_msg_id)
        except MessageDecodeError as exc:
            raise MQClientError(f"'{offset_msg_id}' is not an offset message id: {exc}") from None
        return await self.api.view_message(addr, offset, self.timeout)

    async def find_message(self, msg_id: str, topic: str | None = None) -> MessageExt | None:
        """``queryMsgById``: an offset message id, or else a unique key (UNIQ_KEY).

        An id that is not an offset id (``MessageDecoder.decodeMessageId`` fails: a
        UNIQ_KEY names no reachable port) is looked up as a unique key, as upstream
        ``DefaultMQAdminExtImpl.queryMessage`` does (5.x; 4.9.7's tool gave up with
        NO_MESSAGE): in ``topic``, or, without one, in every topic of the nameserver but
        the system, retry and dead-letter ones. Returns the oldest match
        (``MQAdminImpl.queryMessageByUniqKey``, from the id's creation time - 1 s), or None.
        """
        try:
            decode_offset_msg_id(msg_id)
        except MessageDecodeError:
            pass
        else:
            return await self.view_message(msg_id)
        try:
            begin = max(uniq_id_timestamp(msg_id) - 1000, 0)
        except MessageDecodeError:
            begin = 0
        topics = [topic] if topic else [
            t for t in sorted(await self.topic_list())
            if t not in SystemTopic.SYSTEM_TOPICS
            and not t.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX,
                                  SystemTopic.SYSTEM_TOPIC_PREFIX))]
        for t in topics:
            try:
                found = await self.query_message_by_key(t, msg_id, max_num=32, begin_ms=begin,
                                                        unique=True)
            except TopicNotExistError:
                if topic:
                    raise
                continue  # a cluster or broker name listed as a topic, without a route
            if found:
                return min(found, key=lambda m: m.store_timestamp)
        return None

    async def message_track_detail(self, msg: MessageExt) -> list[MessageTrack]:
        """``DefaultMQAdminExtImpl.messageTrackDetail``: per group consuming the topic, whether
        it consumed ``msg`` (its stored offset is past the message's queue offset)."""
        out: list[MessageTrack] = []
        for group in await self.query_topic_consume_by_who(msg.topic):
            mt = MessageTrack(group)
            out.append(mt)
            try:
                conn = await self.consumer_connection(group)
                if conn.consume_type == "CONSUME_ACTIVELY":
                    mt.track_type = "PULL"
                elif conn.consume_type == "CONSUME_PASSIVELY":
                    if not await self._consumed(msg, group):
                        mt.track_type = "NOT_CONSUME_YET"
                        continue
                    mt.track_type = "CONSUMED"
                    sd = conn.subscription_table.get(msg.topic)
                    tags = msg.properties.get("TAGS")
                    if sd is not None and sd.tags_set and "*" not in sd.tags_set \
                            and tags not in sd.tags_set:
                        mt.track_type = "CONSUMED_BUT_FILTERED"
            except MQBrokerError as exc:
                if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                    mt.track_type = "NOT_ONLINE"
                mt.exception_desc = f"CODE:{exc.code} DESC:{exc.remark}"
            except (RemotingError, MQClientError) as exc:
                mt.exception_desc = f"{type(exc).__name__}: {exc}"
        return out

    async def _consumed(self, msg: MessageExt, group: str) -> bool:
        """``DefaultMQAdminExtImpl.consumed``."""
        stats = await self.consume_stats(group)
        info = await self.cluster_info()
        for mq, w in stats.offset_table.items():
            if mq.topic != msg.topic or mq.queue_id != msg.queue_id:
                continue
            bd = info.broker_addr_table.get(mq.broker_name)
            if bd is not None and bd.broker_addrs.get(MixAll.MASTER_ID) == msg.store_host \
                    and w.consumer_offset > msg.queue_offset:
                return True
        return False

    async def query_message_by_key(self, topic: str, key: str, *, max_num: int = 64,
                                   begin_ms: int = 0, end_ms: int = LONG_MAX,
                                   unique: bool = False) -> list[MessageExt]:
        """QUERY_MESSAGE (12) on every master of the route, results re-filtered and merged."""
        route = await self.topic_route(topic)
        out: list[MessageExt] = []
        for addr in self._route_masters(route).values():
            out.extend(await self.api.query_message(
                addr, topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms,
                unique_key=unique, timeout=self.timeout))
        return out

    async def query_message_by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        """``queryMsgByUniqueKey``: QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY=true``, maxNum 32."""
        return await self.query_message_by_key(topic, uniq_key, max_num=32, unique=True)

    async def broker_addr_of(self, topic: str, broker_name: str) -> str:
        masters = self._route_masters(await self.topic_route(topic))
        addr = masters.get(broker_name)
        if addr is None:
            raise MQClientError(f"broker '{broker_name}' has no master in the route of '{topic}'")
        return addr

    async def pull(self, addr: str, mq: MessageQueue, offset: int, max_nums: int = 32, *,
                   group: str = _TOOLS_GROUP, sub_expression: str = "*") -> PullResult:
        """PULL_MESSAGE (11) without suspending and without committing (a pull consumer's read)."""
        sub = build_subscription_data(mq.topic, sub_expression)
        header = PullMessageRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PullSysFlag.build(commit_offset=False, suspend=False, subscription=True),
            commit_offset=0, suspend_timeout_millis=0, subscription=sub.sub_string,
            sub_version=0, expression_type="TAG", bname=mq.broker_name)
        return await self.api.pull_message(addr, header, self.timeout)

    async def queue_offsets(self, addr: str, mq: MessageQueue) -> tuple[int, int]:
        """(min offset, max offset) of one queue."""
        low = await self.api.get_min_offset(addr, mq, self.timeout)
        high = await self.api.get_max_offset(addr, mq, self.timeout)
        return low, high

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.api.search_offset(addr, mq, timestamp_ms, self.timeout)

    async def readable_queues(self, topic: str,
                              broker_name: str | None = None) -> list[tuple[str, MessageQueue]]:
        """(master address, queue) for every readable queue of the route, sorted."""
        route = await self.topic_route(topic)
        masters = self._route_masters(route)
        out: list[tuple[str, MessageQueue]] = []
        for qd in route.queue_datas:
            if broker_name is not None and qd.broker_name != broker_name:
                continue
            addr = masters.get(qd.broker_name)
            if addr is None or not qd.perm & 4:
                continue
            out.extend((addr, MessageQueue(topic, qd.broker_name, q))
                       for q in range(qd.read_queue_nums))
        return sorted(out, key=lambda x: x[1])

    async def send_message(self, topic: str, body: bytes, *, tags: str | None = None,
                           keys: str | None = None, broker_name: str | None = None,
                           queue_id: int | None = None,
                           producer_group: str | None = None) -> SendResult:
        """Send one message as upstream ``SendMessageCommand`` does: through a producer whose
        group is the current time in ms, so an unknown topic is auto-created through TBW102
        when the broker allows it; ``broker_name`` + ``queue_id`` pick the queue."""
        from aiorocketmq.client.producer import Producer  # the admin API needs a producer only here

        producer = Producer(producer_group or str(_now_ms()), config=self.config,
                            send_msg_timeout_ms=max(1, int(self.timeout * 1000)))
        await producer.start()
        try:
            msg = Message(topic, body, tags=tags, keys=keys)
            if broker_name is not None and queue_id is not None:
                return await producer.send(msg, MessageQueue(topic, broker_name, queue_id))
            if broker_name is not None:
                def on_broker(mqs: list[MessageQueue], _msg: Message, _arg: Any) -> MessageQueue:
                    mine = [mq for mq in mqs if mq.broker_name == broker_name]
                    if not mine:
                        raise MQClientError(
                            f"no writable queue of topic '{topic}' on broker {broker_name}")
                    return mine[_now_ms() % len(mine)]
                return await producer.send(msg, selector=on_broker)
            return await producer.send(msg)
        finally:
            await producer.shutdown()

    # -- nameserver KV and config ---------------------------------------------------------

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every nameserver."""
        header = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
        for addr in self.namesrv_addrs:
            await self.invoke_namesrv(RequestCode.PUT_KV_CONFIG, header, addr=addr)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every nameserver."""
        header = DeleteKVConfigRequestHeader(namespace=namespace, key=key)
        for addr in self.namesrv_addrs:
            await self.invoke_namesrv(RequestCode.DELETE_KV_CONFIG, header, addr=addr)

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101); None when absent (QUERY_NOT_FOUND)."""
        response = await self.invoke_namesrv(
            RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace=namespace, key=key),
            ok=(_SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if response.code != _SUCCESS:
            return None
        return GetKVConfigResponseHeader.from_ext_fields(response.ext_fields or {}).value

    async def update_order_conf(self, topic: str, order_conf: str, *, is_cluster: bool) -> str:
        """Upstream ``createOrUpdateOrderConf``: the ``ORDER_TOPIC_CONFIG`` KV entry of
        ``topic`` (``brokerName:queueNums;...``). For a cluster it is replaced; for one broker
        its ``brokerName:n`` pair is merged into what is there. Returns the value written."""
        value = order_conf
        if not is_cluster:
            pairs: dict[str, str] = {}
            try:
                old = await self.get_kv_config(MixAll.ORDER_TOPIC_CONFIG_NAMESPACE, topic)
            except MQBrokerError:
                old = None
            for pair in (old or "").split(";"):
                if pair.strip():
                    pairs[pair.split(":", 1)[0]] = pair
            pairs[order_conf.split(":", 1)[0]] = order_conf
            value = ";".join(pairs.values())
        await self.put_kv_config(MixAll.ORDER_TOPIC_CONFIG_NAMESPACE, topic, value)
        return value

    async def get_kv_list(self, namespace: str) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE (219); {} when the namespace is empty."""
        response = await self.invoke_namesrv(
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            GetKVListByNamespaceRequestHeader(namespace=namespace),
            ok=(_SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if response.code != _SUCCESS or not response.body:
            return {}
        return dict(KVTable.decode(response.body).table)

    async def get_namesrv_config(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG (319) from every nameserver: address -> properties."""
        out = {}
        for addr in self.namesrv_addrs:
            response = await self.invoke_namesrv(RequestCode.GET_NAMESRV_CONFIG, addr=addr)
            out[addr] = string_to_properties(bytes(response.body or b"").decode("utf-8", "replace"))
        return out

    async def update_namesrv_config(self, props: Mapping[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG (318) on every nameserver."""
        body = properties_to_string(props).encode("utf-8")
        for addr in self.namesrv_addrs:
            await self.invoke_namesrv(RequestCode.UPDATE_NAMESRV_CONFIG, body=body, addr=addr)

    async def wipe_write_perm(self, namesrv_addr: str, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (205) on one nameserver: the broker's topics lose write
        permission there; returns how many topics changed (``wipeTopicCount``)."""
        response = await self.invoke_namesrv(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER,
            WipeWritePermOfBrokerRequestHeader(broker_name=broker_name), addr=namesrv_addr)
        return WipeWritePermOfBrokerResponseHeader.from_ext_fields(
            response.ext_fields or {}).wipe_topic_count

    async def add_write_perm(self, namesrv_addr: str, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER (327) on one nameserver: the broker's topics become
        read-write there again; returns how many topics changed (``addTopicCount``)."""
        response = await self.invoke_namesrv(
            RequestCode.ADD_WRITE_PERM_OF_BROKER,
            AddWritePermOfBrokerRequestHeader(broker_name=broker_name), addr=namesrv_addr)
        return AddWritePermOfBrokerResponseHeader.from_ext_fields(
            response.ext_fields or {}).add_topic_count

    # -- broker housekeeping --------------------------------------------------------------

    async def cluster_addrs(self, cluster: str | None) -> list[str]:
        """Every broker address (masters and slaves) of ``cluster``, or of every cluster for
        ``None`` / ``""``: upstream ``ClusterInfo.retrieveAllAddrByCluster``'s targets."""
        info = await self.cluster_info()
        out: list[str] = []
        for cname, names in info.cluster_addr_table.items():
            if cluster and cname != cluster:
                continue
            for name in names:
                bd = info.broker_addr_table.get(name)
                if bd is not None:
                    out.extend(bd.broker_addrs.values())
        return out

    async def clean_expired_consume_queue(self, broker_addr: str) -> bool:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306): True once the broker answered SUCCESS."""
        await self.invoke(broker_addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        return True

    async def delete_expired_commit_log(self, broker_addr: str) -> bool:
        """DELETE_EXPIRED_COMMITLOG (329): the broker deletes expired commit-log files now."""
        await self.invoke(broker_addr, RequestCode.DELETE_EXPIRED_COMMITLOG)
        return True

    async def clean_unused_topic(self, broker_addr: str) -> bool:
        """CLEAN_UNUSED_TOPIC (316): the store drops queues of topics it no longer has."""
        await self.invoke(broker_addr, RequestCode.CLEAN_UNUSED_TOPIC)
        return True

    async def broker_consume_stats(self, broker_addr: str, *, is_order: bool = False,
                                   timeout: float | None = None) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS (317): every group's ``ConsumeStats`` on one broker."""
        response = await self.invoke(broker_addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                     GetConsumeStatsInBrokerHeader(is_order=is_order),
                                     timeout=timeout)
        if response.body is None:
            raise MQBrokerError.for_code(response.code, response.remark, broker_addr)
        return ConsumeStatsList.decode(response.body)

    async def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int,
                                  index: int, count: int,
                                  consumer_group: str | None = None
                                  ) -> QueryConsumeQueueResponseBody:
        """QUERY_CONSUME_QUEUE (321): ``count`` units of one consume queue from ``index``.

        Raises:
            MQClientError: the broker answered SUCCESS without a body (the index is outside
                the queue's files; its remark says so).
        """
        response = await self.invoke(broker_addr, RequestCode.QUERY_CONSUME_QUEUE,
                                     QueryConsumeQueueRequestHeader(
                                         topic=topic, queue_id=queue_id, index=index,
                                         count=count, consumer_group=consumer_group))
        if response.body is None:
            raise MQClientError(response.remark or "QUERY_CONSUME_QUEUE answered no body")
        return QueryConsumeQueueResponseBody.decode(response.body)

    async def view_broker_stats_data(self, broker_addr: str, stats_name: str,
                                     stats_key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA (315): minute, hour and day of one stats item."""
        response = await self.invoke(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                     ViewBrokerStatsDataRequestHeader(stats_name=stats_name,
                                                                      stats_key=stats_key))
        return BrokerStatsData.decode(response.body or b"{}")

    async def user_topic_configs(self, broker_addr: str, *,
                                 special_topic: bool = False) -> dict[str, TopicConfig]:
        """Upstream ``getUserTopicConfig``: GET_ALL_TOPIC_CONFIG (21) without the broker's
        system topics (GET_SYSTEM_TOPIC_LIST_FROM_BROKER, 325) and, unless
        ``special_topic``, without retry and DLQ topics."""
        response = await self.invoke(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        table = dict(TopicConfigSerializeWrapper.decode(response.body or b"{}")
                     .topic_config_table)
        response = await self.invoke(broker_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        system = set(TopicList.decode(response.body or b"{}").topic_list)
        return {t: c for t, c in table.items()
                if t not in system and (special_topic or not (
                    t.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
                    or t.startswith(MixAll.DLQ_GROUP_TOPIC_PREFIX)))}

    async def user_subscription_groups(self, broker_addr: str
                                       ) -> dict[str, SubscriptionGroupConfig]:
        """Upstream ``getUserSubscriptionGroup``: the broker's groups (201) without the
        system ones (``CID_RMQ_SYS_`` and the tools' own groups)."""
        groups = await self.subscription_groups(broker_addr)
        return {g: c for g, c in groups.items()
                if not MixAll.is_sys_consumer_group(g) and g not in _SYSTEM_GROUPS}

    # -- helpers for several brokers at once ----------------------------------------------

    async def gather(self, *coros: Any) -> list[Any]:
        """Run calls concurrently; the first failure propagates after the others finish."""
        results = await asyncio.gather(*coros, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return list(results)
