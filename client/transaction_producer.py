"""TransactionProducer: half message, local transaction, END_TRANSACTION, and answers to checks.

Upstream ``producer.TransactionMQProducer``, ``TransactionListener``,
``LocalTransactionState``, ``TransactionSendResult`` and ``DefaultMQProducerImpl``
(``sendMessageInTransaction``, ``endTransaction``, ``checkTransactionState``);
docs/PROTOCOL.md 4.8, 6.6, vectors scenario ``tx``.

Contract:

* ``send_message_in_transaction(msg, arg)``: ``DELAY`` is removed, ``TRAN_MSG=true`` and
  ``PGROUP=<group>`` are set, and the message is sent like a sync send (the producer's
  send sets the PREPARED sysflag from ``TRAN_MSG``). On SEND_OK the message's
  ``transaction_id`` becomes its UNIQ_KEY and ``execute_local_transaction(msg, arg)`` runs
  (a plain or an ``async`` callable); its result, ``None`` or an exception count as
  UNKNOW. Any other send status means ROLLBACK_MESSAGE without running it.
* END_TRANSACTION then goes **oneway** to the broker that stored the half message, exactly
  as the 4.9.7 client writes it (frame id 814): ``producerGroup``, ``tranStateTableOffset``
  = the send's queue offset, ``commitLogOffset`` decoded from the offset msg id,
  ``commitOrRollback`` 8 / 12 / 0, ``fromTransactionCheck=false``, ``msgId`` = UNIQ_KEY,
  ``bname``; no ``transactionId``; the local exception text as remark. A failed
  END_TRANSACTION is logged, not raised: the broker's check-back settles it.
* CHECK_TRANSACTION_STATE (dispatched by the client instance to ``check_transaction_state``)
  is queued on a bounded queue (``check_request_hold_max``) served by
  ``check_workers`` tasks; a full queue drops the check (the broker asks again later),
  as upstream's rejecting executor. Each runs ``check_local_transaction(msg)`` and
  answers END_TRANSACTION oneway to the asking broker with ``fromTransactionCheck=true``,
  the check's offsets, ``transactionId`` from the check, ``msgId`` = UNIQ_KEY and **no
  ``bname``** (frame id 824).
* ``shutdown()`` stops the check workers (a check being answered is cancelled; the broker
  asks again) before the producer itself shuts down.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag
from aiorocketmq.protocol.errors import MQClientError, RocketMQError
from aiorocketmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from aiorocketmq.protocol.message import Message, MessageExt, decode_offset_msg_id
from aiorocketmq.protocol.routine import cancel_and_wait

from .api import SendResult, SendStatus
from .producer import Producer

__all__ = [
    "TransactionProducer",
    "LocalTransactionState",
    "TransactionSendResult",
    "ExecuteLocalTransaction",
    "CheckLocalTransaction",
]

log = get_logger("aiorocketmq.client.transaction")

END_TRANSACTION_TIMEOUT = 3.0  # endTransactionOneway(..., 3000)


class LocalTransactionState(enum.Enum):
    """``LocalTransactionState`` (``UNKNOW`` is upstream's spelling)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_WIRE_STATE = {
    LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: MessageSysFlag.TRANSACTION_NOT_TYPE,
}

ExecuteLocalTransaction = Callable[[Message, Any], "LocalTransactionState | None | Awaitable[LocalTransactionState | None]"]
CheckLocalTransaction = Callable[[MessageExt], "LocalTransactionState | None | Awaitable[LocalTransactionState | None]"]


