"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) (upstream ``SendMessageProcessor``).

Contract (docs/PROTOCOL.md 4.1, 5.1, 5.5, 6.7):

* The header is decoded once (letters or long names) and the path is chosen by its
  ``batch`` flag, not by the code. Checks, in upstream's order, each with upstream's
  code and remark: broker writable for order topics (NO_PERMISSION); topic name
  (SYSTEM_ERROR); topics nobody may send to (NO_PERMISSION); topic exists, else
  auto-created from ``defaultTopic`` (TBW102) or, for ``%RETRY%`` topics, created with
  1 queue, else TOPIC_NOT_EXIST; ``queueId < max(read, write)`` (SYSTEM_ERROR); a
  negative queue id picks a random writable queue.
* Single path: properties stored minus ``WAIT`` plus ``CLUSTER`` (the map handed to the
  store keeps ``WAIT`` for SYNC_FLUSH). Batch path: each member stores
  ``inner + \\x02 + batch-level`` pairs (header ``i`` plus ``CLUSTER``), ``WAIT`` kept.
  Born host = the peer address, store host = ``brokerIP1:listenPort``.
* Every answer carries extFields ``MSG_REGION`` and ``TRACE_ON`` (the Java client reads
  them unconditionally); success adds ``msgId`` (comma-joined for a batch), ``queueId``
  and ``queueOffset``. Store statuses map to codes as upstream ``handlePutMessageResult``.
* Extension point: ``hooks`` run between validation and the store, in order; each gets
  the ``SendContext`` and may rewrite ``ctx.inner`` (topic, queue, properties, sysflag;
  retry/DLQ redirection, transactional half messages, delay levels) or return a
  response to answer at once. ``put`` may be replaced the same way.
* Delay levels are the store's: it parks a message whose ``DELAY`` is positive in
  ``SCHEDULE_TOPIC_XXXX`` (``CommitLog.apply_delay``) and ``server.broker.schedule``
  delivers it when due (docs/PROTOCOL.md 6.5).
* Hot path: with an ASYNC_FLUSH store the handler is a plain function returning the
  response; when the store answers later (SYNC_FLUSH) the handler returns a coroutine.

