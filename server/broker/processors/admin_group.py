"""Consumer-group admin requests (upstream ``AdminBrokerProcessor`` + ``Broker2Client``; docs/PROTOCOL.md 3.4, 3.5, 4.11).

``handlers(controller)`` returns the table:

* UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (body ``SubscriptionGroupConfig``),
  GET_ALL_SUBSCRIPTIONGROUP_CONFIG, DELETE_SUBSCRIPTIONGROUP (``removeOffset`` drops the
  group's offsets too).
* GET_CONSUME_STATS: one entry per *read* queue of the given topic, or of every topic the
  group has offsets for (topics the group does not subscribe to are skipped while it has
  live subscriptions); ``lastTimestamp`` is the store time of message
  ``consumerOffset - 1`` (0 if none); ``consumeTps`` from the GROUP_GET_NUMS minute view.
* GET_CONSUMER_CONNECTION_LIST (absent group: CONSUMER_NOT_ONLINE
  ``the consumer group[<g>] not online``, frame 1035), GET_PRODUCER_CONNECTION_LIST
  (SYSTEM_ERROR ``the producer group[<g>] not exist``), GET_ALL_PRODUCER_INFO (every
  producer group's instances, ``ProducerTableInfo``; ``remoteIP`` as Java's
  ``/host:port``), QUERY_TOPIC_CONSUME_BY_WHO (live
  subscribers plus groups holding offsets), GET_ALL_CONSUMER_OFFSET, CLONE_GROUP_OFFSET,
  QUERY_CONSUME_TIME_SPAN, QUERY_CORRECTION_OFFSET.
* INVOKE_BROKER_TO_RESET_OFFSET: per write queue, the offset for the timestamp (-1: max
  offset) if ``isForce`` or it is below the consumer's offset, else the consumer's offset;
  a queue without a consumer offset fails the request (SYSTEM_ERROR ``THe consumer group
  <g> not exist``, upstream's spelling). RESET_CONSUMER_CLIENT_OFFSET goes oneway to every
  online consumer (the list form of the body when the admin request's language is CPP);
  no consumer online: CONSUMER_NOT_ONLINE. SUCCESS carries the offset table.
* INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GET_CONSUMER_STATUS_FROM_CLIENT (5 s) to each
  consumer (or the one at ``clientAddr``), answers ``GetConsumerStatusBody``.
* GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY: forwarded to the client's own
  channel (``callConsumer``): a new request under the broker's opaque carrying the admin
  request's extFields verbatim (309 adds ``brokerName`` and replaces the body by the
  stored message the offset id points at), 10 s budget; the client's answer is relayed
  with its code, remark, extFields and body. Not online: SYSTEM_ERROR
  ``The Consumer <g> <id> not online``; timeout: CONSUME_MSG_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    GetConsumerStatusBody,
    GroupList,
    MessageQueue,
    ProducerConnection,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    QueueTimeSpan,
    ResetOffsetBody,
    SubscriptionGroupConfig,
)
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import LanguageCode, MQVersion, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ProtocolError, RemotingError, RemotingTimeoutError
from aiorocketmq.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    decode_header,
)
from aiorocketmq.protocol.message import MessageDecodeError, decode_offset_msg_id

from .admin import refuse_on_slave
from .admin_broker import _offset_wrapper, broker_stats_of

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["AdminGroupProcessor", "handlers", "CALL_CLIENT_TIMEOUT"]

log = get_logger("aiorocketmq.broker.admin")

CALL_CLIENT_TIMEOUT = 10.0  # Broker2Client.callClient: invokeSync(..., 10000)
RESET_ONEWAY_TIMEOUT = 5.0  # Broker2Client.resetOffset: invokeOneway(..., 5000)
CONSUMER_STATUS_TIMEOUT = 5.0  # Broker2Client.getConsumeStatus: invokeSync(..., 5000)
_LONG_MAX = 2**63 - 1


def _lang(code: int) -> LanguageCode:
    try:
        return LanguageCode(code)
    except ValueError:
        return LanguageCode.OTHER


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AdminGroupProcessor:
    """Subscription groups, offsets and consumer calls; see the module docstring."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker
        self.stats = broker_stats_of(broker)

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            RequestCode.QUERY_CORRECTION_OFFSET: self.query_correction_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }

    # -- subscription groups --------------------------------------------------------------

    def update_subscription_group(self, channel: Channel,
                                  request: RemotingCommand) -> RemotingCommand:
        if (refused := refuse_on_slave(self._b, request)) is not None:
            return refused
        log.info("broker.update_subscription_group", peer=channel.remote_addr)
        if request.body:
            try:
                cfg = SubscriptionGroupConfig.decode(bytes(request.body))
            except ProtocolError as exc:
                return request.create_response(ResponseCode.SYSTEM_ERROR,
                                               f"bad SubscriptionGroupConfig body: {exc}")
            self._b.subscription_groups.update(cfg)
        return request.create_response(ResponseCode.SUCCESS)

    def get_all_subscription_group(self, channel: Channel,
                                   request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SUCCESS,
                                       body=self._b.subscription_groups.encode())

    def delete_subscription_group(self, channel: Channel,
                                  request: RemotingCommand) -> RemotingCommand:
        if (refused := refuse_on_slave(self._b, request)) is not None:
            return refused
        h = decode_header(DeleteSubscriptionGroupRequestHeader, request)
        log.info("broker.delete_subscription_group", group=h.group_name, peer=channel.remote_addr)
        self._b.subscription_groups.delete(h.group_name)
        if h.remove_offset:
            self._b.offsets.remove_offset(h.group_name)
            self._b.offsets.mark_dirty()
        self.stats.on_group_deleted(h.group_name)
        return request.create_response(ResponseCode.SUCCESS)

    # -- consume stats --------------------------------------------------------------------

    def _skip_topic(self, group: str, topic: str) -> bool:
        """A group with live subscriptions is only reported for the topics it subscribes to."""
        info = self._b.consumers.get(group)
        return info is not None and bool(info.subscriptions) and topic not in info.subscriptions

    def get_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumeStatsRequestHeader, request)
        b = self._b
        group = h.consumer_group
        topics = [h.topic] if h.topic and h.topic.strip() else sorted(
            b.offsets.which_topic_by_consumer(group))
        stats = ConsumeStats()
        broker_name = b.config.broker_name
        for topic in topics:
            tc = b.topics.select(topic)
            if tc is None or self._skip_topic(group, topic):
                continue
            for qid in range(tc.read_queue_nums):
                stats.offset_table[MessageQueue(topic, broker_name, qid)] = _offset_wrapper(
                    b, b.store, group, topic, qid)
            stats.consume_tps += self.stats.tps_group_get_nums(group, topic)
        return request.create_response(ResponseCode.SUCCESS, body=stats.encode())

    # -- connections ----------------------------------------------------------------------

    def get_consumer_connection_list(self, channel: Channel,
                                     request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerConnectionListRequestHeader, request)
        info = self._b.consumers.get(h.consumer_group)
        if info is None:
            return request.create_response(ResponseCode.CONSUMER_NOT_ONLINE,
                                           f"the consumer group[{h.consumer_group}] not online")
        body = ConsumerConnection(
            connection_set=[Connection(c.client_id, ch.remote_addr, _lang(c.language), c.version)
                            for ch, c in info.channels.items()],
            subscription_table=dict(info.subscriptions),
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where)
        return request.create_response(ResponseCode.SUCCESS, body=body.encode())

    def get_producer_connection_list(self, channel: Channel,
                                     request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetProducerConnectionListRequestHeader, request)
        channels = self._b.producers.groups.get(h.producer_group)
        if channels is None:
            return request.create_response(ResponseCode.SYSTEM_ERROR,
                                           f"the producer group[{h.producer_group}] not exist")
        body = ProducerConnection([Connection(c.client_id, ch.remote_addr, _lang(c.language), c.version)
                                   for ch, c in channels.items()])
        return request.create_response(ResponseCode.SUCCESS, body=body.encode())

    def get_all_producer_info(self, channel: Channel,
                              request: RemotingCommand) -> RemotingCommand:
        """``ProducerManager.getProducerTable``: ``{"data": {group: [ProducerInfo]}}``."""
        # last_update is the event loop's clock; stock sends epoch milliseconds.
        now_ms, now = _now_ms(), asyncio.get_running_loop().time()
        data: dict[str, list[dict[str, Any]]] = {}
        for group, channels in self._b.producers.groups.items():
            data[group] = [{
                "clientId": c.client_id, "language": _lang(c.language).name,
                "lastUpdateTimestamp": now_ms - int((now - c.last_update) * 1000),
                "remoteIP": "/" + ch.remote_addr, "version": c.version,
            } for ch, c in channels.items()]
        return request.create_response(ResponseCode.SUCCESS,
                                       body=fastjson.dumps({"data": data}))

    def query_topic_consume_by_who(self, channel: Channel,
                                   request: RemotingCommand) -> RemotingCommand:
        h = decode_header(QueryTopicConsumeByWhoRequestHeader, request)
        groups = self._b.consumers.query_topic_consume_by_who(h.topic)
        groups |= self._b.offsets.which_group_by_topic(h.topic)
        return request.create_response(ResponseCode.SUCCESS,
                                       body=GroupList(sorted(groups)).encode())

    # -- offsets --------------------------------------------------------------------------

    def get_all_consumer_offset(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        return request.create_response(ResponseCode.SUCCESS, body=self._b.offsets.encode())

    def clone_group_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(CloneGroupOffsetRequestHeader, request)
        b = self._b
        topics = ({h.topic} if h.topic and h.topic.strip()
                  else b.offsets.which_topic_by_consumer(h.src_group))
        for topic in topics:
            if b.topics.select(topic) is None:
                log.warning("broker.clone_group_offset_no_topic", topic=topic)
                continue
            if not h.offline and self._skip_topic(h.src_group, topic):
                continue
            # Upstream passes the header's topic here, which clones nothing when it is
            # blank; cloning the topic being iterated is what the command means.
            b.offsets.clone_offset(h.src_group, h.dest_group, topic)
        b.offsets.mark_dirty()
        return request.create_response(ResponseCode.SUCCESS)

    async def reset_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ResetOffsetRequestHeader, request)
        log.info("broker.reset_offset", topic=h.topic, group=h.group, timestamp=h.timestamp,
                 force=h.is_force, peer=channel.remote_addr)
        b = self._b
        tc = b.topics.select(h.topic)
        if tc is None:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        table: dict[MessageQueue, int] = {}
        broker_name = b.config.broker_name
        for qid in range(tc.write_queue_nums):
            consumer_offset = b.offsets.query_offset(h.group, h.topic, qid)
            if consumer_offset == -1:
                return request.create_response(ResponseCode.SYSTEM_ERROR,
                                               f"THe consumer group <{h.group}> not exist")
            if h.timestamp == -1:
                target = b.store.get_max_offset_in_queue(h.topic, qid)
            else:
                target = b.store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            target = max(target, 0)
            mq = MessageQueue(h.topic, broker_name, qid)
            table[mq] = target if h.is_force or target < consumer_offset else consumer_offset
        body = ResetOffsetBody(table)
        push_body = body.encode_for_c() if request.language == LanguageCode.CPP else body.encode()
        push_header = ResetOffsetRequestHeader(topic=h.topic, group=h.group,
                                               timestamp=h.timestamp, is_force=False)
        info = b.consumers.get(h.group)
        if info is None or not info.channels:
            return request.create_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {h.group} "
                f"Topic: {h.topic} Timestamp: {h.timestamp}")
        for ch, client in list(info.channels.items()):
            if client.version < MQVersion.V3_0_7_SNAPSHOT:
                return request.create_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={MQVersion.desc(client.version)}")
            push = RemotingCommand.create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                                  push_header.to_ext_fields(), push_body)
            try:
                await ch.invoke_oneway(push, RESET_ONEWAY_TIMEOUT)
            except RemotingError as exc:
                log.error("broker.reset_offset_push_failed", client_id=client.client_id,
                          error=str(exc))
        return request.create_response(ResponseCode.SUCCESS, body=body.encode())

    async def get_consumer_status(self, channel: Channel,
                                  request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerStatusRequestHeader, request)
        info = self._b.consumers.get(h.group)
        if info is None or not info.channels:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"No Any Consumer online in the consumer group: [{h.group}]")
        origin = h.client_addr if h.client_addr and h.client_addr.strip() else None
        ask = GetConsumerStatusRequestHeader(topic=h.topic, group=h.group)
        table: dict[str, dict[MessageQueue, int]] = {}
        for ch, client in list(info.channels.items()):
            if client.version < MQVersion.V3_0_7_SNAPSHOT:
                return request.create_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={MQVersion.desc(client.version)}")
            if origin is not None and origin != client.client_id:
                continue
            cmd = RemotingCommand.create_request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                                                 ask.to_ext_fields())
            try:
                reply = await ch.invoke(cmd, CONSUMER_STATUS_TIMEOUT)
                if reply.code == ResponseCode.SUCCESS and reply.body:
                    table[client.client_id] = GetConsumerStatusBody.decode(
                        bytes(reply.body)).message_queue_table
            except (RemotingError, ProtocolError) as exc:
                log.error("broker.get_consumer_status_failed", client_id=client.client_id,
                          error=str(exc))
            if origin is not None:
                break
        body = GetConsumerStatusBody(consumer_table=table)
        return request.create_response(ResponseCode.SUCCESS, body=body.encode())

    def query_consume_time_span(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        h = decode_header(QueryConsumeTimeSpanRequestHeader, request)
        b = self._b
        tc = b.topics.select(h.topic)
        if tc is None:
            return request.create_response(ResponseCode.TOPIC_NOT_EXIST,
                                           f"topic[{h.topic}] not exist")
        store = b.store
        spans: list[QueueTimeSpan] = []
        for qid in range(tc.write_queue_nums):
            min_time = store.get_earliest_message_time(h.topic, qid)
            max_offset = store.get_max_offset_in_queue(h.topic, qid)
            max_time = store.get_message_store_timestamp(h.topic, qid, max_offset - 1)
            consumer_offset = b.offsets.query_offset(h.group, h.topic, qid)
            if consumer_offset > 0:
                consume_time = store.get_message_store_timestamp(h.topic, qid, consumer_offset - 1)
            else:
                consume_time = min_time
            delay = 0
            if consumer_offset < max_offset:
                delay = _now_ms() - store.get_message_store_timestamp(h.topic, qid, consumer_offset)
            spans.append(QueueTimeSpan(MessageQueue(h.topic, b.config.broker_name, qid),
                                       min_time, max_time, consume_time, delay))
        return request.create_response(ResponseCode.SUCCESS,
                                       body=QueryConsumeTimeSpanBody(spans).encode())

    def query_correction_offset(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        """Per queue the lowest offset among the topic's groups (``filterGroups`` excluded),
        or Long.MAX_VALUE where it exceeds ``compareGroup``'s offset."""
        h = decode_header(QueryCorrectionOffsetHeader, request)
        b = self._b
        excluded = {g for g in (h.filter_groups or "").split(",") if g}
        correction: dict[int, int] = {}
        for key, table in b.offsets.offset_table.items():
            topic, _, group = key.partition("@")
            if topic != h.topic or group in excluded:
                continue
            for qid, offset in table.items():
                if offset >= b.store.get_min_offset_in_queue(h.topic, qid):
                    old = correction.get(qid)
                    correction[qid] = offset if old is None else min(old, offset)
        for qid, offset in (b.offsets.query_offsets(h.compare_group, h.topic) or {}).items():
            current = correction.get(qid)
            if current is not None and current > offset:
                correction[qid] = _LONG_MAX
        return request.create_response(ResponseCode.SUCCESS,
                                       body=QueryCorrectionOffsetBody(correction).encode())

    # -- calls forwarded to a consumer ----------------------------------------------------

    async def _call_consumer(self, code: int, request: RemotingCommand, group: str,
                             client_id: str | None,
                             body: bytes | bytearray | memoryview | None) -> RemotingCommand:
        """``callConsumer``: relay ``request`` to the client's channel and its answer back."""
        client = self._b.consumers.find_channel(group, client_id or "")
        if client is None:
            return request.create_response(ResponseCode.SYSTEM_ERROR,
                                           f"The Consumer <{group}> <{client_id}> not online")
        if client.version < MQVersion.V3_1_8_SNAPSHOT:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{MQVersion.desc(client.version)}> too low "
                "to finish, please upgrade it to V3_1_8_SNAPSHOT")
        forward = RemotingCommand.create_request(
            code, dict(request.ext_fields) if request.ext_fields is not None else None, body)
        try:
            reply = await client.channel.invoke(forward, CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            return request.create_response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except RemotingError as exc:
            return request.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        relayed = request.create_response(reply.code, reply.remark, reply.ext_fields, reply.body)
        # Upstream hands the client's command back as the response: keep its language/version.
        relayed.language = reply.language
        relayed.version = reply.version
        return relayed

    async def get_consumer_running_info(self, channel: Channel,
                                        request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerRunningInfoRequestHeader, request)
        return await self._call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request,
                                         h.consumer_group, h.client_id, request.body)

    async def consume_message_directly(self, channel: Channel,
                                       request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ConsumeMessageDirectlyResultRequestHeader, request)
        ext: dict[str, str] = dict(request.ext_fields or {})
        ext["brokerName"] = self._b.config.broker_name
        body: Any = request.body
        try:
            _, offset = decode_offset_msg_id(h.msg_id or "")
            record = self._b.store.select_one_message_by_offset(offset)
            if record is not None:
                body = record
        except MessageDecodeError as exc:
            log.warning("broker.consume_message_directly_bad_msg_id", msg_id=h.msg_id,
                        error=str(exc))
        request.ext_fields = ext
        return await self._call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request,
                                         h.consumer_group, h.client_id, body)


def handlers(controller: BrokerController) -> dict[int, Handler]:
    """The table for consumer-group admin requests (call after the store has started)."""
    return AdminGroupProcessor(controller).handlers()
