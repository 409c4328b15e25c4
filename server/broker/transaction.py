"""Transactional messages on the broker: half/op queues, commit/rollback, and the check-back pass.

Upstream ``TransactionalMessageBridge``, ``TransactionalMessageServiceImpl``,
``TransactionalMessageUtil``, ``TransactionalMessageCheckService``,
``AbstractTransactionalMessageCheckListener`` / ``DefaultTransactionalMessageCheckListener``
and ``Broker2Client.checkProducerTransactionState`` (docs/PROTOCOL.md 4.8, 6.6).

Contract:

* ``TransactionPrepareHook`` (a send pre-store hook): a single send whose ``TRAN_MSG`` is
  ``true`` is stored as a *half* message (``parse_half_message_inner``): ``REAL_TOPIC`` /
  ``REAL_QID`` added, sysflag transaction bits cleared, topic ``RMQ_SYS_TRANS_HALF_TOPIC``
  queue 0, properties string rebuilt (it keeps ``WAIT`` and ``CLUSTER``). The answer keeps
  the requested queue id; ``queueOffset`` is the half-queue offset, ``msgId`` the half
  record's offset id.
* Commit / rollback (``EndTransactionProcessor``) end with ``delete_prepare_message``: an *op*
  record in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id as the half queue), tag ``d``,
  body = the half message's queue offset in decimal.
* Check pass (``TransactionalMessageService.check``, every ``transactionCheckInterval``):
  per half queue, from the consume offset of group ``CID_RMQ_SYS_TRANS`` (min offset when
  unset), after reading every op record from the op queue's offset (``build_remove_map``):
  a half offset named by an op is done; a message checked ``transactionCheckMax`` times
  already, or older than the file reserved time, is discarded to
  ``TRANS_CHECK_MAX_TIME_TOPIC``; a message stored after the pass began, or younger than
  ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``), stops the queue's
  pass; any other is **re-appended** to the half queue with ``TRANSACTION_CHECK_TIMES``
  + 1 (``renew_half_message_inner``) and CHECK_TRANSACTION_STATE (oneway) names the copy
  (4.8, frame id 823). Offsets then advance past what was handled; the op offset
  advances over the contiguous run of consumed op records (``calculate_op_offset``).
* The check goes to one live channel of the producer group in ``PGROUP``, round robin
  over the group's channels (``ProducerManager.getAvailableChannel``); no channel: the
  check is skipped and the copy is checked again on a later pass.
* Offsets of ``CID_RMQ_SYS_TRANS`` live in the ConsumerOffsetManager and are persisted
  with ``consumerOffset.json``; half and op records live in the store. A restart
  therefore resumes the pass; an unpersisted offset only repeats checks (the producer
  answers again), never loses a half message.

Deviation from 4.9.7: upstream reads half messages with the body inflated and writes the
copy with the COMPRESSED flag still set (a corrupt copy for compressed bodies); we copy
the stored bytes unchanged.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import (
    MessageConst,
    MessageSysFlag,
    MixAll,
    Perm,
    RequestCode,
    SystemTopic,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingError
from aiorocketmq.protocol.headers import CheckTransactionStateRequestHeader
from aiorocketmq.protocol.message import (
    MessageExt,
    create_uniq_id,
    encode_message,
    encode_properties,
    socket_address_to_bytes,
)
from aiorocketmq.protocol.routine import Routine
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from .controller import BrokerController
    from .processors.send import SendContext

__all__ = [
    "TransactionalMessageService",
    "TransactionalMessageCheckService",
    "TransactionPrepareHook",
    "parse_half_message_inner",
    "renew_half_message_inner",
    "end_message_transaction",
    "make_op_message_inner",
    "build_remove_map",
    "calculate_op_offset",
    "next_check_times",
    "HALF_TOPIC",
    "OP_TOPIC",
    "REMOVE_TAG",
    "TRANS_CONSUMER_GROUP",
]

log = get_logger("aiorocketmq.broker.transaction")

HALF_TOPIC = SystemTopic.TRANS_HALF_TOPIC
OP_TOPIC = SystemTopic.TRANS_OP_HALF_TOPIC
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
TRANS_CONSUMER_GROUP = MixAll.CID_RMQ_SYS_PREFIX + "TRANS"  # buildConsumerGroup()
TCMT_QUEUE_NUMS = 1  # AbstractTransactionalMessageCheckListener.TCMT_QUEUE_NUMS
MAX_PROCESS_TIME_LIMIT_MS = 60_000  # TransactionalMessageServiceImpl.MAX_PROCESS_TIME_LIMIT
CHECK_PERMIT_TIMEOUT = 0.01  # Broker2Client.checkProducerTransactionState: invokeOneway(..., 10)

_RW = int(Perm.READ | Perm.WRITE)
_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_CHECK_TIMES = MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES
_IMMUNITY = MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS
_PREPARED_QUEUE_OFFSET = MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _java_long(text: str | None) -> int:
    """``getLong``: -1 when it does not parse."""
    try:
        return int(text) if text is not None else -1
    except ValueError:
        return -1


# -- pure record builders ----------------------------------------------------------------


def parse_half_message_inner(inner: MessageExtBrokerInner) -> None:
    """``parseHalfMessageInner``: rewrite ``inner`` in place into a half message."""
    props = inner.properties
    props[_REAL_TOPIC] = inner.topic
    props[_REAL_QID] = str(inner.queue_id)
    inner.sys_flag = MessageSysFlag.reset_transaction_value(inner.sys_flag,
                                                            MessageSysFlag.TRANSACTION_NOT_TYPE)
    inner.topic = HALF_TOPIC
    inner.queue_id = 0
    inner.properties_string = encode_properties(props)


def renew_half_message_inner(msg: MessageExt) -> MessageExtBrokerInner:
    """``renewHalfMessageInner``: a copy of a half message for the half queue.

    The stored string is taken before ``WAIT=false`` is set (so it keeps the original
    ``WAIT``); ``msg.properties`` itself gets ``WAIT=false``, as upstream's shared map does,
    which is what the CHECK_TRANSACTION_STATE body then shows (frame id 823).
    """
    stored = encode_properties(msg.properties)
    msg.properties[_WAIT] = "false"
    return MessageExtBrokerInner(
        topic=msg.topic, queue_id=msg.queue_id, body=msg.body, flag=msg.flag,
        properties=dict(msg.properties), properties_string=stored, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=socket_address_to_bytes(msg.born_host),
        store_host=socket_address_to_bytes(msg.store_host), reconsume_times=msg.reconsume_times)


def end_message_transaction(msg: MessageExt, commit_or_rollback: int,
                            commit_log_offset: int) -> MessageExtBrokerInner:
    """``endMessageTransaction`` + EndTransactionProcessor's fix-ups: the committed record.

    Upstream quirk kept: the stored string is the half message's, taken before
    ``REAL_TOPIC``/``REAL_QID``/``TRAN_MSG`` leave the map (docs/PROTOCOL.md 6.6 step 3).

    Raises:
        ValueError: ``REAL_TOPIC`` / ``REAL_QID`` missing or not a number.
    """
    real_topic = msg.properties.get(_REAL_TOPIC)
    real_qid = msg.properties.get(_REAL_QID)
    if not real_topic or real_qid is None:
        raise ValueError("prepared message has no REAL_TOPIC/REAL_QID")
    props = dict(msg.properties)
    stored = encode_properties(props)
    for key in (_REAL_TOPIC, _REAL_QID, MessageConst.PROPERTY_TRANSACTION_PREPARED):
        props.pop(key, None)
    return MessageExtBrokerInner(
        topic=real_topic, queue_id=int(real_qid), body=msg.body, flag=msg.flag,
        properties=props, properties_string=stored,
        sys_flag=MessageSysFlag.reset_transaction_value(msg.sys_flag, commit_or_rollback),
        born_timestamp=msg.born_timestamp, born_host=socket_address_to_bytes(msg.born_host),
        store_host=socket_address_to_bytes(msg.store_host), reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=commit_log_offset)


def make_op_message_inner(half_queue_offset: int, queue_id: int, store_host: bytes,
                          now_ms: int) -> MessageExtBrokerInner:
    """``makeOpMessageInner`` for a remove op: tag ``d``, body = the half queue offset.

    As upstream, the stored string is ``Message``'s (``TAGS``, ``WAIT=true``), computed
    before the UNIQ_KEY and ``WAIT=false`` are put in the map.
    """
    base = {MessageConst.PROPERTY_TAGS: REMOVE_TAG, _WAIT: "true"}
    stored = encode_properties(base)
    props = dict(base, **{_WAIT: "false", _UNIQ: create_uniq_id()})
    return MessageExtBrokerInner(
        topic=OP_TOPIC, queue_id=queue_id, body=str(half_queue_offset).encode(),
        properties=props, properties_string=stored, sys_flag=0, born_timestamp=now_ms,
        born_host=store_host, store_host=store_host)


def build_remove_map(ops: Iterable[tuple[int, str | None, bytes]], min_half_offset: int,
                     remove_map: dict[int, int], done_op_offsets: list[int]) -> None:
    """``fillOpRemoveMap`` over op records ``(op_queue_offset, tags, body)``.

    An op naming a half offset below ``min_half_offset`` is already handled (done);
    others map half offset -> op offset in ``remove_map``. Ops with another tag are
    ignored (logged), as upstream.
    """
    for op_offset, tags, body in ops:
        half_offset = _java_long(body.decode("utf-8", "replace"))
        if tags != REMOVE_TAG:
            log.error("broker.transaction.op_illegal_tag", op_offset=op_offset, tags=tags)
            continue
        if half_offset < min_half_offset:
            done_op_offsets.append(op_offset)
        else:
            remove_map[half_offset] = op_offset


def calculate_op_offset(done_op_offsets: list[int], old_offset: int) -> int:
    """``calculateOpOffset``: advance over the contiguous run of done op offsets."""
    new_offset = old_offset
    for offset in sorted(done_op_offsets):
        if offset == new_offset:
            new_offset += 1
        elif offset > new_offset:
            break
    return new_offset


def next_check_times(props: dict[str, str], check_max: int) -> int | None:
    """``needDiscard``: the check count to store next, or ``None`` to discard the message."""
    text = props.get(_CHECK_TIMES)
    if text is None:
        return 1
    try:
        times = int(text)
    except ValueError:
        times = -1
    if times >= check_max:
        return None
    return times + 1


# -- the send hook -----------------------------------------------------------------------


class TransactionPrepareHook:
    """Store ``TRAN_MSG=true`` single sends as half messages (``asyncPrepareMessage``)."""

    def __call__(self, ctx: SendContext) -> RemotingCommand | None:
        if ctx.batch:
            return None
        inner = ctx.inner
        assert isinstance(inner, MessageExtBrokerInner)
        if inner.properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            parse_half_message_inner(inner)
        return None


# -- the service -------------------------------------------------------------------------


class TransactionalMessageService:
    """Half/op queue access, op writing and the check pass for one broker."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker
        self._rr = itertools.count(random.randrange(1 << 16))
        self._store_host = b""

    @property
    def store_host(self) -> bytes:
        if not self._store_host:
            self._store_host = socket_address_to_bytes(self._b.config.broker_addr)
        return self._store_host

    # -- bridge -------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig:
        """``selectTopicConfig``: the topic, created with 1 queue and perm 6 when missing."""
        tc = self._b.topics.select(topic)
        if tc is None:
            tc = self._b.topics.create_topic_in_send_message_back_method(topic, 1, _RW, 0)
        return tc

    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self._b.offsets.query_offset(TRANS_CONSUMER_GROUP, topic, queue_id)
        if offset == -1:
            offset = self._b.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self._b.offsets.commit_offset(self._b.config.broker_addr, TRANS_CONSUMER_GROUP, topic,
                                      queue_id, offset)

    def get_message_in_queue(self, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        store = self._b.store
        cq = store.find_consume_queue(topic, queue_id)
        unit = cq.get_unit(offset) if cq is not None else None
        if unit is None:
            return None
        msg = store.look_message_by_offset(unit[0])
        if msg is not None:
            msg.queue_offset = offset
        return msg

    def get_half_message(self, commit_log_offset: int) -> MessageExt | None:
        """The record at ``commit_log_offset`` (``getHalfMessageByOffset``)."""
        return self._b.store.look_message_by_offset(commit_log_offset)

    async def delete_prepare_message(self, msg: MessageExt) -> bool:
        """Write the remove op for half message ``msg`` (``deletePrepareMessage``)."""
        inner = make_op_message_inner(msg.queue_offset, msg.queue_id, self.store_host, _now_ms())
        result = await self._b.store.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("broker.transaction.op_put_failed", half_offset=msg.queue_offset,
                      status=result.status.name)
            return False
        return True

    # -- check pass ---------------------------------------------------------------------

    async def check(self, transaction_timeout_ms: int, check_max: int) -> int:
        """One check pass over every half queue; the number of checks sent."""
        tc = self.select_topic_config(HALF_TOPIC)
        sent = 0
        for queue_id in range(tc.read_queue_nums):
            sent += await self._check_queue(queue_id, transaction_timeout_ms, check_max)
        return sent

    def _read_ops(self, queue_id: int, op_offset: int, min_half_offset: int,
                  remove_map: dict[int, int], done: list[int]) -> None:
        store = self._b.store
        max_offset = store.get_max_offset_in_queue(OP_TOPIC, queue_id)
        ops = []
        for offset in range(max(op_offset, store.get_min_offset_in_queue(OP_TOPIC, queue_id)),
                            max_offset):
            msg = self.get_message_in_queue(OP_TOPIC, queue_id, offset)
            if msg is not None:
                ops.append((offset, msg.tags, msg.body))
        build_remove_map(ops, min_half_offset, remove_map, done)

    async def _check_queue(self, queue_id: int, timeout_ms: int, check_max: int) -> int:
        start = _now_ms()
        half_offset = self.fetch_consume_offset(HALF_TOPIC, queue_id)
        op_offset = self.fetch_consume_offset(OP_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            log.error("broker.transaction.check_illegal_offset", queue_id=queue_id, half=half_offset,
                      op=op_offset)
            return 0
        remove_map: dict[int, int] = {}
        done: list[int] = []
        self._read_ops(queue_id, op_offset, half_offset, remove_map, done)
        max_half = self._b.store.get_max_offset_in_queue(HALF_TOPIC, queue_id)
        reserved_ms = self._b.store_config.file_reserved_time * 3600 * 1000
        sent = 0
        i = half_offset
        while i < max_half:
            if _now_ms() - start > MAX_PROCESS_TIME_LIMIT_MS:
                break
            if i in remove_map:
                done.append(remove_map.pop(i))
                i += 1
                continue
            msg = self.get_message_in_queue(HALF_TOPIC, queue_id, i)
            if msg is None:
                log.warning("broker.transaction.half_message_missing", queue_id=queue_id, offset=i)
                i += 1
                continue
            times = next_check_times(msg.properties, check_max)
            now = _now_ms()
            if times is None or now - msg.born_timestamp > reserved_ms:
                await self._discard(msg)
                i += 1
                continue
            msg.properties[_CHECK_TIMES] = str(times)
            if msg.store_timestamp >= start:
                break
            age = now - msg.born_timestamp
            immunity_text = msg.properties.get(_IMMUNITY)
            immunity = timeout_ms
            if immunity_text is not None:
                seconds = _java_long(immunity_text)
                immunity = timeout_ms if seconds == -1 else seconds * 1000
                if age < immunity:
                    handled = await self._check_prepare_queue_offset(remove_map, done, msg)
                    if handled is None:
                        break
                    if handled:
                        i += 1
                        continue
            elif 0 <= age < immunity:
                break
            if not (age > immunity or age <= -1):
                break
            copy = await self._put_back_half_msg(msg)
            if copy is None:
                break  # the store refused; try again on the next pass
            if await self._send_check_message(msg):
                sent += 1
            i += 1
        if i != half_offset:
            self.update_consume_offset(HALF_TOPIC, queue_id, i)
        new_op = calculate_op_offset(done, op_offset)
        if new_op != op_offset:
            self.update_consume_offset(OP_TOPIC, queue_id, new_op)
        return sent

    async def _check_prepare_queue_offset(self, remove_map: dict[int, int], done: list[int],
                                          msg: MessageExt) -> bool | None:
        """``checkPrepareQueueOffset``: True skips ``msg``, False checks it, None stops."""
        text = msg.properties.get(_PREPARED_QUEUE_OFFSET)
        if text is None:
            return await self._put_immunity_back(msg)
        prepared = _java_long(text)
        if prepared == -1:
            return False
        if prepared in remove_map:
            done.append(remove_map.pop(prepared))
            return True
        return await self._put_immunity_back(msg)

    async def _put_immunity_back(self, msg: MessageExt) -> bool:
        inner = renew_half_message_inner(msg)
        inner.properties[_PREPARED_QUEUE_OFFSET] = msg.properties.get(
            _PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        inner.properties_string = encode_properties(inner.properties)
        result = await self._b.store.put_message(inner)
        return result.status is PutMessageStatus.PUT_OK

    async def _put_back_half_msg(self, msg: MessageExt) -> PutMessageResult | None:
        """Append the copy; on success ``msg`` takes the copy's offsets (``putBackHalfMsgQueue``)."""
        result = await self._b.store.put_message(renew_half_message_inner(msg))
        if result.status is not PutMessageStatus.PUT_OK or result.append_result is None:
            log.error("broker.transaction.put_back_failed", status=result.status.name,
                      offset=msg.queue_offset)
            return None
        append = result.append_result
        msg.queue_offset = append.logics_offset
        msg.commit_log_offset = append.wrote_offset
        msg.msg_id = append.msg_id
        return result

    async def _discard(self, msg: MessageExt) -> None:
        """``resolveDiscardMsg``: move a message checked too often to TRANS_CHECK_MAX_TIME_TOPIC."""
        log.error("broker.transaction.discard_checked_too_many", offset=msg.queue_offset,
                  real_topic=msg.properties.get(_REAL_TOPIC), uniq_key=msg.properties.get(_UNIQ))
        tc = self._b.topics.create_topic_in_send_message_back_method(
            SystemTopic.TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS, _RW, 0)
        props = dict(msg.properties)
        stored = encode_properties(props)
        props[_WAIT] = "false"
        inner = MessageExtBrokerInner(
            topic=tc.topic_name, queue_id=random.randrange(99999999) % TCMT_QUEUE_NUMS,
            body=msg.body, flag=msg.flag, properties=props, properties_string=stored,
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
            born_host=socket_address_to_bytes(msg.born_host),
            store_host=socket_address_to_bytes(msg.store_host), reconsume_times=msg.reconsume_times)
        result = await self._b.store.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("broker.transaction.discard_put_failed", status=result.status.name)

    def _available_channel(self, group: str) -> Channel | None:
        channels = [ch for ch in self._b.producers.groups.get(group, {}) if ch.is_active]
        if not channels:
            return None
        return channels[next(self._rr) % len(channels)]

    async def _send_check_message(self, msg: MessageExt) -> bool:
        """``sendCheckMessage``: CHECK_TRANSACTION_STATE, oneway, naming ``msg`` (the copy)."""
        uniq = msg.properties.get(_UNIQ)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=msg.queue_offset, commit_log_offset=msg.commit_log_offset,
            msg_id=uniq, transaction_id=uniq, offset_msg_id=msg.msg_id)
        msg.topic = msg.properties.get(_REAL_TOPIC, msg.topic)
        msg.queue_id = int(msg.properties.get(_REAL_QID, msg.queue_id))
        group = msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP, "")
        channel = self._available_channel(group)
        if channel is None:
            log.warning("broker.transaction.check_no_channel", group=group, uniq_key=uniq)
            return False
        request = RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE,
                                                 header.to_ext_fields(), encode_message(msg))
        try:
            await channel.invoke_oneway(request, CHECK_PERMIT_TIMEOUT)
        except RemotingError as exc:
            log.warning("broker.transaction.check_send_failed", group=group, addr=channel.remote_addr,
                        error=str(exc))
            return False
        log.info("broker.transaction.check_sent", group=group, addr=channel.remote_addr, uniq_key=uniq,
                 queue_offset=msg.queue_offset, commit_log_offset=msg.commit_log_offset)
        return True


class TransactionalMessageCheckService:
    """Runs ``TransactionalMessageService.check`` every ``transactionCheckInterval``."""

    def __init__(self, broker: BrokerController, service: TransactionalMessageService) -> None:
        self._b = broker
        self._service = service
        self._routine = Routine(self._check_routine, "TransactionalMessageCheckService")

    def start(self) -> None:
        self._routine.start()

    async def _check_routine(self) -> None:
        c = self._b.config
        while True:
            await asyncio.sleep(c.transaction_check_interval_ms / 1000)
            try:
                await self._service.check(c.transaction_timeout_ms, c.transaction_check_max)
            except asyncio.CancelledError:
                raise
            except Exception:
                # As upstream's "Check error": one failed pass must not end checking for good.
                log.exception("broker.transaction.check_failed")

    async def stop(self) -> None:
        await self._routine.stop()
