"""CONSUMER_SEND_MSG_BACK (36) and the ``%RETRY%`` -> ``%DLQ%`` redirection of plain sends
(upstream ``SendMessageProcessor.asyncConsumerSendMsgBack`` / ``handleRetryAndDLQ``).

Contract (docs/PROTOCOL.md 4.9, 6.4, 5.1):

* Send-back, checks in upstream's order: the group's subscription config (auto-created
  when allowed; else SUBSCRIPTION_GROUP_NOT_EXIST), broker writable (NO_PERMISSION), a
  group with ``retryQueueNums <= 0`` answers SUCCESS and drops the message, ``%RETRY%<group>``
  exists or is created (``retryQueueNums`` queues, perm 6), the record at ``offset``
  exists (SYSTEM_ERROR ``look message by offset failed, <offset>``).
* ``decide_send_back``: the max reconsume count is the header's ``maxReconsumeTimes``
  when the request version is >= V3_4_9 (121) and it is present, else the group's
  ``retryMaxTimes`` (16). ``reconsumeTimes >= max`` or ``delayLevel < 0`` sends the
  message to ``%DLQ%<group>`` (created with 1 queue and perm 6, as 4.9.7's
  ``PERM_WRITE | PERM_READ``; queue 0) with ``DELAY=0``; otherwise to a random queue of
  ``%RETRY%<group>`` with ``DELAY`` = the header level, or ``3 + reconsumeTimes`` when 0.
* The new record copies body (as stored), flag, sysflag, born time and host, store host;
  ``reconsumeTimes + 1``; properties add ``RETRY_TOPIC`` (the original topic, unless
  already set), ``WAIT=false`` (kept in the stored string, frame id 680) and
  ``ORIGIN_MESSAGE_ID`` (the original's, else the record's **offset** msg id). A positive
  ``DELAY`` makes the store park it in ``SCHEDULE_TOPIC_XXXX`` first (6.5).
* Answer: bare SUCCESS once stored (counted in the stats item ``SNDBCK_PUT_NUMS`` under
  ``<original topic>@<group>``); SYSTEM_ERROR with the put status name otherwise.
* ``RetryDlqSendHook`` (a ``SendMessageProcessor`` pre-store hook): a single send to
  ``%RETRY%<group>`` whose header ``reconsumeTimes`` (``j``) reaches the max (header ``l``
  when version >= 121, else the group's) is stored in ``%DLQ%<group>`` queue 0 instead.
  Upstream quirk kept: the ``DELAY=0`` it sets is overwritten when the request's
  properties are applied afterwards, so a ``DELAY`` sent by the client still parks the
  DLQ record in the schedule topic first. The answer keeps the requested queue id.

Upstream: ``broker/processor/SendMessageProcessor.java``, ``common/MixAll.java``
(``getRetryTopic``, ``getDLQTopic``), ``SendMessageProcessor.DLQ_NUMS_PER_GROUP`` (1).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import SubscriptionGroupConfig
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import (
    MessageConst,
    MixAll,
    MQVersion,
    Perm,
    RequestCode,
    ResponseCode,
    TopicSysFlag,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import ConsumerSendMsgBackRequestHeader, decode_header
from aiorocketmq.protocol.message import MessageExt, encode_properties, socket_address_to_bytes
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from ..controller import BrokerController
    from .send import SendContext

__all__ = [
    "SendBackProcessor",
    "RetryDlqSendHook",
    "SendBackDecision",
    "decide_send_back",
    "max_reconsume_times",
    "build_send_back_message",
    "DLQ_NUMS_PER_GROUP",
]

log = get_logger("aiorocketmq.broker.send_back")

DLQ_NUMS_PER_GROUP = 1  # SendMessageProcessor.DLQ_NUMS_PER_GROUP
_RW = int(Perm.READ | Perm.WRITE)
_FAQ_GROUP = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_STORED = (PutMessageStatus.PUT_OK,)


@dataclass(frozen=True, slots=True)
class SendBackDecision:
    """Where a sent-back message goes: topic, queue, the ``DELAY`` to store, DLQ or not."""

    topic: str
    queue_id: int
    delay_level: int
    dlq: bool


def max_reconsume_times(group_config: SubscriptionGroupConfig, header_max: int | None,
                        request_version: int) -> int:
    """The header's max when the client is >= V3_4_9 and sent one, else the group's."""
    if request_version >= MQVersion.V3_4_9 and header_max is not None:
        return header_max
    return group_config.retry_max_times


def decide_send_back(group: str, reconsume_times: int, delay_level: int, max_times: int,
                     retry_queue_nums: int, rand: Callable[[int], int] = random.randrange
                     ) -> SendBackDecision:
    """``asyncConsumerSendMsgBack``'s routing: DLQ past the max or on a negative level,
    else the retry topic with the header level or ``3 + reconsumeTimes``."""
    if reconsume_times >= max_times or delay_level < 0:
        return SendBackDecision(MixAll.dlq_topic(group), rand(99999999) % DLQ_NUMS_PER_GROUP, 0, True)
    level = delay_level if delay_level != 0 else 3 + reconsume_times
    return SendBackDecision(MixAll.retry_topic(group), rand(99999999) % max(retry_queue_nums, 1),
                            level, False)


def build_send_back_message(msg: MessageExt, decision: SendBackDecision) -> MessageExtBrokerInner:
    """The record the broker stores for a sent-back ``msg`` (module docstring)."""
    props = dict(msg.properties)
    props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(decision.delay_level)
    if not props.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
        # The broker's msgId of a looked-up record is its offset id, not the UNIQ_KEY.
        props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = msg.offset_msg_id
    return MessageExtBrokerInner(
        topic=decision.topic, queue_id=decision.queue_id, body=msg.body, flag=msg.flag,
        properties=props, properties_string=encode_properties(props), sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=socket_address_to_bytes(msg.born_host),
        store_host=socket_address_to_bytes(msg.store_host),
        reconsume_times=msg.reconsume_times + 1)


class SendBackProcessor:
    """CONSUMER_SEND_MSG_BACK; see the module docstring."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back}

    def consumer_send_msg_back(self, channel: Channel, request: RemotingCommand
                               ) -> RemotingCommand | Awaitable[RemotingCommand]:
        header = decode_header(ConsumerSendMsgBackRequestHeader, request)
        b = self._b
        response = request.create_response(ResponseCode.SYSTEM_ERROR)
        group_cfg = b.subscription_groups.find(header.group)
        if group_cfg is None:
            return _set(response, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        f"subscription group not exist, {header.group} {_FAQ_GROUP}")
        if not Perm.writeable(b.config.broker_permission):
            return _set(response, ResponseCode.NO_PERMISSION,
                        f"the broker[{b.config.broker_ip1}] sending message is forbidden")
        if group_cfg.retry_queue_nums <= 0:
            return _set(response, ResponseCode.SUCCESS, None)
        retry_topic = MixAll.retry_topic(header.group)
        sys_flag = TopicSysFlag.UNIT_SUB if header.unit_mode else 0
        tc = b.topics.create_topic_in_send_message_back_method(
            retry_topic, group_cfg.retry_queue_nums, _RW, sys_flag)
        if not Perm.writeable(tc.perm):
            return _set(response, ResponseCode.NO_PERMISSION,
                        f"the topic[{retry_topic}] sending message is forbidden")
        msg = b.store.look_message_by_offset(header.offset)
        if msg is None:
            return _set(response, ResponseCode.SYSTEM_ERROR,
                        f"look message by offset failed, {header.offset}")
        max_times = max_reconsume_times(group_cfg, header.max_reconsume_times, request.version)
        decision = decide_send_back(header.group, msg.reconsume_times, header.delay_level,
                                    max_times, group_cfg.retry_queue_nums)
        if decision.dlq:
            b.topics.create_topic_in_send_message_back_method(
                decision.topic, DLQ_NUMS_PER_GROUP, _RW, 0)
            log.info("broker.send_back_to_dlq", group=header.group, topic=msg.topic,
                     reconsume_times=msg.reconsume_times, max=max_times,
                     delay_level=header.delay_level, offset=header.offset)
        inner = build_send_back_message(msg, decision)
        return self._put(header.group, inner, response)

    async def _put(self, group: str, inner: MessageExtBrokerInner,
                   response: RemotingCommand) -> RemotingCommand:
        result: PutMessageResult = await self._b.store.put_message(inner)
        if result.status in _STORED:
            # incSendBackNums keys by the original topic (RETRY_TOPIC, always set above).
            self._b.stats.on_send_back(group, inner.properties[MessageConst.PROPERTY_RETRY_TOPIC])
            return _set(response, ResponseCode.SUCCESS, None)
        return _set(response, ResponseCode.SYSTEM_ERROR, result.status.name)


