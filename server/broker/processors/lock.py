"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) (upstream ``AdminBrokerProcessor.lockBatchMQ`` /
``unlockBatchMQ``; docs/PROTOCOL.md 4.7).

* LOCK_BATCH_MQ: no header; body ``LockBatchRequestBody``. SUCCESS with body
  ``{"lockOKMQSet":[...]}``: the subset of ``mqSet`` locked by ``clientId`` after the call
  (``RebalanceLockManager.try_lock_batch``).
* UNLOCK_BATCH_MQ: body ``UnlockBatchRequestBody``; bare SUCCESS. The Java client may send
  it oneway, in which case the Channel writes no answer.
* A missing or undecodable body is a ``HeaderError`` (SYSTEM_ERROR with the reason).

Both handlers are plain functions: the lock table is in memory and never waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiorocketmq.protocol.bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import HeaderError, ProtocolError

from ..rebalance_lock import RebalanceLockManager

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["LockProcessor"]


class LockProcessor:
    """The two lock codes over one ``RebalanceLockManager``."""

    def __init__(self, broker: BrokerController | None = None, *,
                 locks: RebalanceLockManager | None = None) -> None:
        if locks is None:
            if broker is None:
                raise ValueError("LockProcessor needs a broker or a lock manager")
            locks = broker.rebalance_locks
        self.locks = locks

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
        }

    def lock_batch_mq(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        body = _decode(LockBatchRequestBody, request, "LOCK_BATCH_MQ")
        locked = self.locks.try_lock_batch(body.consumer_group, dict.fromkeys(body.mq_set),
                                           body.client_id)
        return request.create_response(ResponseCode.SUCCESS, None, None,
                                       LockBatchResponseBody(locked).encode())

    def unlock_batch_mq(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        body = _decode(UnlockBatchRequestBody, request, "UNLOCK_BATCH_MQ")
        self.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.create_response(ResponseCode.SUCCESS)


def _decode(cls: type[LockBatchRequestBody] | type[UnlockBatchRequestBody],
            request: RemotingCommand, what: str) -> LockBatchRequestBody:
    if not request.body:
        raise HeaderError(f"{what} without a body")
    try:
        return cls.decode(request.body)  # type: ignore[return-value]  # same shape
    except ProtocolError as exc:
        raise HeaderError(f"{what} body does not decode: {exc}") from exc
