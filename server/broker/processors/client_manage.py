"""HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG (upstream ``ClientManageProcessor``; docs/PROTOCOL.md 4.6).

* HEART_BEAT: for each consumer group whose subscription-group config exists (auto-created
  by default) the broker creates ``%RETRY%<group>`` (retryQueueNums queues, perm RW) and
  registers the channel and its subscriptions (``ConsumerManager.register_consumer``);
  every producer group registers the channel. Language and version come from the request
  header. Bare SUCCESS without extFields.
* UNREGISTER_CLIENT: one producer and/or consumer group; SUCCESS with an empty header
  (``"extFields":{}`` in JSON, as upstream's ``UnregisterClientResponseHeader``).
* CHECK_CLIENT_CONFIG (upstream ``checkClientConfig``): no subscription or a TAG expression
  -> SUCCESS; any other type without ``enablePropertyFilter`` -> SYSTEM_ERROR "The broker
  does not support consumer to filter message by <type>" (a stock consumer then fails to
  start); else the expression must compile (``broker.filter.compile_expression``), or
  SUBSCRIPTION_PARSE_FAILED with upstream's remark (``cause.toString()`` of its
  MQFilterException; none for an unknown type or a null expression, whose
  NullPointerException has no message).

All three handlers are plain functions: they never wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import CheckClientRequestBody, HeartbeatData
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import MixAll, Perm, RequestCode, ResponseCode, TopicSysFlag
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError, ProtocolError
from aiorocketmq.protocol.filter import ExpressionType, FilterError
from aiorocketmq.protocol.headers import UnregisterClientRequestHeader, decode_header

from ..client_manager import ClientChannelInfo
from ..filter.consumer_filter import compile_expression

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["ClientManageProcessor"]

_RW = int(Perm.READ | Perm.WRITE)

log = get_logger("aiorocketmq.broker.client_manage")


class ClientManageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heart_beat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            raise HeaderError("HEART_BEAT without a HeartbeatData body")
        try:
            data = HeartbeatData.decode(request.body)
        except ProtocolError as exc:
            raise HeaderError(f"HEART_BEAT body does not decode: {exc}") from exc
        b = self._b
        info = ClientChannelInfo(channel, data.client_id, request.language, request.version)
        for consumer in data.consumer_data_set:
            group_cfg = b.subscription_groups.find(consumer.group_name)
            notify = True
            if group_cfg is not None:
                notify = group_cfg.notify_consumer_ids_changed_enable
                sys_flag = TopicSysFlag.UNIT_SUB if consumer.unit_mode else 0
                b.topics.create_topic_in_send_message_back_method(
                    MixAll.retry_topic(consumer.group_name), group_cfg.retry_queue_nums, _RW,
                    sys_flag)
            b.consumers.register_consumer(
                consumer.group_name, info, consumer.consume_type or "",
                consumer.message_model or "", consumer.consume_from_where or "",
                consumer.subscription_data_set, notify)
        for producer in data.producer_data_set:
            b.producers.register_producer(producer.group_name, info)
        return request.create_response(ResponseCode.SUCCESS)

    def unregister_client(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(UnregisterClientRequestHeader, request)
        b = self._b
        info = ClientChannelInfo(channel, header.client_id, request.language, request.version)
        if header.producer_group is not None:
            b.producers.unregister_producer(header.producer_group, info)
        if header.consumer_group is not None:
            cfg = b.subscription_groups.find(header.consumer_group)
            notify = True if cfg is None else cfg.notify_consumer_ids_changed_enable
            b.consumers.unregister_consumer(header.consumer_group, info, notify)
        return request.create_response(ResponseCode.SUCCESS, ext_fields={})

    def check_client_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.body:
            try:
                body = CheckClientRequestBody.decode(request.body)
            except ProtocolError as exc:
                raise HeaderError(f"CHECK_CLIENT_CONFIG body does not decode: {exc}") from exc
            sub = body.subscription_data
            if sub is not None and not ExpressionType.is_tag_type(sub.expression_type):
                if not self._b.config.enable_property_filter:
                    return request.create_response(
                        ResponseCode.SYSTEM_ERROR,
                        "The broker does not support consumer to filter message by "
                        f"{sub.expression_type}")
                try:
                    compile_expression(sub.expression_type, sub.sub_string)
                except FilterError as exc:
                    log.warning("broker.check_client_config_parse_failed", client_id=body.client_id,
                                group=body.group, expression=sub.sub_string, error=exc.remark[:300])
                    remark = None if exc.java_class == "java.lang.NullPointerException" else exc.remark
                    return request.create_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark)
        return request.create_response(ResponseCode.SUCCESS)
