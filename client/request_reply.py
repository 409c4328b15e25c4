"""Request-reply: ``request(msg, timeout)`` and ``create_reply_message`` (docs/PROTOCOL.md 3.5, 5.1,
vectors scenario ``reply``).

Upstream ``DefaultMQProducerImpl.request`` / ``prepareSendRequest`` / ``waitResponse``,
``RequestFutureHolder``, ``RequestResponseFuture``, ``CorrelationIdUtil``,
``ClientRemotingProcessor.receiveReplyMessage`` and ``utils.MessageUtil.createReplyMessage``.

Contract:

* ``RequestProducer.request(msg, timeout)`` sets ``CORRELATION_ID`` (a fresh UUID),
  ``REPLY_TO_CLIENT`` (this client id) and ``TTL`` (the timeout in ms), makes sure the
  broker knows this client as a producer (route lookup plus a heartbeat when the topic is
  new, as ``prepareSendRequest``), sends the request like a normal send, and waits for the
  reply within **one** deadline: ``timeout`` covers the send and the wait.
* Replies arrive as PUSH_REPLY_MESSAGE_TO_CLIENT on any broker connection of the client
  instance; the handler (``RequestFutureTable.on_push_reply``, registered by every client
  instance as ``request_futures``, ``client.instance``) rebuilds a ``MessageExt`` (topic,
  queue, hosts, times, flag, body inflated when COMPRESSED, properties plus
  ``ARRIVE_TIME``), completes the future registered under its ``CORRELATION_ID`` and
  answers bare SUCCESS (frame id 1315); an unmatched reply is logged and still answered
  SUCCESS, as upstream.
* The futures table is bounded (``max_pending_requests``): each entry is removed when its
  ``request`` returns, fails, times out or is cancelled.
* ``create_reply_message(request, body)``: a message for ``<CLUSTER>_REPLY_TOPIC`` with
  ``MSG_TYPE=reply`` and the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT``, ``TTL``; no
  ``WAIT`` (like Java's no-arg ``Message()``, frame id 1313). The responder sends it with
  ``send_reply`` (SEND_REPLY_MESSAGE_V2) or any producer's ``send``.

Errors: ``RequestTimeoutError`` (defined in ``protocol.errors``, re-exported here; also a
``TimeoutError``) when the request was sent but no reply came in time; ``MQClientError``
(cause chained) when the request could not be sent.
"""

# ASYNC109: ``timeout`` is the user's budget for a whole request, converted once to a deadline.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import (
    MessageConst,
    MessageSysFlag,
    MixAll,
    RequestCode,
    ResponseCode,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    RequestTimeoutError,
    RocketMQError,
)
from aiorocketmq.protocol.headers import ReplyMessageRequestHeader, SendMessageRequestHeaderV2
from aiorocketmq.protocol.message import (
    Message,
    MessageExt,
    decode_properties,
    decompress_body,
    encode_properties,
)

from .producer import Producer

__all__ = [
    "RequestProducer",
    "RequestTimeoutError",
    "RequestFutureTable",
    "create_reply_message",
    "reply_message_from_push",
]

log = get_logger("aiorocketmq.client.request_reply")

_CORRELATION_ID = MessageConst.PROPERTY_CORRELATION_ID
_REPLY_TO = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
_TTL = MessageConst.PROPERTY_MESSAGE_TTL


def create_reply_message(request: Message, body: bytes) -> Message:
    """``MessageUtil.createReplyMessage``: the reply to ``request`` carrying ``body``.

    Raises:
        MQClientError: ``request`` has no ``CLUSTER`` property (it was not received from a
            broker).
    """
    props = request.properties
    cluster = props.get(MessageConst.PROPERTY_CLUSTER)
    if cluster is None:
        raise MQClientError("create reply message fail, requestMessage error, "
                            f"property[{MessageConst.PROPERTY_CLUSTER}] is null.")
    reply = MessageExt(MixAll.reply_topic(cluster), body)  # no WAIT, as Java's Message()
    reply.properties[MessageConst.PROPERTY_MESSAGE_TYPE] = MessageConst.REPLY_MESSAGE_FLAG
    for key in (_CORRELATION_ID, _REPLY_TO, _TTL):
        value = props.get(key)
        if value is not None:
            reply.properties[key] = value
    return Message._from_wire(reply.topic, reply.body, 0, reply.properties)


