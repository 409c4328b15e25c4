"""A message's trace as ``mqadmin queryMsgTraceById`` prints it (upstream 4.9.7
``QueryMsgTraceByIdSubCommand``).

``query_trace_views(admin, msg_id, trace_topic)`` asks every broker of the trace topic for
the trace messages indexed under ``msg_id`` (QUERY_MESSAGE, at most 64, any time up to now)
and decodes the records about that message. ``format_trace_views(views)`` prints them as
the stock tool: each ``Pub`` record with its own header, then the ``SubAfter`` records
grouped by consumer group (groups in ``java.util.HashMap`` order, as the tool's map),
times in local time ``yyyy-MM-dd HH:mm:ss``; ``SubBefore`` and ``EndTransaction`` records are
not printed. The client host is the trace message's born host.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aiorocketmq.protocol.codes import SystemTopic
from aiorocketmq.protocol.javautil import java_hashmap_order

from .data import TraceView, trace_views

if TYPE_CHECKING:
    from ..admin.api import MQAdmin

__all__ = ["query_trace_views", "format_trace_views"]

_ROW = "%-10s %-20s %-20s %-20s %-10s %-10s\n"


def _host(addr: str) -> str:
    """``getBornHostString``: the address without its port."""
    host = addr.rpartition(":")[0] or addr
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


async def query_trace_views(admin: MQAdmin, msg_id: str,
                            trace_topic: str | None = None) -> list[TraceView]:
    topic = trace_topic or SystemTopic.TRACE_TOPIC
    msgs = await admin.query_message_by_key(topic, msg_id, max_num=64, begin_ms=0,
                                            end_ms=time.time_ns() // 1_000_000)
    views: list[TraceView] = []
    for m in msgs:
        views.extend(trace_views(msg_id, m.body, _host(m.born_host)))
    return views


def _time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def format_trace_views(views: list[TraceView]) -> str:
    out: list[str] = []
    by_group: dict[str, list[TraceView]] = {}
    for v in views:
        if v.msg_type == "Pub":
            out.append(_ROW % ("#Type", "#ProducerGroup", "#ClientHost", "#SendTime",
                               "#CostTimes", "#Status"))
            out.append(_ROW % ("Pub", v.group_name, v.client_host, _time(v.time_stamp),
                               f"{v.cost_time}ms", v.status))
            out.append("\n")
        if v.msg_type == "SubAfter":
            by_group.setdefault(v.group_name, []).append(v)
    for group in java_hashmap_order(by_group):
        out.append(_ROW % ("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime",
                           "#CostTimes", "#Status"))
        for v in by_group[group]:
            out.append(_ROW % ("Sub", v.group_name, v.client_host, _time(v.time_stamp),
                               f"{v.cost_time}ms", v.status))
        out.append("\n")
    return "".join(out)
