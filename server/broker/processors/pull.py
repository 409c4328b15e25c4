"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) (upstream ``PullMessageProcessor``; docs/PROTOCOL.md 6.1, 6.2).

Order of checks, codes and remarks as upstream: broker readable (NO_PERMISSION);
subscription group found or auto-created (SUBSCRIPTION_GROUP_NOT_EXIST); group
consume-enabled (NO_PERMISSION); topic exists (TOPIC_NOT_EXIST); topic readable
(NO_PERMISSION); ``0 <= queueId < readQueueNums`` (SYSTEM_ERROR). Subscription: from the
header with the SUBSCRIPTION flag (bad expression -> SUBSCRIPTION_PARSE_FAILED), else
from the group's heartbeat (SUBSCRIPTION_NOT_EXIST, broadcast refused -> NO_PERMISSION,
SUBSCRIPTION_NOT_LATEST when the stored subVersion is older). For a non-TAG (SQL92)
subscription the compiled filter comes from the header's expression (compiled once per
text: ``compile_sql92``'s cache; upstream ``ConsumerFilterManager.build``) or from the
group's heartbeat (``ConsumerFilterManager.get``: none -> FILTER_DATA_NOT_EXIST, an older
clientVersion than the request's subVersion -> FILTER_DATA_NOT_LATEST); then
``enablePropertyFilter`` must be on (SYSTEM_ERROR). The store selects by tags code and, for
SQL92, by the stored message's properties (``broker.filter.ExpressionMessageFilter``); a
parked pull is woken only by a message its filter selects.

Not upstream: an SQL92 expression in the header that does not compile is answered
SUBSCRIPTION_PARSE_FAILED. Upstream only asserts that it compiles (asserts are off in
production) and then serves every message unfiltered.

Store statuses -> codes (remark = the status name, the four header fields always set):
FOUND -> SUCCESS + body; NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE_IN_QUEUE -> PULL_NOT_FOUND
at offset 0 else PULL_OFFSET_MOVED; OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY ->
PULL_OFFSET_MOVED; OFFSET_OVERFLOW_ONE / OFFSET_FOUND_NULL -> PULL_NOT_FOUND;
NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING -> PULL_RETRY_IMMEDIATELY.

``suggestWhichBrokerId``: with ``slaveReadEnable``, the group's
``whichBrokerWhenConsumeSlowly`` when the store suggests reading from a slave (the reader
is far behind), else the group's ``brokerId``; without it, 0 (the master). On a SLAVE
(without ``offsetCheckInSlave``) PULL_OFFSET_MOVED becomes PULL_RETRY_IMMEDIATELY
suggesting the group's ``brokerId``, and COMMIT_OFFSET is not applied: the master owns
offsets (upstream ``PullMessageProcessor``). A slave serves found messages whatever
``slaveReadEnable`` says, as upstream (its PULL_RETRY_IMMEDIATELY is overwritten by the
status switch).

PULL_NOT_FOUND with the SUSPEND flag on first processing parks the request in the
``PullRequestHoldService`` (hold = ``suspendTimeoutMillis``, or ``shortPollingTimeMills``
with long polling off) and answers nothing now; a wake-up re-runs it with suspension
disallowed and answers with ``channel.send_response``. A full hold table answers
SYSTEM_BUSY. With COMMIT_OFFSET on first processing the group's offset for the queue
becomes ``commitOffset``, whatever the result.