Flow control (upstream ``BrokerFastFailure`` and the send executor's bounded queue). Our
send queue is the requests read off the sockets and not yet answered: ones still waiting
for their handler to start (later in a read batch or loop iteration), then ones whose put
waits for the store (SYNC_FLUSH group commit, a slave's ack). Before anything else, while
nothing is decoded or stored, a send is answered SYSTEM_BUSY instead of being handled:

* with ``brokerFastFailureEnable`` (default): ``[PCBUSY_CLEAN_QUEUE]broker busy, start flow
  control for a while, period in queue: %sms, size of queue: %d`` when it was read before
  the end of a put that ran longer than ``osPageCacheBusyTimeOutMills`` (1000; the store's
  ``os_page_cache_busy_until``): it waited while the page cache was busy;
* with ``brokerFastFailureEnable``: ``[TIMEOUT_CLEAN_QUEUE]`` and the same text when its
  handler starts ``waitTimeMillsInSendQueue`` (200) ms or more after it was read
  (``Channel.received_at``: when the reads of its loop iteration began): the loop is saturated;
* ``[OVERLOAD]system busy, start flow control for a while`` when
  ``sendThreadPoolQueueCapacity`` (10000) sends already wait for the store: what upstream's
  RejectedExecutionException answers, and what bounds the memory a flood can hold here (an
  ASYNC_FLUSH send is answered inline and waits for nothing; unread requests stay in the
  kernel, since a server channel stops reading while its answers are not drained).

``period in queue`` is whole milliseconds since the request was read; ``size of queue`` is
the number of sends waiting for the store. Upstream's producer does not retry SYSTEM_BUSY
(it is not in ``retryResponseCodes``); it marks the broker faulty for the latency fault
strategy. Cost on the hot path: one ``perf_counter()`` and three comparisons per send.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import shutil
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiorocketmq import refuse_extension
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import (
    MessageConst,
    MessageSysFlag,
    MixAll,
    Perm,
    RequestCode,
    ResponseCode,
    TopicSysFlag,
)
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError, ProtocolError
from aiorocketmq.protocol.headers import SendMessageRequestHeader, decode_send_request_header
from aiorocketmq.protocol.message import (
    MAX_TOPIC_LENGTH,
    decode_batch,
    decode_properties,
    encode_properties,
    socket_address_to_bytes,
)
from aiorocketmq.server.store.inner import (
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    UniformBatch,
)

from ..topic_config import validate_topic

# A canonical properties string's map and stored string in C (server/store/_put.c), else
# None: ``stored_properties`` below, its reference, reads every string.
try:
    refuse_extension("aiorocketmq.server.store._put")
    from aiorocketmq.server.store._put import batch_members as _batch_members
    from aiorocketmq.server.store._put import send_properties as _send_properties
except ImportError:
    _send_properties = None  # type: ignore[assignment]
    _batch_members = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["SendMessageProcessor", "SendContext", "SendHook"]

log = get_logger("aiorocketmq.broker.send")

_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_CLUSTER = MessageConst.PROPERTY_CLUSTER
_TRAN_MSG = MessageConst.PROPERTY_TRANSACTION_PREPARED
_PS = MessageConst.PROPERTY_SEPARATOR
_NV = MessageConst.NAME_VALUE_SEPARATOR
_RETRY_PREFIX = MixAll.RETRY_GROUP_TOPIC_PREFIX
_RW = int(Perm.READ | Perm.WRITE)
_WRITE = int(Perm.WRITE)  # tested as an int: Perm.writeable's Flag arithmetic is Python code
_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_BORN_HOST = "send.born_host"  # Channel.attrs key: the peer's address as record bytes
_SYSTEM_BUSY = ResponseCode.SYSTEM_BUSY
_perf = time.perf_counter
_BUSY = ("{}broker busy, start flow control for a while, period in queue: {}ms, "
         "size of queue: {}")  # BrokerFastFailure's remark after its tag
_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
_LOG_EVERY = 10.0  # seconds between two flow-control warnings of one kind

# PutMessageStatus -> (response code, remark or None, stored?) (handlePutMessageResult).
_STORED = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
_PUT_OK = PutMessageStatus.PUT_OK
_FAILED_REMARKS = {
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: "create mapped file failed, server is busy or broken.",
    PutMessageStatus.OS_PAGECACHE_BUSY: "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    PutMessageStatus.UNKNOWN_ERROR: "UNKNOWN_ERROR",
}


class SendContext:
    """One send on its way to the store; hooks may rewrite ``inner`` and ``response_queue_id``."""

    __slots__ = ("channel", "request", "header", "topic_config", "inner", "response_queue_id",
                 "response", "batch")

    def __init__(self, channel: Channel, request: RemotingCommand, header: SendMessageRequestHeader,
                 topic_config: TopicConfig, inner: MessageExtBrokerInner | UniformBatch,
                 response_queue_id: int, response: RemotingCommand) -> None:
        self.channel = channel
        self.request = request
        self.header = header
        self.topic_config = topic_config
        self.inner = inner
        self.response_queue_id = response_queue_id
        self.response = response
        self.batch = type(inner) is UniformBatch


SendHook = Callable[[SendContext], "RemotingCommand | None"]


class SendMessageProcessor:
    """The send family; ``hooks`` and ``put`` are the extension points (module docstring)."""

    def __init__(self, broker: BrokerController) -> None:
        self._b = broker
        self.hooks: list[SendHook] = []
        self.put: Callable[[MessageExtBrokerInner], Any] = broker.store.put_message_nowait
        self.put_batch: Callable[[list[MessageExtBrokerInner]], Any] = broker.store.put_messages_nowait
        self._store_host = b""
        # Sends whose put waits for the store (module docstring, "Flow control"); a closed
        # connection's are dropped by ``forget_channel`` (a handler task cancelled before
        # its first step never runs the ``finally`` that removes its own).
        self._waiting: set[SendContext] = set()
        self._refused: dict[str, int] = {}  # flow-control refusals since the last warning, by tag
        self._refused_logged: dict[str, float] = {}

    @property
    def queue_size(self) -> int:
        """Sends accepted and waiting for the store (``sendThreadPoolQueueSize``)."""
        return len(self._waiting)

    def forget_channel(self, channel: Channel) -> None:
        """Drop the waiting sends of a closed connection (their answers can go nowhere)."""
        gone = [ctx for ctx in self._waiting if ctx.channel is channel]
        self._waiting.difference_update(gone)

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.SEND_MESSAGE: self.process,
            RequestCode.SEND_MESSAGE_V2: self.process,
            RequestCode.SEND_BATCH_MESSAGE: self.process,
        }

    @property
    def store_host(self) -> bytes:
        if not self._store_host:
            self._store_host = socket_address_to_bytes(self._b.config.broker_addr)
        return self._store_host

    # -- the handler ----------------------------------------------------------------------

    def process(self, channel: Channel, request: RemotingCommand
                ) -> RemotingCommand | Awaitable[RemotingCommand]:
        b = self._b
        config = b.config
        received = channel.received_at
        if (_perf() - received) * 1000.0 >= config.wait_time_in_send_queue_ms \
                or received <= b.store.os_page_cache_busy_until \
                or len(self._waiting) >= config.send_thread_pool_queue_capacity:
            remark = self._flow_control(received)
            if remark is not None:
                return request.create_response(_SYSTEM_BUSY, remark)
        header = decode_send_request_header(request)
        response = request.create_response(-1, ext_fields={
            MessageConst.PROPERTY_MSG_REGION: config.region_id,
            MessageConst.PROPERTY_TRACE_SWITCH: "true" if config.trace_on else "false",
        })
        tc = self.msg_check(channel, header, response)
        if tc is None:
            return response
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(99999999) % max(tc.write_queue_nums, 1)
        if header.batch:
            return self._send_batch(channel, request, header, tc, queue_id, response)
        return self._send_single(channel, request, header, tc, queue_id, response)

    def _flow_control(self, received: float) -> str | None:
        """The SYSTEM_BUSY remark for a send read at ``received``, or ``None`` to handle it."""
        config = self._b.config
        now = _perf()
        if config.broker_fast_failure_enable:
            tag = None
            if received <= self._b.store.os_page_cache_busy_until:
                tag = "[PCBUSY_CLEAN_QUEUE]"
            elif (now - received) * 1000.0 >= config.wait_time_in_send_queue_ms:
                tag = "[TIMEOUT_CLEAN_QUEUE]"
            if tag is not None:
                self._note_refused(tag, now)
                return _BUSY.format(tag, int((now - received) * 1000.0), len(self._waiting))
        if len(self._waiting) >= config.send_thread_pool_queue_capacity:
            self._note_refused("[OVERLOAD]", now)
            return _OVERLOAD
        return None

    def _note_refused(self, tag: str, now: float) -> None:
        refused = self._refused
        refused[tag] = refused.get(tag, 0) + 1
        if now - self._refused_logged.get(tag, float("-inf")) >= _LOG_EVERY:
            self._refused_logged[tag] = now
            log.warning("broker.send_flow_control", tag=tag, refused=refused.pop(tag),
                        queue_size=len(self._waiting),
                        wait_time_in_send_queue_ms=self._b.config.wait_time_in_send_queue_ms,
                        capacity=self._b.config.send_thread_pool_queue_capacity)

    def msg_check(self, channel: Channel, header: SendMessageRequestHeader,
                  response: RemotingCommand) -> TopicConfig | None:
        """``AbstractSendMessageProcessor.msgCheck``: the topic config, or ``None`` with ``response`` set."""
        b = self._b
        topic = header.topic
        if not b.config.broker_permission & _WRITE and b.topics.is_order_topic(topic):
            return _refuse(response, ResponseCode.NO_PERMISSION,
                         f"the broker[{b.config.broker_ip1}] sending message is forbidden")
        remark = validate_topic(topic)
        if remark is not None:
            return _refuse(response, ResponseCode.SYSTEM_ERROR, remark)
        if b.topics.is_not_allowed_send_topic(topic):
            return _refuse(response, ResponseCode.NO_PERMISSION,
                         f"Sending message to topic[{topic}] is forbidden.")
        tc = b.topics.select(topic)
        if tc is None:
            sys_flag = 0
            if header.unit_mode:
                sys_flag = (TopicSysFlag.UNIT_SUB if topic.startswith(_RETRY_PREFIX)
                            else TopicSysFlag.UNIT)
            log.warning("broker.send_topic_missing", topic=topic, producer=channel.remote_addr)
            tc = b.topics.create_topic_in_send_message_method(
                topic, header.default_topic, channel.remote_addr,
                header.default_topic_queue_nums, sys_flag)
            if tc is None and topic.startswith(_RETRY_PREFIX):
                tc = b.topics.create_topic_in_send_message_back_method(topic, 1, _RW, sys_flag)
            if tc is None:
                return _refuse(response, ResponseCode.TOPIC_NOT_EXIST,
                             f"topic[{topic}] not exist, apply first please!{_FAQ}")
        valid = max(tc.write_queue_nums, tc.read_queue_nums)
        if header.queue_id >= valid:
            remark = (f"request queueId[{header.queue_id}] is illegal, {_topic_config_str(tc)} "
                      f"Producer: {channel.remote_addr}")
            log.warning("broker.send_bad_queue", remark=remark)
            return _refuse(response, ResponseCode.SYSTEM_ERROR, remark)
        return tc

    def _sys_flag(self, header: SendMessageRequestHeader, tc: TopicConfig) -> int:
        sys_flag = header.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        return sys_flag

    def _send_single(self, channel: Channel, request: RemotingCommand,
                     header: SendMessageRequestHeader, tc: TopicConfig, queue_id: int,
                     response: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        raw = header.properties or ""
        cluster = self._b.config.broker_cluster_name
        fast = (_send_properties(raw, cluster, _PS + _CLUSTER + _NV + cluster)
                if _send_properties is not None and raw else None)
        props, stored, wait = stored_properties(raw, cluster) if fast is None else fast
        if _TRAN_MSG in props and props[_TRAN_MSG].lower() == "true" \
                and self._b.config.reject_transaction_message:
            return _fail_response(response, ResponseCode.NO_PERMISSION,
                                  f"the broker[{self._b.config.broker_ip1}] sending transaction "
                                  "message is forbidden")
        # _sys_flag, _born_host and store_host inlined for their usual case (calls per send).
        sys_flag = header.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        born_host = channel.attrs.get(_BORN_HOST)
        if born_host is None:
            born_host = _born_host(channel)
        inner = MessageExtBrokerInner(
            topic=header.topic, queue_id=queue_id, body=bytes(request.body or b""),
            flag=header.flag, properties=props, properties_string=stored,
            sys_flag=sys_flag, born_timestamp=header.born_timestamp,
            born_host=born_host, store_host=self._store_host or self.store_host,
            reconsume_times=header.reconsume_times or 0)
        ctx = SendContext(channel, request, header, tc, inner, queue_id, response)
        for hook in self.hooks:
            early = hook(ctx)
            if early is not None:
                return early
        result = self.put(ctx.inner)  # type: ignore[arg-type]  # single path: one inner
        if type(result) is PutMessageResult:  # answered now (_answer's first case)
            return self._handle_put_result(ctx, result)
        return self._answer(ctx, result)

    def _send_batch(self, channel: Channel, request: RemotingCommand,
                    header: SendMessageRequestHeader, tc: TopicConfig, queue_id: int,
                    response: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        topic = header.topic
        if len(topic) > MAX_TOPIC_LENGTH:
            return _fail_response(response, ResponseCode.MESSAGE_ILLEGAL,
                                  f"message topic length too long {len(topic)}")
        batch_props = decode_properties(header.properties or "")
        batch_props[_CLUSTER] = self._b.config.broker_cluster_name
        batch_str = encode_properties(batch_props)
        body = request.body or b""
        members = (_batch_members(body, batch_props, batch_str)
                   if _batch_members is not None else None)
        if members is None:
            members = batch_members(body, topic, batch_props, batch_str)
        if not members:
            return _fail_response(response, ResponseCode.MESSAGE_ILLEGAL,
                                  "the batch message body is empty")
        # The members stay tuples until the store dispatches them (UniformBatch).
        inners = UniformBatch(topic, queue_id, self._sys_flag(header, tc), header.born_timestamp,
                              _born_host(channel), self.store_host,
                              header.reconsume_times or 0, members)
        ctx = SendContext(channel, request, header, tc, inners, queue_id, response)
        for hook in self.hooks:
            early = hook(ctx)
            if early is not None:
                return early
        result = self.put_batch(ctx.inner)  # type: ignore[arg-type]
        return self._answer(ctx, result)

    # -- answering ------------------------------------------------------------------------

    def _answer(self, ctx: SendContext, result: Any) -> RemotingCommand | Awaitable[RemotingCommand]:
        if type(result) is not PutMessageResult and inspect.isawaitable(result):
            self._waiting.add(ctx)
            if isinstance(result, asyncio.Future):
                # A SYNC_MASTER put waiting for its slave: a future answered by a callback
                # (the channel takes a future without a task), not a coroutine.
                answer: asyncio.Future[RemotingCommand] = result.get_loop().create_future()
                result.add_done_callback(functools.partial(self._answer_done, ctx, answer))
                return answer
            return self._answer_later(ctx, result)
        return self._handle_put_result(ctx, result)

    def _answer_done(self, ctx: SendContext, answer: asyncio.Future[RemotingCommand],
                     result: asyncio.Future[PutMessageResult]) -> None:
        self._waiting.discard(ctx)
        if answer.done():
            return
        if result.cancelled():
            answer.cancel()
            return
        try:
            answer.set_result(self._handle_put_result(ctx, result.result()))
        except Exception as exc:
            answer.set_exception(exc)

    async def _answer_later(self, ctx: SendContext,
                            result: Awaitable[PutMessageResult]) -> RemotingCommand:
        try:
            return self._handle_put_result(ctx, await result)
        finally:
            self._waiting.discard(ctx)

    def _handle_put_result(self, ctx: SendContext, result: PutMessageResult | None) -> RemotingCommand:
        response = ctx.response
        if result is None:
            return _fail_response(response, ResponseCode.SYSTEM_ERROR, "store putMessage return null")
        status = result.status
        # Enum hashing is Python code: test the usual status by identity first.
        code = ResponseCode.SUCCESS if status is _PUT_OK else _STORED.get(status)
        if code is None or result.append_result is None:
            self._b.stats.on_put_failed()
            if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
                max_size = self._b.store_config.max_message_size
                return _fail_response(
                    response, ResponseCode.MESSAGE_ILLEGAL,
                    f"the message is illegal, maybe msg body or properties length not matched. "
                    f"msg body length limit {max_size}B, msg properties length limit 32KB.")
            if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                return _fail_response(
                    response, ResponseCode.SERVICE_NOT_AVAILABLE,
                    "service not available now. It may be caused by one of the following "
                    f"reasons: the broker's disk is full [{self._disk_util()}], messages are put "
                    "to the slave, message store has been shut down, etc.")
            return _fail_response(response, ResponseCode.SYSTEM_ERROR,
                                  _FAILED_REMARKS.get(status, "UNKNOWN_ERROR DEFAULT"))
        append = result.append_result
        self._b.stats.on_put(ctx.topic_config.topic_name, append.msg_num, append.wrote_bytes)
        response.code = code
        response.remark = None
        ext = response.ext_fields
        assert ext is not None
        ext["msgId"] = append.msg_id
        ext["queueId"] = str(ctx.response_queue_id)
        ext["queueOffset"] = str(append.logics_offset)
        return response

    def _disk_util(self) -> str:
        root = self._b.store_config.store_path_root_dir
        try:
            usage = shutil.disk_usage(root)
            ratio = usage.used / usage.total if usage.total else 0.0
        except OSError:
            ratio = -1.0
        return f"CL: {ratio:5.2f} CQ: {ratio:5.2f} INDEX: {ratio:5.2f}"


def _refuse(response: RemotingCommand, code: int, remark: str) -> TopicConfig | None:
    """Set ``response`` to a refusal; ``None`` tells ``msg_check``'s caller to send it."""
    response.code = code
    response.remark = remark
    return None


def _fail_response(response: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    response.code = code
    response.remark = remark
    return response


def stored_properties(raw: str, cluster: str) -> tuple[dict[str, str], str, str | None]:
    """A single send's properties: the map the store reads, the string it stores, WAIT's value.

    The map is ``decode_properties(raw)`` with ``CLUSTER`` = ``cluster`` (after the
    sender's keys, before ``WAIT``); the string is ``encode_properties`` of that map without
    ``WAIT`` (upstream stores the string without WAIT, 9 bytes saved per message, but keeps
    WAIT in the map the store reads for SYNC_FLUSH), computed by slicing ``raw`` when it is
    canonical. ``_put.send_properties`` (C) gives the same for canonical strings.
    """
    props = decode_properties(raw)
    canonical = _CLUSTER not in props and len(props) == raw.count(_PS) + 1
    props[_CLUSTER] = cluster
    wait = props.pop(_WAIT, None)
    if not canonical:
        base = None
    elif wait is None:
        base = raw
    else:
        base = _without_segment(raw, _WAIT + _NV + wait)
    if base is None:
        stored = encode_properties(props)
    else:  # encode_properties(props) by slicing: CLUSTER is the last key added
        stored = f"{base}{_PS}{_CLUSTER}{_NV}{cluster}" if base else f"{_CLUSTER}{_NV}{cluster}"
    if wait is not None:
        props[_WAIT] = wait
    return props, stored, wait


def batch_members(body: Any, topic: str, batch_props: dict[str, str], batch_str: str
                  ) -> list[tuple[int, bytes, dict[str, str], str]]:
    """A SEND_BATCH_MESSAGE body's members: (flag, body, properties, stored string) each.

    The properties are the member's with ``batch_props`` (the batch's, ``CLUSTER`` added)
    over them; the stored string is the member's properties encoded, then ``batch_str``
    (their encoding). ``_put.batch_members`` (C) gives the same for bodies whose members
    have canonical properties. Raises ``HeaderError`` for a body that does not decode.
    """
    try:
        decoded = decode_batch(body, topic=topic)
    except ProtocolError as exc:
        raise HeaderError(f"SEND_BATCH_MESSAGE body does not decode: {exc}") from exc
    members = []
    for m in decoded:
        own = encode_properties(m.properties)
        stored = own + _PS + batch_str if own and not own.endswith(_PS) else own + batch_str
        merged = dict(m.properties)
        merged.update(batch_props)
        members.append((m.flag, m.body, merged, stored))
    return members


def _without_segment(raw: str, segment: str) -> str | None:
    """``raw`` without ``segment`` and its separator, or ``None`` if it is not a whole segment.

    For a canonical properties string (each ``\x02``-separated segment one distinct
    ``key\x01value`` pair, nothing empty: what ``encode_properties`` writes), this is
    ``encode_properties`` of its map without that key, computed by slicing: the send
    path's stored string without ``WAIT``, with no split and join per message.
    """
    n = len(segment)
    if raw.startswith(segment):
        if len(raw) == n:
            return ""
        if raw[n] == _PS:
            return raw[n + 1:]
    if raw.endswith(_PS + segment):
        return raw[:-(n + 1)]
    i = raw.find(_PS + segment + _PS)
    if i < 0:
        return None
    return raw[:i] + raw[i + n + 1:]


def _born_host(channel: Channel) -> bytes:
    # Computed once per connection: the peer address does not change.
    attrs = channel.attrs
    host = attrs.get(_BORN_HOST)
    if host is None:
        try:
            host = socket_address_to_bytes(channel.remote_addr)
        except ValueError:
            host = bytes(8)  # not an IP peer (tests over a pipe); upstream would fail later
        attrs[_BORN_HOST] = host
    return host


def _topic_config_str(tc: TopicConfig) -> str:
    return (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={Perm.to_string(tc.perm)}, "
            f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
            f"order={'true' if tc.order else 'false'}]")
