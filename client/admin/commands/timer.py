"""Timer commands (ours: stock 5.3.3's ``mqadmin`` has none; it shows the broker-wide figures
as ``clusterList``'s ``#Timer(Progress)`` column, and the per-topic counts only travel
broker to broker): timerMetrics.

``timerMetrics (-b <broker> | -c <cluster>) [-t <topic>]`` asks each broker (``-c``: the
cluster's masters) for GET_TIMER_METRICS (61, a stock 5.x request: the timer store's
pending timers per real topic, ``TimerMetrics``) and GET_BROKER_RUNTIME_INFO's ``timer*``
keys, and prints one line per topic with timers waiting (``-t``: that topic only), then the
broker's progress in stock's ``#Timer(Progress)`` form: ``<timerReadBehind s>-<timerOffsetBehind>
(<timerCongestNum / 10,000>w, <timerEnqueueTps>, <timerDequeueTps>)``. A broker without a
timer store answers SYSTEM_ERROR (exit 1).
"""

from __future__ import annotations

import argparse

from ..api import MQAdmin
from .base import BROKER_OR_CLUSTER, Output, broker_targets, command, opt
from .formatting import format_date


def timer_progress(info: dict[str, str]) -> str:
    """Stock 5.3.3 ``ClusterListSubCommand``'s ``#Timer(Progress)`` cell."""
    def num(key: str, default: str = "0") -> float:
        try:
            return float(info.get(key, default))
        except ValueError:
            return 0.0

    return (f"{int(num('timerReadBehind'))}-{int(num('timerOffsetBehind'))}"
            f"({num('timerCongestNum') / 10000.0:.1f}w, {num('timerEnqueueTps'):.1f}, "
            f"{num('timerDequeueTps'):.1f})")


@command("timerMetrics", "Pending timer messages per topic, and the timer store's progress",
         BROKER_OR_CLUSTER,
         opt("-t", "--topic", help="only this topic"))
async def timer_metrics(admin: MQAdmin, args: argparse.Namespace) -> Output:
    data: list[dict[str, object]] = []
    lines = [f"{'#Broker':<24}{'#Topic':<48}{'#Pending':>12}  #LastChange"]
    for addr in await broker_targets(admin, args):
        counts = await admin.timer_metrics(addr)
        info = await admin.broker_runtime_info(addr)
        topics = {t: c for t, c in counts.items() if c[0] != 0 and (not args.topic or t == args.topic)}
        if args.topic and args.topic not in topics:
            topics[args.topic] = counts.get(args.topic, (0, 0))
        rows = [{"topic": t, "pending": c, "lastChange": ts} for t, (c, ts) in sorted(topics.items())]
        progress = timer_progress(info)
        data.append({"broker": addr, "topics": rows, "progress": progress,
                     "timerReadBehind": int(info.get("timerReadBehind", "0") or 0),
                     "timerOffsetBehind": int(info.get("timerOffsetBehind", "0") or 0),
                     "timerCongestNum": int(info.get("timerCongestNum", "0") or 0)})
        for row in rows:
            ts = int(str(row["lastChange"]))
            lines.append(f"{addr:<24}{row['topic']!s:<48}{row['pending']!s:>12}  "
                         f"{format_date(ts) if ts > 0 else '-'}")
        lines.append(f"{addr:<24}{'#Timer(Progress)':<48}{progress:>12}")
    return Output(data, "\n".join(lines) + "\n")