@dataclass(slots=True)
class TransactionSendResult:
    """``TransactionSendResult``: the half message's send result and the local outcome."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def msg_id(self) -> str | None:
        return self.send_result.msg_id

    @property
    def status(self) -> SendStatus:
        return self.send_result.status


async def _call_listener(fn: Callable[..., Any], *args: Any) -> tuple[LocalTransactionState, str | None]:
    """Run a listener (plain or async); ``None`` or a failure is UNKNOW (with the error text)."""
    try:
        state = fn(*args)
        if inspect.isawaitable(state):
            state = await state
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("client.transaction.listener_failed", error=repr(exc))
        return LocalTransactionState.UNKNOW, f"{type(exc).__name__}: {exc}"
    if state is None:
        return LocalTransactionState.UNKNOW, None
    if not isinstance(state, LocalTransactionState):
        return LocalTransactionState.UNKNOW, f"listener returned {state!r}"
    return state, None


class TransactionProducer(Producer):
    """A producer of transactional messages (upstream ``TransactionMQProducer``).

    Args:
        group: producer group; the broker sends its checks to a live member of it.
        execute_local_transaction: ``f(msg, arg) -> LocalTransactionState`` (or a coroutine
            function), run after the half message is stored.
        check_local_transaction: ``f(msg) -> LocalTransactionState`` (or a coroutine
            function), run when the broker asks about an unresolved transaction.
        check_workers: concurrent check answers (upstream ``checkThreadPoolMinSize``, 1).
        check_request_hold_max: queued checks beyond which new ones are dropped (2000).
        Everything else as ``Producer``.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 execute_local_transaction: ExecuteLocalTransaction | None = None,
                 check_local_transaction: CheckLocalTransaction | None = None,
                 check_workers: int = 1, check_request_hold_max: int = 2000,
                 **kwargs: Any) -> None:
        super().__init__(group, namesrv_addr, **kwargs)
        if check_workers < 1 or check_request_hold_max < 1:
            raise MQClientError("TransactionProducer: check_workers and check_request_hold_max "
                                "must be positive")
        self.execute_local_transaction = execute_local_transaction
        self.check_local_transaction = check_local_transaction
        self._check_workers = check_workers
        self._checks: asyncio.Queue[tuple[str, MessageExt, CheckTransactionStateRequestHeader]] = \
            asyncio.Queue(maxsize=check_request_hold_max)
        self._worker_tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        if self.check_local_transaction is None:
            raise MQClientError("TransactionProducer needs check_local_transaction")
        await super().start()
        for i in range(self._check_workers):
            self._worker_tasks.append(asyncio.create_task(
                self._check_routine(), name=f"transactionCheck[{self.group}#{i}]"))

    async def shutdown(self) -> None:
        tasks, self._worker_tasks = self._worker_tasks, []
        await cancel_and_wait(tasks)
        await super().shutdown()

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    # -- sending --------------------------------------------------------------------------

    async def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                          timeout: float | None = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it (module docstring).

        Raises:
            MQClientError: no ``execute_local_transaction``, the producer is not running,
                or the half message could not be sent (the cause is chained).
        """
        if self.execute_local_transaction is None:
            raise MQClientError("TransactionListener is null")
        props = msg.properties
        props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[MessageConst.PROPERTY_PRODUCER_GROUP] = self.group
        try:
            result = await self.send(msg, timeout=timeout)
        except RocketMQError as exc:
            raise MQClientError("send message Exception") from exc
        remark: str | None = None
        if result.status is SendStatus.SEND_OK:
            uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq:
                msg.transaction_id = uniq
            state, remark = await _call_listener(self.execute_local_transaction, msg, arg)
            if state is not LocalTransactionState.COMMIT_MESSAGE:
                log.info("client.transaction.local_state", group=self.group, msg_id=result.msg_id,
                         state=state.value)
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        tracer = self._tracer
        if tracer is not None and self.instance is not None:
            tracer.end_transaction(
                msg, result.msg_id or "",
                self.instance.find_broker_address_in_publish(result.message_queue.broker_name),
                state.value, result.transaction_id, False, self.instance.client_id)
        try:
            await self.end_transaction(result, state, remark)
        except RocketMQError as exc:
            # As upstream: the broker's check-back settles a transaction whose end was lost.
            log.warning("client.transaction.end_failed", group=self.group, msg_id=result.msg_id,
                        state=state.value, error=str(exc))
        return TransactionSendResult(result, state)

    def build_end_transaction_header(self, result: SendResult, state: LocalTransactionState
                                     ) -> EndTransactionRequestHeader:
        """``endTransaction``'s header for a half message's send result."""
        offset_id = result.offset_msg_id or result.msg_id or ""
        _, commit_log_offset = decode_offset_msg_id(offset_id)
        return EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=_WIRE_STATE[state],
            from_transaction_check=False, msg_id=result.msg_id or "",
            transaction_id=result.transaction_id, bname=result.message_queue.broker_name)

    async def end_transaction(self, result: SendResult, state: LocalTransactionState,
                              remark: str | None = None) -> None:
        """END_TRANSACTION oneway to the broker that stored the half message."""
        inst = self._check_running()
        header = self.build_end_transaction_header(result, state)
        addr = inst.find_broker_address_in_publish(result.message_queue.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{result.message_queue.broker_name}] not exist")
        await inst.api.end_transaction_oneway(addr, header, remark, END_TRANSACTION_TIMEOUT)

    # -- checks (ProducerHook) ------------------------------------------------------------

    def check_transaction_state(self, addr: str, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        """Queue a broker's check; dropped (and logged) when the queue is full."""
        try:
            self._checks.put_nowait((addr, msg, header))
        except asyncio.QueueFull:
            log.warning("client.transaction.check_dropped", group=self.group, broker=addr,
                        msg_id=header.msg_id, reason="check queue full")

    async def _check_routine(self) -> None:
        while True:
            addr, msg, header = await self._checks.get()
            try:
                await self._answer_check(addr, msg, header)
            except asyncio.CancelledError:
                raise
            except RocketMQError as exc:
                log.warning("client.transaction.check_answer_failed", group=self.group, broker=addr,
                            msg_id=header.msg_id, error=str(exc))

    async def _answer_check(self, addr: str, msg: MessageExt,
                            header: CheckTransactionStateRequestHeader) -> None:
        assert self.check_local_transaction is not None
        state, remark = await _call_listener(self.check_local_transaction, msg)
        uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        answer = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=_WIRE_STATE[state],
            from_transaction_check=True, msg_id=uniq, transaction_id=header.transaction_id)
        inst = self._check_running()
        if self._tracer is not None:
            self._tracer.end_transaction(msg, uniq, addr, state.value, header.transaction_id, True,
                                         inst.client_id)
        await inst.api.end_transaction_oneway(addr, answer, remark, END_TRANSACTION_TIMEOUT)
        log.info("client.transaction.check_answered", group=self.group, broker=addr, msg_id=uniq,
                 state=state.value)
