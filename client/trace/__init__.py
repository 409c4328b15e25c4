"""Message trace, compatible with stock 4.9.7 clients and ``mqadmin queryMsgTraceById``
(upstream ``org.apache.rocketmq.client.trace``).

With ``enable_msg_trace=True`` a ``Producer`` / ``TransactionProducer`` records ``Pub``
(and ``EndTransaction``) records and a ``PushConsumer`` ``SubBefore`` / ``SubAfter`` records;
an ``AsyncTraceDispatcher`` batches them into messages on the trace topic
(``RMQ_SYS_TRACE_TOPIC``, or ``trace_topic``) keyed by each message's msgId and keys. The
broker must have that topic: ``traceTopicEnable=true`` creates ``msgTraceTopicName``, or
topic auto-creation does.

* ``data``: the records, their text form (``TraceDataEncoder``) and ``TraceView``;
* ``dispatcher``: ``AsyncTraceDispatcher``, the bounded, never-blocking batcher and sender;
* ``hooks``: ``Tracer``, what a producer or consumer records and when.
"""

from __future__ import annotations

from .data import TraceBean, TraceContext, TraceType, TraceView, decode, encode, trace_views
from .dispatcher import AsyncTraceDispatcher
from .hooks import Tracer

__all__ = ["AsyncTraceDispatcher", "Tracer", "TraceBean", "TraceContext", "TraceType", "TraceView",
           "decode", "encode", "trace_views"]