def reply_message_from_push(request: RemotingCommand, now_ms: int) -> MessageExt:
    """``receiveReplyMessage``: the reply carried by a PUSH_REPLY_MESSAGE_TO_CLIENT request.

    Raises:
        HeaderError: the header does not decode.
    """
    h = ReplyMessageRequestHeader.from_ext_fields(request.ext_fields)
    body = bytes(request.body or b"")
    if h.sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        try:
            body = decompress_body(body, h.sys_flag)
        except RocketMQError as exc:
            log.warning("client.request_reply.reply_inflate_failed", error=str(exc))
    props = decode_properties(h.properties or "")
    props[MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(now_ms)
    return MessageExt(h.topic, body, h.flag, props, queue_id=h.queue_id,
                      store_timestamp=h.store_timestamp, born_host=h.born_host,
                      store_host=h.store_host, born_timestamp=h.born_timestamp,
                      reconsume_times=h.reconsume_times or 0)


class RequestFutureTable:
    """Correlation id -> the future of a waiting ``request`` (``RequestFutureHolder``), bounded."""

    def __init__(self, max_pending: int = 65536) -> None:
        self.max_pending = max_pending
        self.futures: dict[str, asyncio.Future[MessageExt]] = {}

    def register(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        if len(self.futures) >= self.max_pending:
            raise MQClientError(f"too many pending requests ({self.max_pending})")
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self.futures[correlation_id] = fut
        return fut

    def discard(self, correlation_id: str) -> None:
        self.futures.pop(correlation_id, None)

    def complete(self, msg: MessageExt) -> bool:
        """Hand ``msg`` to the request waiting for its ``CORRELATION_ID``; False if none."""
        fut = self.futures.get(msg.properties.get(_CORRELATION_ID, ""))
        if fut is None or fut.done():
            return False
        fut.set_result(msg)
        return True

    def on_push_reply(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """The PUSH_REPLY_MESSAGE_TO_CLIENT handler."""
        msg = reply_message_from_push(request, time.time_ns() // 1_000_000)
        if not self.complete(msg):
            log.warning("client.request_reply.reply_unmatched", broker=channel.remote_addr,
                        correlation_id=msg.properties.get(_CORRELATION_ID))
        return request.create_response(ResponseCode.SUCCESS)


class RequestProducer(Producer):
    """A ``Producer`` that can also ``request`` (send and wait for the reply) and ``send_reply``."""

    async def request(self, msg: Message, timeout: float, **send_kwargs: Any) -> MessageExt:
        """Send ``msg`` and return the reply ``MessageExt`` (module docstring).

        Args:
            timeout: seconds for the send and the wait together (``TTL`` = it in ms).
            send_kwargs: ``mq`` / ``selector`` / ``arg`` as for ``send``.

        Raises:
            RequestTimeoutError: sent, but no reply within ``timeout``.
            MQClientError: the request could not be sent (cause chained).

        Cancelling the call forgets the request; a late reply is logged as unmatched.
        """
        inst = self._check_running()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        correlation_id = str(uuid.uuid4())
        msg.properties[_CORRELATION_ID] = correlation_id
        msg.properties[_REPLY_TO] = inst.client_id
        msg.properties[_TTL] = str(int(timeout * 1000))
        table = inst.request_futures
        if self.config.with_namespace(msg.topic) not in inst.topic_route_table:
            await self._find_publish_info(self.config.with_namespace(msg.topic))
            await inst.send_heartbeat_to_all_brokers()
        fut = table.register(correlation_id)
        try:
            try:
                await self.send(msg, timeout=max(deadline - loop.time(), 0.001), **send_kwargs)
            except RocketMQError as exc:
                raise MQClientError(f"send request message to <{msg.topic}> fail") from exc
            try:
                return await asyncio.wait_for(fut, max(deadline - loop.time(), 0))
            except TimeoutError:
                raise RequestTimeoutError(
                    f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                    f"{int(timeout * 1000)} ms.") from None
        finally:
            table.discard(correlation_id)

    async def send_reply(self, reply: Message, *, timeout: float | None = None) -> None:
        """Send a reply built by ``create_reply_message`` with SEND_REPLY_MESSAGE_V2.

        Raises:
            MQBrokerError: the broker refused (e.g. the requester is gone: SYSTEM_ERROR).
            MQClientError / RemotingError: as ``send``.
        """
        inst = self._check_running()
        info = await self._find_publish_info(reply.topic)
        if not info.ok():
            raise self._no_route(reply.topic)
        mq = info.select_one_message_queue()
        addr = inst.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        request = RemotingCommand.create_request(
            RequestCode.SEND_REPLY_MESSAGE_V2,
            self._reply_header(reply, mq.queue_id, mq.broker_name), reply.body)
        budget = self.send_msg_timeout_ms / 1000 if timeout is None else timeout
        response = await inst.remoting.invoke(addr, request, budget)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError.for_code(response.code, response.remark, addr)

    def _reply_header(self, reply: Message, queue_id: int, broker_name: str) -> dict[str, str]:
        if MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in reply.properties:
            reply.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._uniq.create()
        return SendMessageRequestHeaderV2(
            producer_group=self.group, topic=reply.topic, default_topic=self.create_topic_key,
            default_topic_queue_nums=self.default_topic_queue_nums, queue_id=queue_id, sys_flag=0,
            born_timestamp=time.time_ns() // 1_000_000, flag=reply.flag,
            properties=encode_properties(reply.properties), reconsume_times=0,
            unit_mode=self.config.unit_mode, batch=False, broker_name=broker_name,
        ).to_ext_fields()
