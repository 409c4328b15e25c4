"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325) (upstream ``ReplyMessageProcessor``;
docs/PROTOCOL.md 3.5, 5.1, vectors scenario ``reply``).

Contract:

* The header is the send header (long names or V2 letters); the send path's checks
  apply (``SendMessageProcessor.msg_check``: topic name, existence/auto-creation, queue
  id). Answers carry ``MSG_REGION`` and ``TRACE_ON`` like every send answer.
* The reply is pushed first: PUSH_REPLY_MESSAGE_TO_CLIENT (326, two-way, 10 s) goes to the
  channel of the producer whose client id is the reply's ``REPLY_TO_CLIENT``, with a
  ``ReplyMessageRequestHeader`` (the send header's fields, ``bornHost`` / ``storeHost`` as
  ``ip:port`` strings, ``storeTimestamp`` now) whose ``properties`` are the reply's plus
  ``PUSH_REPLY_TIME`` (frame id 1314), and the reply body.
* Push answered SUCCESS: the answer is SUCCESS with ``msgId=0``, ``queueOffset=0``;
  no ``REPLY_TO_CLIENT``, no such channel, a failed or refused push: SYSTEM_ERROR with
  upstream's remark.
* With ``storeReplyMessageEnable`` (default) the reply is then stored in its topic with
  the request's properties string verbatim (no ``CLUSTER`` is added), and a successful
  put replaces ``msgId`` / ``queueId`` / ``queueOffset`` in the answer (frame id 1316)
  without changing its code.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import MessageConst, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingError
from aiorocketmq.protocol.headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    decode_send_request_header,
)
from aiorocketmq.protocol.message import (
    decode_properties,
    encode_properties,
    socket_address_to_bytes,
)
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["ReplyMessageProcessor", "build_push_reply_header"]

log = get_logger("aiorocketmq.broker.reply")

PUSH_REPLY_TIMEOUT = 10.0  # Broker2Client.callClient: invokeSync(channel, request, 10000)
_REPLY_TO = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
_STORED_OK = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
              PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)


def build_push_reply_header(header: SendMessageRequestHeader, born_host: str, store_host: str,
                            properties: str | None, now_ms: int) -> ReplyMessageRequestHeader:
    """``pushReplyMessage``'s header: the send header's fields plus hosts and store time."""
    return ReplyMessageRequestHeader(
        producer_group=header.producer_group, topic=header.topic,
        default_topic=header.default_topic, default_topic_queue_nums=header.default_topic_queue_nums,
        queue_id=header.queue_id, sys_flag=header.sys_flag, born_timestamp=header.born_timestamp,
        flag=header.flag, properties=properties, reconsume_times=header.reconsume_times,
        unit_mode=header.unit_mode, born_host=born_host, store_host=store_host,
        store_timestamp=now_ms)


class ReplyMessageProcessor:
    """The two reply codes; see the module docstring."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.SEND_REPLY_MESSAGE: self.send_reply_message,
            RequestCode.SEND_REPLY_MESSAGE_V2: self.send_reply_message,
        }

    def find_producer_channel(self, client_id: str) -> Channel | None:
        """The live channel of a producer registered under ``client_id`` (``findChannel``)."""
        for channels in self._b.producers.groups.values():
            for channel, info in channels.items():
                if info.client_id == client_id and channel.is_active:
                    return channel
        return None

    async def send_reply_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = decode_send_request_header(request)
        b = self._b
        config = b.config
        response = request.create_response(-1, ext_fields={
            MessageConst.PROPERTY_MSG_REGION: config.region_id,
            MessageConst.PROPERTY_TRACE_SWITCH: "true" if config.trace_on else "false",
        })
        send = b.send_processor
        assert send is not None
        tc = send.msg_check(channel, header, response)
        if tc is None:
            return response
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(99999999) % max(tc.write_queue_nums, 1)
        props = decode_properties(header.properties or "")
        inner = MessageExtBrokerInner(
            topic=header.topic, queue_id=queue_id, body=bytes(request.body or b""), flag=header.flag,
            properties=props, properties_string=header.properties or "", sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp, born_host=_host_bytes(channel.remote_addr),
            store_host=send.store_host, reconsume_times=header.reconsume_times or 0)
        pushed, remark = await self._push_reply(channel, header, props, inner.body)
        ext = response.ext_fields
        assert ext is not None
        if pushed:
            response.code = ResponseCode.SUCCESS
            response.remark = None
            ext["msgId"] = "0"
            ext["queueId"] = str(queue_id)
            ext["queueOffset"] = "0"
        else:
            response.code = ResponseCode.SYSTEM_ERROR
            response.remark = remark
        if config.store_reply_message_enable:
            result = await b.store.put_message(inner)
            if result.status in _STORED_OK and result.append_result is not None:
                ext["msgId"] = result.append_result.msg_id
                ext["queueId"] = str(queue_id)
                ext["queueOffset"] = str(result.append_result.logics_offset)
            else:
                log.warning("broker.reply_store_failed", topic=header.topic, status=result.status.name)
        return response

    async def _push_reply(self, channel: Channel, header: SendMessageRequestHeader,
                          props: dict[str, str], body: bytes) -> tuple[bool, str]:
        sender = props.get(_REPLY_TO)
        if sender is None:
            return False, f"reply message properties[{_REPLY_TO}] is null"
        target = self.find_producer_channel(sender)
        if target is None:
            return False, f"push reply message fail, channel of <{sender}> not found."
        now = time.time_ns() // 1_000_000
        pushed_props = dict(props)
        pushed_props[MessageConst.PROPERTY_PUSH_REPLY_TIME] = str(now)
        push_header = build_push_reply_header(header, channel.remote_addr, self._b.config.broker_addr,
                                              encode_properties(pushed_props), now)
        push = RemotingCommand.create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
                                              push_header.to_ext_fields(), body)
        failed = f"push reply message to {sender}fail."  # sic, upstream's remark
        try:
            answer = await target.invoke(push, PUSH_REPLY_TIMEOUT)
        except RemotingError as exc:
            log.warning("broker.push_reply_failed", client_id=sender, error=str(exc))
            return False, failed
        if answer.code != ResponseCode.SUCCESS:
            log.warning("broker.push_reply_refused", client_id=sender, code=answer.code,
                        remark=answer.remark)
            return False, failed
        return True, ""


def _host_bytes(addr: str) -> bytes:
    try:
        return socket_address_to_bytes(addr)
    except ValueError:
        return bytes(8)
