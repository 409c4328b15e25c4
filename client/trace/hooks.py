"""What a traced producer or consumer records, and when (upstream 4.9.7
``SendMessageTraceHookImpl``, ``ConsumeMessageTraceHookImpl``, ``EndTransactionTraceHookImpl``).

* ``send_before`` / ``send_after``: a ``Pub`` record per send attempt that got a result (not
  for oneway sends nor failed ones), skipped when the broker answered without ``MSG_REGION``
  or with ``TRACE_ON=false``; cost = the attempt's milliseconds, success = SEND_OK; messages
  to the trace topic itself are never traced. msgType: Trans_Msg_Half for a half message,
  Delay_Msg with a delay level, else Normal_Msg.
* ``consume_before`` / ``consume_after``: a ``SubBefore`` record (one bean per message
  whose ``TRACE_ON`` property is not ``false``) before the listener runs, and a ``SubAfter``
  with the same request id after it: success, cost per message, contextCode =
  ``ConsumeReturnType`` (SUCCESS, TIME_OUT, EXCEPTION, RETURNNULL, FAILED).
* ``end_transaction``: an ``EndTransaction`` record (msgType Trans_msg_Commit, the local
  transaction state's name, whether it answers a broker check).

Every method is cheap and never raises into the caller's send or consume.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiorocketmq.protocol.codes import MessageConst, MixAll
from aiorocketmq.protocol.message import Message, MessageExt

from ..api import SendResult, SendStatus, now_ms
from .data import ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from .dispatcher import AsyncTraceDispatcher

__all__ = ["Tracer"]

_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS
_REGION = MessageConst.PROPERTY_MSG_REGION
_TRACE_ON = MessageConst.PROPERTY_TRACE_SWITCH
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_PREPARED = MessageConst.PROPERTY_TRANSACTION_PREPARED


class Tracer:
    """A producer's or consumer's trace hooks over its ``AsyncTraceDispatcher``."""

    __slots__ = ("dispatcher", "group", "strip_namespace")

    def __init__(self, dispatcher: AsyncTraceDispatcher, group: str,
                 strip_namespace: object = None) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.strip_namespace = strip_namespace

    def _plain(self, name: str) -> str:
        strip = self.strip_namespace
        return strip(name) if callable(strip) else name

    def is_trace_topic(self, topic: str) -> bool:
        return topic.startswith(self.dispatcher.trace_topic)

    # -- producer --------------------------------------------------------------------------

    def send_before(self, msg: Message, broker_addr: str, body_length: int) -> TraceContext | None:
        if self.is_trace_topic(msg.topic):
            return None
        props = msg.properties
        msg_type = MessageType.Normal_Msg
        if props.get(_PREPARED) == "true":
            msg_type = MessageType.Trans_Msg_Half
        if props.get("__STARTDELIVERTIME") is not None or props.get(_DELAY) is not None:
            msg_type = MessageType.Delay_Msg
        bean = TraceBean(topic=self._plain(msg.topic), tags=props.get(_TAGS), keys=props.get(_KEYS),
                         store_host=broker_addr, body_length=body_length, msg_type=msg_type)
        return TraceContext(TraceType.Pub, group_name=self._plain(self.group), beans=[bean])

    def send_after(self, ctx: TraceContext | None, result: SendResult | None) -> None:
        if ctx is None or result is None or result.region_id is None or not result.trace_on:
            return
        bean = ctx.beans[0]
        ctx.cost_time = now_ms() - ctx.time_stamp
        ctx.success = result.status is SendStatus.SEND_OK
        ctx.region_id = result.region_id
        bean.msg_id = result.msg_id or ""
        bean.offset_msg_id = result.offset_msg_id
        bean.store_time = ctx.time_stamp + ctx.cost_time // 2
        self.dispatcher.append(ctx)

    def end_transaction(self, msg: Message, msg_id: str, broker_addr: str | None, state: str,
                        transaction_id: str | None, from_check: bool, client_id: str) -> None:
        if self.is_trace_topic(msg.topic):
            return
        props = msg.properties
        bean = TraceBean(topic=self._plain(msg.topic), msg_id=msg_id, tags=props.get(_TAGS),
                         keys=props.get(_KEYS), store_host=broker_addr, client_host=client_id,
                         msg_type=MessageType.Trans_msg_Commit, transaction_state=state,
                         transaction_id=transaction_id, from_transaction_check=from_check)
        region = props.get(_REGION) or MixAll.DEFAULT_TRACE_REGION_ID
        self.dispatcher.append(TraceContext(TraceType.EndTransaction, region_id=region,
                                            group_name=self._plain(self.group), beans=[bean]))

    # -- consumer --------------------------------------------------------------------------

    def consume_before(self, msgs: Sequence[MessageExt]) -> TraceContext | None:
        if not msgs:
            return None
        ctx = TraceContext(TraceType.SubBefore, group_name=self._plain(self.group))
        region: str | None = ""
        for m in msgs:
            props = m.properties
            if props.get(_TRACE_ON) == "false":
                continue
            region = props.get(_REGION)
            ctx.beans.append(TraceBean(topic=self._plain(m.topic), msg_id=m.msg_id,
                                       tags=props.get(_TAGS), keys=props.get(_KEYS),
                                       store_time=m.store_timestamp, body_length=m.store_size,
                                       retry_times=m.reconsume_times))
        if not ctx.beans:
            return ctx
        ctx.region_id = region
        ctx.time_stamp = now_ms()
        self.dispatcher.append(ctx)
        return ctx

    def consume_after(self, before: TraceContext | None, msgs: Sequence[MessageExt],
                      success: bool, return_type: ConsumeReturnType) -> None:
        if before is None or not before.beans or not msgs:
            return
        after = TraceContext(TraceType.SubAfter, region_id=before.region_id,
                             group_name=before.group_name, request_id=before.request_id,
                             success=success, beans=before.beans,
                             cost_time=(now_ms() - before.time_stamp) // len(msgs),
                             context_code=int(return_type))
        self.dispatcher.append(after)
