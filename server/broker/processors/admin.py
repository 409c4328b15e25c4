"""Admin requests (upstream ``AdminBrokerProcessor``), the broker's default processor.

Started with the topic codes the core needs (docs/PROTOCOL.md 4.11, 6.7):

* UPDATE_AND_CREATE_TOPIC: topic name checked (SYSTEM_ERROR with ``TopicValidator``'s
  remark), system topics refused ("The topic[<t>] is conflict with system topic."), the
  config stored (DataVersion + 1, ``topics.json``), then a two-way REGISTER_BROKER carrying
  only that topic is awaited before answering, as upstream. The SUCCESS answer carries
  the remark ``not set any response code``, as the 4.9.7 broker's does (frame 995).
* DELETE_TOPIC_IN_BROKER: same checks; the config is removed and the store forgets the
  topic's queues.

``handlers()`` is a table the admin engineer extends; ``unknown`` answers every other code
with REQUEST_CODE_NOT_SUPPORTED and remark ``" request type <code> not supported"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    decode_header,
)

from ..topic_config import validate_topic

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["AdminBrokerProcessor"]

log = get_logger("aiorocketmq.broker.admin")

_NOT_SET = "not set any response code"  # RemotingCommand.createResponseCommand's default remark
_ON_SLAVE = ("Can't modify topic or subscription group from slave broker, "
             "please execute it from master broker.")


def refuse_on_slave(broker: BrokerController, request: RemotingCommand) -> RemotingCommand | None:
    """A slave's topics and groups are copies of its master's (SlaveSynchronize): creating
    or deleting one there is refused first thing, as upstream AdminBrokerProcessor.validateSlave."""
    if broker.store_config.is_slave:
        return request.create_response(ResponseCode.SYSTEM_ERROR, _ON_SLAVE)
    return None


class AdminBrokerProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
        }

    def unknown(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        log.warning("broker.request_code_not_supported", code=request.code, peer=channel.remote_addr)
        return request.create_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f" request type {request.code} not supported")

    def _check_topic(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        remark = validate_topic(topic)
        if remark is None and self._b.topics.is_system_topic(topic):
            remark = f"The topic[{topic}] is conflict with system topic."
        if remark is not None:
            return request.create_response(ResponseCode.SYSTEM_ERROR, remark)
        return None

    async def update_and_create_topic(self, channel: Channel,
                                      request: RemotingCommand) -> RemotingCommand:
        if (refused := refuse_on_slave(self._b, request)) is not None:
            return refused
        h = decode_header(CreateTopicRequestHeader, request)
        log.info("broker.update_and_create_topic", topic=h.topic, peer=channel.remote_addr)
        refused = self._check_topic(request, h.topic)
        if refused is not None:
            return refused
        tc = TopicConfig(h.topic, h.read_queue_nums, h.write_queue_nums, h.perm,
                         h.topic_filter_type, h.topic_sys_flag or 0, h.order)
        topics = self._b.topics
        topics.update_topic_config(tc)
        await self._b.namesrv.register_topic(tc, topics.build_serialize_wrapper([]))
        return request.create_response(ResponseCode.SUCCESS, _NOT_SET)

    def delete_topic(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if (refused := refuse_on_slave(self._b, request)) is not None:
            return refused
        h = decode_header(DeleteTopicRequestHeader, request)
        log.info("broker.delete_topic", topic=h.topic, peer=channel.remote_addr)
        refused = self._check_topic(request, h.topic)
        if refused is not None:
            return refused
        topics = self._b.topics
        topics.delete_topic_config(h.topic)
        self._b.stats.on_topic_deleted(h.topic)
        self._b.store.clean_unused_topic(set(topics.topic_config_table))
        return request.create_response(ResponseCode.SUCCESS)
