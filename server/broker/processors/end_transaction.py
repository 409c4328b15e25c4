"""END_TRANSACTION (37) (upstream ``EndTransactionProcessor``; docs/PROTOCOL.md 4.8, 6.6).

Contract:

* A slave answers SLAVE_NOT_AVAILABLE. ``commitOrRollback`` 0 (unknown) or any value
  other than 8 / 12 gets no answer at all (logged), whether or not it comes from a check.
* The half message is looked up at ``commitLogOffset`` (missing: SYSTEM_ERROR
  ``Find prepared transaction message failed``) and must match the request: its
  ``PGROUP`` equals ``producerGroup`` (``The producer group wrong``), its queue offset
  equals ``tranStateTableOffset`` (``The transaction state table offset wrong``), its
  commit-log offset equals ``commitLogOffset`` (``The commit log offset wrong``).
* Commit (8): the message is rebuilt in ``REAL_TOPIC`` / ``REAL_QID`` with sysflag
  COMMIT and ``preparedTransactionOffset = commitLogOffset``, its stored properties the
  half record's (``TRAN_MSG``, ``PGROUP``, ``REAL_*``, ``WAIT`` kept: the 4.9.x quirk), and
  stored; once stored, the remove op is written. Put failures map to upstream's codes.
* Rollback (12): only the remove op.
* The request is normally oneway (the Channel then writes nothing); a two-way request
  gets SUCCESS or the error above.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import EndTransactionRequestHeader, decode_header
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.server.store.inner import PutMessageStatus

from ..transaction import TransactionalMessageService, end_message_transaction

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["EndTransactionProcessor", "check_prepare_message"]

log = get_logger("aiorocketmq.broker.end_transaction")

_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_NAMES = {MessageSysFlag.TRANSACTION_NOT_TYPE: "UNKNOWN", _COMMIT: "COMMIT", _ROLLBACK: "ROLLBACK"}

# sendFinalMessage: put status -> (code, remark).
_PUT_ANSWERS: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SUCCESS, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR,
                                         "OS page cache busy, please try another machine"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def check_prepare_message(msg: MessageExt | None, header: EndTransactionRequestHeader) -> str | None:
    """``checkPrepareMessage``: ``None`` when ``msg`` is the half message the request names,
    else upstream's remark (answered with SYSTEM_ERROR)."""
    if msg is None:
        return "Find prepared transaction message failed"
    if msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) != header.producer_group:
        return "The producer group wrong"
    if msg.queue_offset != header.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if msg.commit_log_offset != header.commit_log_offset:
        return "The commit log offset wrong"
    return None


class EndTransactionProcessor:
    """END_TRANSACTION over the broker's ``TransactionalMessageService``."""

    def __init__(self, broker: BrokerController, service: TransactionalMessageService) -> None:
        self._b = broker
        self._service = service

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, channel: Channel, request: RemotingCommand
                        ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        header = decode_header(EndTransactionRequestHeader, request)
        if self._b.store_config.broker_role == "SLAVE":
            return request.create_response(ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = header.commit_or_rollback
        log.info("broker.end_transaction", kind=_NAMES.get(kind, kind), peer=channel.remote_addr,
                 from_check=bool(header.from_transaction_check), msg_id=header.msg_id,
                 commit_log_offset=header.commit_log_offset, remark=request.remark)
        if kind not in (_COMMIT, _ROLLBACK):
            return None
        return self._end(request, header, kind)

    async def _end(self, request: RemotingCommand, header: EndTransactionRequestHeader,
                   kind: int) -> RemotingCommand:
        msg = self._service.get_half_message(header.commit_log_offset)
        remark = check_prepare_message(msg, header)
        if remark is not None:
            log.warning("broker.end_transaction_refused", reason=remark, msg_id=header.msg_id,
                        commit_log_offset=header.commit_log_offset)
            return request.create_response(ResponseCode.SYSTEM_ERROR, remark)
        assert msg is not None
        if kind == _ROLLBACK:
            await self._service.delete_prepare_message(msg)
            return request.create_response(ResponseCode.SUCCESS)
        try:
            inner = end_message_transaction(msg, kind, header.commit_log_offset)
        except ValueError as exc:
            return request.create_response(ResponseCode.SYSTEM_ERROR, str(exc))
        result = await self._b.store.put_message(inner)
        code, remark = _PUT_ANSWERS.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        if result.status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            code = ResponseCode.MESSAGE_ILLEGAL
            remark = ("The message is illegal, maybe msg body or properties length not matched. "
                      f"msg body length limit {self._b.store_config.max_message_size}B, "
                      "msg properties length limit 32KB.")
        if code == ResponseCode.SUCCESS:
            await self._service.delete_prepare_message(msg)
        return request.create_response(code, remark)
