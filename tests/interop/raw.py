"""Our own protocol stack, used by the interop tests to set up and to check what ali-ons did.

``RawBroker`` wraps ``protocol.remoting_client.RemotingClient`` + ``client.api.MQClientAPI`` (typed
requests from ``protocol.headers``) and talks to one broker and its nameserver directly:

* ``create_topic``: UPDATE_AND_CREATE_TOPIC (17) to the broker; ali-ons never auto-creates
  topics (docs/PROTOCOL.md 9), and our broker answers only after the nameserver has the route.
* ``send``: SEND_MESSAGE_V2 (310) as the Java client builds it (UNIQ_KEY, WAIT, TAGS, KEYS).
* ``pull_queue``: PULL_MESSAGE (11) with the SUBSCRIPTION flag (a group that never sent a
  heartbeat has no subscription on the broker, so the flag is required, docs/PROTOCOL.md 4.2)
  and no suspend, read to the end of one queue.
* ``consumer_offset`` / ``max_offset``: QUERY_CONSUMER_OFFSET (14) / GET_MAX_OFFSET (30).
"""

# ASYNC109: ``timeout`` is each call's budget in seconds.
# ruff: noqa: ASYNC109

from __future__ import annotations

import time

from aiorocketmq.client.api import MQClientAPI, PullStatus, SendResult
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.protocol.bodies import MessageQueue, TopicRouteData
from aiorocketmq.protocol.codes import MessageConst, Perm, PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import QueryNotFoundError
from aiorocketmq.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeaderV2,
)
from aiorocketmq.protocol.message import Message, MessageExt, create_uniq_id, encode_properties
from aiorocketmq.protocol.remoting_client import RemotingClient

TIMEOUT = 5.0


class RawBroker:
    """One broker (and its nameserver) seen through our own client stack."""

    def __init__(self, namesrv_addr: str, broker_addr: str, broker_name: str) -> None:
        self.broker_addr = broker_addr
        self.broker_name = broker_name
        self.remoting = RemotingClient()
        self.remoting.update_namesrv_address_list(namesrv_addr)
        self.api = MQClientAPI(self.remoting, ClientConfig(namesrv_addr=namesrv_addr,
                                                           client_ip="127.0.0.1",
                                                           instance_name="interop-raw"))

    async def __aenter__(self) -> RawBroker:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.remoting.close()

    async def create_topic(self, topic: str, queues: int = 4) -> None:
        header = CreateTopicRequestHeader(
            topic=topic, default_topic="TBW102", read_queue_nums=queues,
            write_queue_nums=queues, perm=int(Perm.READ | Perm.WRITE),
            topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)
        request = RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                 header.to_ext_fields())
        response = await self.remoting.invoke(self.broker_addr, request, TIMEOUT)
        assert response.code == ResponseCode.SUCCESS, (
            f"UPDATE_AND_CREATE_TOPIC {topic} -> {response.code} {response.remark!r}")

    async def route(self, topic: str) -> TopicRouteData:
        return await self.api.get_topic_route_info(topic, TIMEOUT)

    async def send(self, topic: str, body: str, *, tags: str | None, keys: list[str],
                   queue_id: int, group: str = "INTEROP_RAW_PRODUCER") -> SendResult:
        msg = Message(topic, body.encode(), tags=tags, keys=keys)
        msg.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        header = SendMessageRequestHeaderV2(
            producer_group=group, topic=topic, default_topic="TBW102",
            default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
            born_timestamp=int(time.time() * 1000), flag=0,
            properties=encode_properties(msg.properties), reconsume_times=0,
            unit_mode=False, max_reconsume_times=None, batch=False)
        return await self.api.send_message(self.broker_addr, self.broker_name, msg, msg.body,
                                           header, TIMEOUT)

    async def pull_queue(self, topic: str, queue_id: int, *, group: str = "INTEROP_RAW_READER",
                         offset: int = 0, subscription: str = "*") -> list[MessageExt]:
        """Every message of one queue from ``offset`` on (the broker's tag filter applies)."""
        found: list[MessageExt] = []
        while True:
            header = PullMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                max_msg_nums=32, sys_flag=PullSysFlag.build(False, False, True),
                commit_offset=0, suspend_timeout_millis=0, subscription=subscription,
                sub_version=0, expression_type="TAG")
            result = await self.api.pull_message(self.broker_addr, header, TIMEOUT)
            if result.status is PullStatus.FOUND:
                found.extend(result.msg_found_list)
            elif result.status is PullStatus.NO_MATCHED_MSG:
                pass
            else:
                return found
            if result.next_begin_offset <= offset:
                return found
            offset = result.next_begin_offset

    async def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The group's committed offset, or None when the broker has none (code 22)."""
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic,
                                                  queue_id=queue_id)
        try:
            return await self.api.query_consumer_offset(self.broker_addr, header, TIMEOUT)
        except QueryNotFoundError:
            return None

    async def max_offset(self, topic: str, queue_id: int) -> int:
        return await self.api.get_max_offset(
            self.broker_addr, MessageQueue(topic, self.broker_name, queue_id), TIMEOUT)
