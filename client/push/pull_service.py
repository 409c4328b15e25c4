"""The push consumer's pull loop.

Upstream ``impl.consumer.PullMessageService`` (one routine serving a queue of
``PullRequest``s, ``executePullRequestImmediately`` / ``executePullRequestLater``) with
``DefaultMQPushConsumerImpl.pullMessage`` and its ``PullCallback``.

Contract: ``start()`` creates the bounded request queue (one ``PullRequest`` per owned
queue circulates through it) and the routine; ``dispatch`` queues a pull now (50 ms later
when the queue is full), ``pull_later`` after a delay, never after the consumer began to
stop. Each pull is sent asynchronously (PULL_MESSAGE, sysFlag SUSPEND [+COMMIT_OFFSET when
the in-memory offset is > 0], broker hold 15 s, client timeout 30 s); its answer is
handled in the response callback, which caches the messages, hands them to the consume
service (``submit``) and queues the next pull. Delays: 50 ms under flow control (cached
count > ``pull_threshold_for_queue``, size > ``pull_threshold_size_for_queue`` MiB, or
concurrent span > ``consume_concurrently_max_span``), 1 s when suspended, the client's
``pull_time_delay_ms_when_exception`` after an error (an unlocked orderly queue, no
subscription, a failed pull), 20 ms after FLOW_CONTROL; a subscription the broker lost
makes the instance heartbeat soon. FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL
are handled as upstream (OFFSET_ILLEGAL drops the queue and, 10 s later, stores the
broker's offset and lets rebalance re-create it). The broker a queue is pulled from next
follows the broker's ``suggestWhichBrokerId``. ``shutdown()`` cancels the routine;
delayed pulls are the consumer's timers.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue, SubscriptionData
from aiorocketmq.protocol.codes import MixAll, PullSysFlag, ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError
from aiorocketmq.protocol.headers import PullMessageRequestHeader

from ..api import PullResult, PullStatus, process_pull_result
from ..offset_store import ReadOffsetType
from ..rebalance import MessageModel, PullRequest
from ..selector import check_broker_version

if TYPE_CHECKING:
    from ..push_consumer import PushConsumer

__all__ = ["PullMessageService"]

log = get_logger("aiorocketmq.client.push_consumer")

PULL_DELAY_FLOW_CONTROL = 0.05  # PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
PULL_DELAY_SUSPEND = 1.0  # PULL_TIME_DELAY_MILLS_WHEN_SUSPEND
PULL_DELAY_BROKER_FLOW_CONTROL = 0.02  # FLOW_CONTROL response code
BROKER_SUSPEND_MAX_TIME_MS = 15_000
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0
OFFSET_ILLEGAL_DELAY = 10.0
# Pull answers meaning the broker does not have this client's subscription (restarted).
_SUBSCRIPTION_LOST = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                ResponseCode.SUBSCRIPTION_NOT_LATEST})


class PullMessageService:
    """Upstream ``PullMessageService`` plus ``DefaultMQPushConsumerImpl.pullMessage``."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self._queue: asyncio.Queue[PullRequest] | None = None
        self._task: asyncio.Task[None] | None = None
        self._pull_from_which_node: dict[MessageQueue, int] = {}

    def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=65536)
        self._task = asyncio.create_task(self._pull_routine(),
                                         name=f"pull[{self.consumer.group}]")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def dispatch(self, req: PullRequest) -> None:
        """Queue a pull now (``executePullRequestImmediately``)."""
        q = self._queue
        if q is None or self.consumer._stopping:
            return
        try:
            q.put_nowait(req)
        except asyncio.QueueFull:
            self.consumer._later(PULL_DELAY_FLOW_CONTROL, self.dispatch, req)

    def pull_later(self, req: PullRequest, delay: float) -> None:
        """``executePullRequestLater``."""
        self.consumer._later(delay, self.dispatch, req)

    def _pull_later_on_exception(self, req: PullRequest) -> None:
        self.pull_later(req, self.consumer.config.pull_time_delay_ms_when_exception / 1000)

    async def _pull_routine(self) -> None:
        q = self._queue
        assert q is not None
        while True:
            req = await q.get()
            try:
                await self._pull_message(req)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client.push_consumer.pull_failed", group=self.consumer.group,
                            mq=str(req.message_queue), error=repr(exc))
                self._pull_later_on_exception(req)

    async def _pull_message(self, req: PullRequest) -> None:
        """``DefaultMQPushConsumerImpl.pullMessage``: checks, then one async PULL_MESSAGE."""
        c = self.consumer
        pq = req.process_queue
        if pq.dropped:
            return
        pq.touch_pull()
        if c._pause:
            self.pull_later(req, PULL_DELAY_SUSPEND)
            return
        if pq.msg_count > c.pull_threshold_for_queue or \
                pq.msg_size / (1024 * 1024) > c.pull_threshold_size_for_queue:
            self.pull_later(req, PULL_DELAY_FLOW_CONTROL)
            return
        if not c.consume_orderly:
            if pq.max_span > c.consume_concurrently_max_span:
                self.pull_later(req, PULL_DELAY_FLOW_CONTROL)
                return
        else:
            if not pq.locked:
                self._pull_later_on_exception(req)
                return
            if not req.previously_locked:
                assert c.rebalance is not None
                offset = await c.rebalance.compute_pull_from_where(req.message_queue)
                if offset < 0:
                    self._pull_later_on_exception(req)
                    return
                req.previously_locked = True
                req.next_offset = offset
        assert c.rebalance is not None and c.instance is not None
        if not c.rebalance.version_announced.is_set():
            await c.rebalance.version_announced.wait()
            if pq.dropped:
                return
        mq = req.message_queue
        sd = c.rebalance.subscription_inner.get(mq.topic)
        if sd is None:
            self._pull_later_on_exception(req)
            return
        commit_offset = 0
        if c.message_model is MessageModel.CLUSTERING:
            commit_offset = await c.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        commit = commit_offset > 0
        sub_expression = sd.sub_string if c.post_subscription_when_pull and \
            not sd.class_filter_mode else None
        inst = c.instance
        broker_id = self._pull_from_which_node.get(mq, MixAll.MASTER_ID)
        found = inst.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            await inst.update_topic_route(mq.topic)
            found = inst.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        if found.slave:
            commit = False
        check_broker_version(sd, mq.broker_name, found.version)
        header = PullMessageRequestHeader(
            consumer_group=c.group, topic=mq.topic, queue_id=mq.queue_id,
            queue_offset=req.next_offset, max_msg_nums=c.pull_batch_size,
            sys_flag=PullSysFlag.build(commit, True, sub_expression is not None),
            commit_offset=commit_offset if commit_offset > 0 else 0,
            suspend_timeout_millis=BROKER_SUSPEND_MAX_TIME_MS,
            subscription=sub_expression, sub_version=sd.sub_version,
            expression_type=sd.expression_type, bname=mq.broker_name)

        def on_result(result: PullResult | None, exc: BaseException | None) -> None:
            if c._stopping:
                return
            if result is not None:
                try:
                    self._on_pull_success(req, sd, result)
                except Exception as err:
                    log.exception("client.push_consumer.pull_result_failed", mq=str(mq))
                    self._on_pull_exception(req, err)
            else:
                assert exc is not None
                self._on_pull_exception(req, exc)

        await inst.api.pull_message_async(found.addr, header, CONSUMER_TIMEOUT_WHEN_SUSPEND,
                                          on_result)

    def _on_pull_exception(self, req: PullRequest, exc: BaseException) -> None:
        """``PullCallback.onException``."""
        c = self.consumer
        if not req.message_queue.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            log.warning("client.push_consumer.pull_exception", group=c.group,
                        mq=str(req.message_queue), error=repr(exc))
        if isinstance(exc, MQBrokerError) and exc.code == ResponseCode.FLOW_CONTROL:
            self.pull_later(req, PULL_DELAY_BROKER_FLOW_CONTROL)
            return
        if isinstance(exc, MQBrokerError) and exc.code in _SUBSCRIPTION_LOST \
                and c.instance is not None:
            c.instance.heartbeat_soon()  # the broker learns the subscription again
        self._pull_later_on_exception(req)

    def _on_pull_success(self, req: PullRequest, sd: SubscriptionData, result: PullResult) -> None:
        """``PullCallback.onSuccess``."""
        c = self.consumer
        mq = req.message_queue
        pq = req.process_queue
        self._pull_from_which_node[mq] = result.suggest_which_broker_id
        result = process_pull_result(mq, result, sd)
        status = result.status
        if status is PullStatus.FOUND:
            prev = req.next_offset
            req.next_offset = result.next_begin_offset
            msgs = result.msg_found_list
            if not msgs:
                self.dispatch(req)
                return
            dispatch = pq.put_messages(msgs)
            c._submit_consume(msgs, pq, mq, dispatch)
            if c.pull_interval_ms > 0:
                self.pull_later(req, c.pull_interval_ms / 1000)
            else:
                self.dispatch(req)
            if result.next_begin_offset < prev or msgs[0].queue_offset < prev:
                log.warning("client.push_consumer.pull_offset_went_back", mq=str(mq), prev=prev,
                            next=result.next_begin_offset, first=msgs[0].queue_offset)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            req.next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # correctTagsOffset
                c.offset_store.update_offset(mq, req.next_offset, True)
            self.dispatch(req)
        else:  # OFFSET_ILLEGAL
            log.warning("client.push_consumer.offset_illegal", group=c.group, mq=str(mq),
                        offset=req.next_offset, next=result.next_begin_offset)
            req.next_offset = result.next_begin_offset
            pq.dropped = True
            c._spawn(self._offset_illegal_later(req), f"offset-illegal[{mq}]")

    async def _offset_illegal_later(self, req: PullRequest) -> None:
        c = self.consumer
        await asyncio.sleep(OFFSET_ILLEGAL_DELAY)  # upstream's delayed correction task
        mq = req.message_queue
        c.offset_store.update_offset(mq, req.next_offset, False)
        await c.offset_store.persist(mq)
        if c.rebalance is not None:
            c.rebalance.remove_process_queue(mq)
        log.warning("client.push_consumer.offset_illegal_fixed", group=c.group, mq=str(mq),
                    offset=req.next_offset)
