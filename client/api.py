"""MQClientAPI: one typed coroutine per request a client sends, with upstream's semantics.

Upstream ``org.apache.rocketmq.client.impl.MQClientAPIImpl`` (docs/PROTOCOL.md 3.2, 3.3, 3.7,
4.1-4.10). Each call builds the request from a typed header (``protocol.headers``) or
body (``protocol.bodies``), sends it through ``RemotingClient`` with the caller's
timeout (seconds: one budget for the whole call) and turns the response into a value:

* a response code the call does not accept raises ``MQBrokerError.for_code(code,
  remark, addr)`` (so ``TopicNotExistError`` for a route of an unknown topic);
* transport failures raise the ``RemotingError`` family unchanged.

Sends accept SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE
(the message is stored) and build a ``SendResult``; pulls map 0/19/20/21 to
``PullStatus`` and decode the body. UPDATE_CONSUMER_OFFSET from the persist task,
END_TRANSACTION and (optionally) UNLOCK_BATCH_MQ are oneway, as upstream. Only HEART_BEAT
carries the configured ``language`` (``client.config`` explains the choice).

``process_pull_result`` is upstream ``PullAPIWrapper.processPullResult``: the exact
client-side tag filter and the ``MIN_OFFSET``/``MAX_OFFSET`` properties, which the
consumers apply to what ``pull_message`` returns.
"""