class RetryDlqSendHook:
    """``handleRetryAndDLQ`` as a send pre-store hook (single sends to ``%RETRY%`` topics)."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def __call__(self, ctx: SendContext) -> RemotingCommand | None:
        header = ctx.header
        topic = header.topic
        if ctx.batch or not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            return None
        group = topic[len(MixAll.RETRY_GROUP_TOPIC_PREFIX):]
        group_cfg = self._b.subscription_groups.find(group)
        if group_cfg is None:
            return _set(ctx.response, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        f"subscription group not exist, {group} {_FAQ_GROUP}")
        max_times = max_reconsume_times(group_cfg, header.max_reconsume_times, ctx.request.version)
        reconsume = header.reconsume_times or 0
        if reconsume < max_times:
            return None
        dlq = MixAll.dlq_topic(group)
        self._b.topics.create_topic_in_send_message_back_method(dlq, DLQ_NUMS_PER_GROUP, _RW, 0)
        inner = ctx.inner
        assert isinstance(inner, MessageExtBrokerInner)
        inner.topic = dlq
        inner.queue_id = random.randrange(99999999) % DLQ_NUMS_PER_GROUP
        log.info("broker.retry_send_to_dlq", group=group, reconsume_times=reconsume, max=max_times)
        return None


def _set(response: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
    response.code = code
    response.remark = remark
    return response