The handler is a plain function: the store read is synchronous, so found messages are
answered inline. A TAG subscription sent with the SUBSCRIPTION flag is parsed once per
topic, expression and type (up to 4096 kept), not once per pull. Error answers carry ``"extFields":{}`` (upstream's empty response header).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import SubscriptionData, build_subscription_data
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import Perm, PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.filter import ExpressionType
from aiorocketmq.protocol.headers import (
    PullMessageRequestHeader,
    decode_header,
)

from ..filter import ConsumerFilterData, ConsumerFilterManager, ExpressionMessageFilter
from ..long_polling import PullRequest

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["PullMessageProcessor"]

log = get_logger("aiorocketmq.broker.pull")

_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_SUSPEND = PullSysFlag.SUSPEND
_COMMIT = PullSysFlag.COMMIT_OFFSET
_SUBSCRIPTION = PullSysFlag.SUBSCRIPTION

# Store status name -> response code; None = decided by the request offset (0 or not).
_STATUS_CODES: dict[str, int | None] = {
    "FOUND": ResponseCode.SUCCESS,
    "MESSAGE_WAS_REMOVING": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "NO_MATCHED_LOGIC_QUEUE": None,
    "NO_MESSAGE_IN_QUEUE": None,
    "NO_MATCHED_MESSAGE": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": ResponseCode.PULL_OFFSET_MOVED,
    "OFFSET_OVERFLOW_ONE": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_TOO_SMALL": ResponseCode.PULL_OFFSET_MOVED,
}


_TAG_FILTERS_MAX = 4096  # distinct (topic, TAG expression) pairs kept parsed


class PullMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self._b = broker
        # A TAG subscription sent with the pull (the SUBSCRIPTION flag: lite pull, the Spark
        # source) parsed once per (topic, expression, its type, filterSupportRetry): the
        # SubscriptionData and its ExpressionMessageFilter only read their inputs, so one
        # serves every pull.
        self._tag_filters: dict[tuple[str, str | None, str | None, bool],
                                tuple[SubscriptionData, ExpressionMessageFilter]] = {}

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.PULL_MESSAGE: self.process,
            RequestCode.LITE_PULL_MESSAGE: self.process,
        }

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self.process_request(channel, request, True)

    def execute_request_when_wakeup(self, channel: Channel, request: RemotingCommand) -> None:
        """Re-run a parked pull and answer it (``executeRequestWhenWakeup``)."""
        response = self.process_request(channel, request, False)
        if response is not None:
            response.opaque = request.opaque
            channel.send_response(response)

    def process_request(self, channel: Channel, request: RemotingCommand,
                        allow_suspend: bool) -> RemotingCommand | None:
        h = decode_header(PullMessageRequestHeader, request)
        b = self._b
        config = b.config

        def fail(code: int, remark: str) -> RemotingCommand:
            return request.create_response(code, remark, ext_fields={})

        if not Perm.readable(config.broker_permission):
            return fail(ResponseCode.NO_PERMISSION,
                        f"the broker[{config.broker_ip1}] pulling message is forbidden")
        group_cfg = b.subscription_groups.find(h.consumer_group)
        if group_cfg is None:
            return fail(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        f"subscription group [{h.consumer_group}] does not exist, {_FAQ}")
        if not group_cfg.consume_enable:
            return fail(ResponseCode.NO_PERMISSION,
                        f"subscription group no permission, {h.consumer_group}")
        sys_flag = h.sys_flag
        tc = b.topics.select(h.topic)
        if tc is None:
            log.error("broker.pull_topic_missing", topic=h.topic, consumer=channel.remote_addr)
            return fail(ResponseCode.TOPIC_NOT_EXIST,
                        f"topic[{h.topic}] not exist, apply first please! {_FAQ}")
        if not Perm.readable(tc.perm):
            return fail(ResponseCode.NO_PERMISSION,
                        f"the topic[{h.topic}] pulling message is forbidden")
        if h.queue_id < 0 or h.queue_id >= tc.read_queue_nums:
            remark = (f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                      f"topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                      f"consumer:[{channel.remote_addr}]")
            log.warning("broker.pull_bad_queue", remark=remark)
            return fail(ResponseCode.SYSTEM_ERROR, remark)

        sub: SubscriptionData | None
        filter_data: ConsumerFilterData | None = None
        message_filter: ExpressionMessageFilter | None = None
        tag_key = (h.topic, h.subscription, h.expression_type, config.filter_support_retry)
        cached = (self._tag_filters.get(tag_key) if sys_flag & _SUBSCRIPTION
                  and ExpressionType.is_tag_type(h.expression_type) else None)
        if cached is not None:
            sub, message_filter = cached
        elif sys_flag & _SUBSCRIPTION:
            try:
                sub = build_subscription_data(h.topic, h.subscription, h.expression_type)
                if not ExpressionType.is_tag_type(sub.expression_type):
                    filter_data = ConsumerFilterManager.build(
                        h.topic, h.consumer_group, h.subscription, h.expression_type, h.sub_version)
                    if filter_data is None:
                        raise ValueError(f"expression does not compile: {h.subscription}")
            except ValueError:
                log.warning("broker.pull_bad_subscription", group=h.consumer_group,
                            subscription=h.subscription)
                return fail(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                            "parse the consumer's subscription failed")
        else:
            group_info = b.consumers.get(h.consumer_group)
            if group_info is None:
                return fail(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's group info not exist{_FAQ}")
            if not group_cfg.consume_broadcast_enable and group_info.message_model == "BROADCASTING":
                return fail(ResponseCode.NO_PERMISSION,
                            f"the consumer group[{h.consumer_group}] can not consume by broadcast way")
            sub = group_info.subscriptions.get(h.topic)
            if sub is None:
                return fail(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's subscription not exist{_FAQ}")
            if sub.sub_version < h.sub_version:
                log.warning("broker.pull_subscription_not_latest", group=h.consumer_group,
                            expression=sub.sub_string)
                return fail(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                            "the consumer's subscription not latest")
            if not ExpressionType.is_tag_type(sub.expression_type):
                filter_data = b.consumer_filters.get(h.topic, h.consumer_group)
                if filter_data is None:
                    return fail(ResponseCode.FILTER_DATA_NOT_EXIST,
                                "The broker's consumer filter data is not exist!Your expression "
                                "may be wrong!")
                if filter_data.client_version < h.sub_version:
                    log.warning("broker.pull_filter_not_latest", group=h.consumer_group,
                                topic=h.topic, server_version=filter_data.client_version,
                                client_version=h.sub_version)
                    return fail(ResponseCode.FILTER_DATA_NOT_LATEST,
                                "the consumer's consumer filter data not latest")
        if sub.expression_type not in (None, "TAG") and not config.enable_property_filter:
            return fail(ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {sub.expression_type}")

        if message_filter is None:
            message_filter = ExpressionMessageFilter(sub, filter_data, b.consumer_filters,
                                                     support_retry=config.filter_support_retry)
            if (sys_flag & _SUBSCRIPTION and filter_data is None
                    and ExpressionType.is_tag_type(h.expression_type)
                    and len(self._tag_filters) < _TAG_FILTERS_MAX):
                self._tag_filters[tag_key] = (sub, message_filter)
        result = b.store.get_message(
            h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums,
            None if message_filter.code_set is None else message_filter.is_matched_by_consume_queue,
            message_filter.match_record if message_filter.needs_properties else None)
        response: RemotingCommand | None
        if result is None:
            response = fail(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
        else:
            status = result.status.name
            b.stats.on_get(h.consumer_group, h.topic, result.message_count,
                           result.buffer_total_size, status == "FOUND")
            code = _STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
            if code is None:
                code = (ResponseCode.PULL_OFFSET_MOVED if h.queue_offset != 0
                        else ResponseCode.PULL_NOT_FOUND)
            is_slave = b.store_config.is_slave
            if not config.slave_read_enable:
                suggest = 0
            elif result.suggest_pulling_from_slave:
                suggest = group_cfg.which_broker_when_consume_slowly
            else:
                suggest = group_cfg.broker_id
            if (code == ResponseCode.PULL_OFFSET_MOVED and is_slave
                    and not b.store_config.offset_check_in_slave):
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
                suggest = group_cfg.broker_id
            # PullMessageResponseHeader(...).to_ext_fields(), written out: one per pull.
            fields = {"suggestWhichBrokerId": str(suggest),
                      "nextBeginOffset": str(result.next_begin_offset),
                      "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
            body = None
            if code == ResponseCode.SUCCESS:
                body = result.body()
                result.release()
            elif code == ResponseCode.PULL_OFFSET_MOVED:
                log.warning("broker.pull_offset_moved", topic=h.topic, group=h.consumer_group,
                            queue_id=h.queue_id, request_offset=h.queue_offset,
                            new_offset=result.next_begin_offset, status=status)
            response = request.create_response(code, status, fields, body)
            if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & _SUSPEND:
                hold_ms = (h.suspend_timeout_millis if config.long_polling_enable
                           else config.short_polling_time_ms)
                loop_time = asyncio.get_running_loop().time()
                pull = PullRequest(channel, request, h.topic, h.queue_id, h.queue_offset,
                                   message_filter.code_set, loop_time + hold_ms / 1000,
                                   message_filter)
                if b.pull_hold.suspend(pull):
                    response = None
                else:
                    response = fail(ResponseCode.SYSTEM_BUSY,
                                    "[PULL_HOLD_FULL]too many suspended pulls, try again later")

        if allow_suspend and sys_flag & _COMMIT and not b.store_config.is_slave:
            b.offsets.commit_offset(channel.remote_addr, h.consumer_group, h.topic, h.queue_id,
                                    h.commit_offset)
        return response