# ASYNC109: ``timeout`` is each call's budget, handed to the channel's per-request timer.
# ruff: noqa: ASYNC109

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiorocketmq.protocol.bodies import (
    CheckClientRequestBody,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
    TopicList,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from aiorocketmq.protocol.channel import ResponseFuture
from aiorocketmq.protocol.codes import MessageConst, MixAll, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from aiorocketmq.protocol.message import Message, MessageExt, decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient

from .config import ClientConfig

__all__ = [
    "MQClientAPI",
    "SendStatus",
    "SendResult",
    "PullStatus",
    "PullResult",
    "process_pull_result",
]

_SUCCESS = int(ResponseCode.SUCCESS)
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


class SendStatus(enum.Enum):
    """``SendStatus``: the message is stored in all four cases."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_SEND_STATUS_BY_CODE = {
    int(ResponseCode.SUCCESS): SendStatus.SEND_OK,
    int(ResponseCode.FLUSH_DISK_TIMEOUT): SendStatus.FLUSH_DISK_TIMEOUT,
    int(ResponseCode.FLUSH_SLAVE_TIMEOUT): SendStatus.FLUSH_SLAVE_TIMEOUT,
    int(ResponseCode.SLAVE_NOT_AVAILABLE): SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class SendResult:
    """``SendResult``: ``msg_id`` is the UNIQ_KEY (comma-joined for a batch),
    ``offset_msg_id`` the broker's offset id(s)."""

    status: SendStatus
    msg_id: str | None
    offset_msg_id: str | None
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = MixAll.DEFAULT_TRACE_REGION_ID
    trace_on: bool = True


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS_BY_CODE = {
    int(ResponseCode.SUCCESS): PullStatus.FOUND,
    int(ResponseCode.PULL_NOT_FOUND): PullStatus.NO_NEW_MSG,
    int(ResponseCode.PULL_RETRY_IMMEDIATELY): PullStatus.NO_MATCHED_MSG,
    int(ResponseCode.PULL_OFFSET_MOVED): PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    """``PullResult`` (+ ``PullResultExt.suggestWhichBrokerId``)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msg_found_list: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = MixAll.MASTER_ID
    # FOUND pulled with decode=False: the stored records as the broker sent them
    # (msg_found_list stays empty; spark_sink decodes them straight into Arrow columns)
    body: bytes | None = None


def process_pull_result(mq: MessageQueue, result: PullResult,
                        subscription: SubscriptionData | None) -> PullResult:
    """``PullAPIWrapper.processPullResult``: exact tag filter, transaction id, offsets.

    The broker filters by tag hash; two tags with one hash both pass it, so messages whose
    ``TAGS`` is not in the subscription's tag set are dropped here (not for class-filter
    or SQL92 subscriptions, which have no tag set).
    """
    if result.status is not PullStatus.FOUND:
        return result
    msgs = result.msg_found_list
    if subscription is not None and subscription.tags_set and not subscription.class_filter_mode:
        tags = set(subscription.tags_set)
        msgs = [m for m in msgs if m.properties.get(MessageConst.PROPERTY_TAGS) in tags]
    min_s = str(result.min_offset)
    max_s = str(result.max_offset)
    for m in msgs:
        props = m.properties
        if props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
            m.transaction_id = props.get(_UNIQ_KEY)
        props[MessageConst.PROPERTY_MIN_OFFSET] = min_s
        props[MessageConst.PROPERTY_MAX_OFFSET] = max_s
    result.msg_found_list = msgs
    return result


class MQClientAPI:
    """Typed calls over one ``RemotingClient`` (see module docstring).

    ``timeout`` arguments are seconds; ``None`` means the config's
    ``mq_client_api_timeout_ms``.
    """

    def __init__(self, remoting: RemotingClient, config: ClientConfig) -> None:
        self.remoting = remoting
        self.config = config

    def _t(self, timeout: float | None) -> float:
        return self.config.api_timeout if timeout is None else timeout

    @staticmethod
    def _raise(response: RemotingCommand, addr: str | None) -> MQBrokerError:
        return MQBrokerError.for_code(response.code, response.remark, addr)

    async def _invoke_ok(self, addr: str, request: RemotingCommand,
                         timeout: float | None) -> RemotingCommand:
        response = await self.remoting.invoke(addr, request, self._t(timeout))
        if response.code != _SUCCESS:
            raise self._raise(response, addr)
        return response

    # -- nameserver -------------------------------------------------------------------------

    async def get_topic_route_info(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC.

        Raises:
            TopicNotExistError: the nameserver has no route for ``topic``.
        """
        request = RemotingCommand.create_request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
        response = await self.remoting.invoke_namesrv(request, self._t(timeout))
        if response.code != _SUCCESS:
            raise self._raise(response, self.remoting.namesrv_addr_chosen)
        if not response.body:
            raise MQBrokerError.for_code(
                ResponseCode.TOPIC_NOT_EXIST, f"empty route body for topic {topic}",
                self.remoting.namesrv_addr_chosen)
        return TopicRouteData.decode(response.body)

    async def get_topic_list_from_namesrv(self, timeout: float | None = None) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the nameserver knows, system
        topics included, in the nameserver's order (upstream ``getTopicListFromNameServer``).

        Raises:
            MQBrokerError: the nameserver answered a non-success code.
        """
        request = RemotingCommand.create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        response = await self.remoting.invoke_namesrv(request, self._t(timeout))
        if response.code != _SUCCESS:
            raise self._raise(response, self.remoting.namesrv_addr_chosen)
        return TopicList.decode(response.body).topic_list if response.body else []

    async def get_system_topic_list_from_namesrv(self, timeout: float | None = None
                                                 ) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: the cluster names and broker names, each a topic
        that every broker creates (upstream ``getSystemTopicList``, without its second
        question to a broker for the broker's own system topics).

        Raises:
            MQBrokerError: the nameserver answered a non-success code.
        """
        request = RemotingCommand.create_request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        response = await self.remoting.invoke_namesrv(request, self._t(timeout))
        if response.code != _SUCCESS:
            raise self._raise(response, self.remoting.namesrv_addr_chosen)
        return TopicList.decode(response.body).topic_list if response.body else []

    # -- send -------------------------------------------------------------------------------

    @staticmethod
    def _send_request(msg: Message, header: SendMessageRequestHeaderV2,
                      body: bytes) -> RemotingCommand:
        code = RequestCode.SEND_BATCH_MESSAGE if header.batch else RequestCode.SEND_MESSAGE_V2
        return RemotingCommand.create_request(code, header.to_ext_fields(), body)

    async def send_message(self, addr: str, broker_name: str, msg: Message, body: bytes,
                           header: SendMessageRequestHeaderV2, timeout: float,
                           uniq_ids: Sequence[str] | None = None) -> SendResult:
        """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (``header.batch``), waiting for the answer.

        ``body`` is what goes on the wire (compressed or a batch encoding); ``uniq_ids``
        are a batch's member UNIQ_KEYs, joined into ``SendResult.msg_id``.

        Raises:
            MQBrokerError: any code but the four "stored" ones.
        """
        request = self._send_request(msg, header, body)
        response = await self.remoting.invoke(addr, request, timeout)
        return self.process_send_response(broker_name, msg, response, addr, uniq_ids)

    async def send_message_oneway(self, addr: str, msg: Message, body: bytes,
                                  header: SendMessageRequestHeaderV2, timeout: float) -> None:
        await self.remoting.invoke_oneway(addr, self._send_request(msg, header, body), timeout)

    def process_send_response(self, broker_name: str, msg: Message, response: RemotingCommand,
                              addr: str, uniq_ids: Sequence[str] | None = None) -> SendResult:
        status = _SEND_STATUS_BY_CODE.get(response.code)
        if status is None:
            raise self._raise(response, addr)
        header = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        ext = response.ext_fields or {}
        topic = self.config.without_namespace(msg.topic)
        if uniq_ids is not None:
            msg_id: str | None = ",".join(uniq_ids)
        else:
            msg_id = msg.properties.get(_UNIQ_KEY)
        region = ext.get(MessageConst.PROPERTY_MSG_REGION) or MixAll.DEFAULT_TRACE_REGION_ID
        return SendResult(
            status=status,
            msg_id=msg_id,
            offset_msg_id=header.msg_id,
            message_queue=MessageQueue(topic, broker_name, header.queue_id),
            queue_offset=header.queue_offset,
            transaction_id=header.transaction_id,
            region_id=region,
            trace_on=ext.get(MessageConst.PROPERTY_TRACE_SWITCH) != "false",
        )

    # -- pull -------------------------------------------------------------------------------

    @staticmethod
    def _pull_request(header: PullMessageRequestHeader) -> RemotingCommand:
        # 4.9.x clients send PULL_MESSAGE even with the LITE_PULL bit set (LITE_PULL_MESSAGE
        # is 5.x only and a 4.9 broker would answer REQUEST_CODE_NOT_SUPPORTED).
        return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())

    @staticmethod
    def process_pull_response(response: RemotingCommand, addr: str, *,
                              decode: bool = True) -> PullResult:
        status = _PULL_STATUS_BY_CODE.get(response.code)
        if status is None:
            raise MQBrokerError.for_code(response.code, response.remark, addr)
        header = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        found = status is PullStatus.FOUND and bool(response.body)
        if not decode:
            body = response.body
            return PullResult(status, header.next_begin_offset, header.min_offset or 0,
                              header.max_offset or 0, [], header.suggest_which_broker_id,
                              (body if isinstance(body, bytes) else bytes(body))
                              if found and body is not None else None)
        msgs = decode_messages(response.body) if found else []
        return PullResult(status, header.next_begin_offset, header.min_offset or 0,
                          header.max_offset or 0, msgs, header.suggest_which_broker_id)

    async def pull_message(self, addr: str, header: PullMessageRequestHeader,
                           timeout: float, *, decode: bool = True) -> PullResult:
        """PULL_MESSAGE, waiting for the answer (long polling: ``timeout`` > the hold).
        ``decode=False`` leaves the records undecoded in ``PullResult.body``."""
        response = await self.remoting.invoke(addr, self._pull_request(header), timeout)
        return self.process_pull_response(response, addr, decode=decode)

    async def pull_message_async(
        self, addr: str, header: PullMessageRequestHeader, timeout: float,
        on_result: Callable[[PullResult | None, BaseException | None], None],
    ) -> None:
        """PULL_MESSAGE without holding a task: ``on_result(result, None)`` or
        ``on_result(None, error)`` runs once when the answer (or failure) arrives.

        Raises (before anything is sent): the ``RemotingError`` family.
        """

        def done(rf: ResponseFuture) -> None:
            response = rf.response
            if response is None:
                cause = rf.cause or ConnectionError(f"pull from {addr} failed")
                on_result(None, cause)
                return
            try:
                result = self.process_pull_response(response, addr)
            except Exception as exc:
                on_result(None, exc)
                return
            on_result(result, None)

        await self.remoting.invoke_async(addr, self._pull_request(header), timeout, done)

    # -- offsets ----------------------------------------------------------------------------

    async def query_consumer_offset(self, addr: str, header: QueryConsumerOffsetRequestHeader,
                                    timeout: float | None = None) -> int:
        """QUERY_CONSUMER_OFFSET; ``QueryNotFoundError`` (22) when the group has none."""
        request = RemotingCommand.create_request(RequestCode.QUERY_CONSUMER_OFFSET,
                                                 header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        return QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def update_consumer_offset(self, addr: str, header: UpdateConsumerOffsetRequestHeader,
                                     timeout: float | None = None, *, oneway: bool = True) -> None:
        """UPDATE_CONSUMER_OFFSET, oneway by default (the persist task's form)."""
        request = RemotingCommand.create_request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                 header.to_ext_fields())
        if oneway:
            await self.remoting.invoke_oneway(addr, request, self._t(timeout))
        else:
            await self._invoke_ok(addr, request, timeout)

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id,
                                           bname=mq.broker_name)
        request = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        return GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id,
                                           bname=mq.broker_name)
        request = RemotingCommand.create_request(RequestCode.GET_MIN_OFFSET, header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        return GetMinOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int,
                            timeout: float | None = None) -> int:
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id,
                                           timestamp=timestamp_ms, bname=mq.broker_name)
        request = RemotingCommand.create_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                                 header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        return SearchOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue,
                                         timeout: float | None = None) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id,
                                                      bname=mq.broker_name)
        request = RemotingCommand.create_request(RequestCode.GET_EARLIEST_MSG_STORETIME,
                                                 header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        return GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp

    # -- registration -----------------------------------------------------------------------

    async def send_heartbeat(self, addr: str, heartbeat: HeartbeatData,
                             timeout: float | None = None) -> int:
        """HEART_BEAT; returns the broker's ``version`` (recorded as its version)."""
        request = RemotingCommand.create_request(RequestCode.HEART_BEAT, None, heartbeat.encode(),
                                                 language=self.config.language)
        response = await self._invoke_ok(addr, request, timeout)
        return response.version

    async def check_client_in_broker(self, addr: str, group: str, client_id: str,
                                     subscription: SubscriptionData,
                                     timeout: float | None = None) -> None:
        """CHECK_CLIENT_CONFIG (``checkClientInBroker``): can the broker filter this way?

        Raises:
            MQBrokerError: the broker refused it (SYSTEM_ERROR: property filtering is off;
                SUBSCRIPTION_PARSE_FAILED: the expression does not compile), with its remark.
        """
        body = CheckClientRequestBody(client_id, group, subscription).encode()
        request = RemotingCommand.create_request(RequestCode.CHECK_CLIENT_CONFIG, None, body)
        await self._invoke_ok(addr, request, timeout)

    async def unregister_client(self, addr: str, client_id: str, *,
                                producer_group: str | None = None,
                                consumer_group: str | None = None,
                                timeout: float | None = None) -> None:
        header = UnregisterClientRequestHeader(client_id=client_id, producer_group=producer_group,
                                               consumer_group=consumer_group)
        request = RemotingCommand.create_request(RequestCode.UNREGISTER_CLIENT,
                                                 header.to_ext_fields())
        await self._invoke_ok(addr, request, timeout)

    async def get_consumer_id_list(self, addr: str, group: str,
                                   timeout: float | None = None) -> list[str]:
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        request = RemotingCommand.create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                 header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        if not response.body:
            return []
        return list(ConsumerListBody.decode(response.body).consumer_id_list)

    # -- retry, locks, transactions ---------------------------------------------------------

    async def consumer_send_message_back(self, addr: str, broker_name: str, msg: MessageExt,
                                         group: str, delay_level: int, max_reconsume_times: int,
                                         timeout: float | None = None) -> None:
        """CONSUMER_SEND_MSG_BACK: ``originMsgId`` is the message's msgId (its UNIQ_KEY)."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=group, delay_level=delay_level,
            origin_msg_id=msg.msg_id, origin_topic=msg.topic, unit_mode=False,
            max_reconsume_times=max_reconsume_times, bname=broker_name)
        request = RemotingCommand.create_request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                 header.to_ext_fields())
        await self._invoke_ok(addr, request, timeout)

    async def lock_batch_mq(self, addr: str, body: LockBatchRequestBody,
                            timeout: float | None = None) -> list[MessageQueue]:
        """LOCK_BATCH_MQ; the queues now locked by this client."""
        request = RemotingCommand.create_request(RequestCode.LOCK_BATCH_MQ, None, body.encode())
        response = await self._invoke_ok(addr, request, timeout)
        if not response.body:
            return []
        return list(LockBatchResponseBody.decode(response.body).lock_ok_mq_set)

    async def unlock_batch_mq(self, addr: str, body: UnlockBatchRequestBody,
                              timeout: float | None = None, *, oneway: bool = False) -> None:
        request = RemotingCommand.create_request(RequestCode.UNLOCK_BATCH_MQ, None, body.encode())
        if oneway:
            await self.remoting.invoke_oneway(addr, request, self._t(timeout))
        else:
            await self._invoke_ok(addr, request, timeout)

    async def end_transaction_oneway(self, addr: str, header: EndTransactionRequestHeader,
                                     remark: str | None, timeout: float | None = None) -> None:
        request = RemotingCommand.create_request(RequestCode.END_TRANSACTION,
                                                 header.to_ext_fields())
        request.remark = remark
        await self.remoting.invoke_oneway(addr, request, self._t(timeout))

    # -- query / view -----------------------------------------------------------------------

    async def view_message(self, addr: str, phy_offset: int,
                           timeout: float | None = None) -> MessageExt:
        """VIEW_MESSAGE_BY_ID by commit-log offset."""
        header = ViewMessageRequestHeader(offset=phy_offset)
        request = RemotingCommand.create_request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                 header.to_ext_fields())
        response = await self._invoke_ok(addr, request, timeout)
        msgs = decode_messages(response.body or b"")
        if not msgs:
            raise MQBrokerError.for_code(ResponseCode.SYSTEM_ERROR,
                                         f"empty body for offset {phy_offset}", addr)
        return msgs[0]

    async def query_message(self, addr: str, topic: str, key: str, *, max_num: int = 32,
                            begin_ms: int = 0, end_ms: int | None = None,
                            unique_key: bool = False,
                            timeout: float | None = None) -> list[MessageExt]:
        """QUERY_MESSAGE by key (or UNIQ_KEY); [] when the broker finds nothing.

        The broker matches index hashes, so results are re-filtered here exactly as
        ``MQAdminImpl.queryMessage`` does: topic equal and the key among the message's
        ``KEYS`` (or, for a unique-key query, ``msg_id == key``).
        """
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms,
            end_timestamp=end_ms if end_ms is not None else 2**63 - 1,
            unique_key_query=unique_key)
        request = RemotingCommand.create_request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
        response = await self.remoting.invoke(addr, request, self._t(timeout))
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        if response.code != _SUCCESS:
            raise self._raise(response, addr)
        out = []
        for m in decode_messages(response.body or b""):
            if m.topic != topic:
                continue
            if unique_key:
                if m.msg_id == key:
                    out.append(m)
            else:
                keys = (m.properties.get(MessageConst.PROPERTY_KEYS) or "").split(
                    MessageConst.KEY_SEPARATOR)
                if key in keys:
                    out.append(m)
        return out


def now_ms() -> int:
    """Wall-clock milliseconds, as Java's ``System.currentTimeMillis`` (wire timestamps)."""
    return time.time_ns() // 1_000_000

