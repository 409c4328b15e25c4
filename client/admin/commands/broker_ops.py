"""Broker operations (upstream ``tools/command/broker``): cleanExpiredCQ,
deleteExpiredCommitLog, cleanUnusedTopic, brokerConsumeStats.

The three housekeeping commands ask one broker (``-b``) or every broker, slaves included,
of one cluster (``-c``) or of every cluster (neither), and print ``success`` or ``false``
without a newline, as upstream: ``false`` when there was no broker to ask, and the last
broker's answer otherwise (a refusal fails the command).
"""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from ..api import MQAdmin
from .base import Output, UsageError, command, opt
from .formatting import format_date, front


async def _housekeeping(admin: MQAdmin, args: argparse.Namespace,
                        call: Callable[[str], Awaitable[bool]]) -> Output:
    if args.brokerAddr is not None:
        addrs = [args.brokerAddr.strip()]
    else:
        cluster = args.cluster.strip() if args.cluster is not None else None
        addrs = await admin.cluster_addrs(cluster)
    result = False
    for addr in addrs:
        result = await call(addr)
    return Output({"brokers": addrs, "result": result}, "success" if result else "false")


_BROKER = opt("-b", "--brokerAddr", help="Broker address")


@command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.",
         _BROKER, opt("-c", "--cluster", help="clustername"))
async def clean_expired_cq(admin: MQAdmin, args: argparse.Namespace) -> Output:
    return await _housekeeping(admin, args, admin.clean_expired_consume_queue)


@command("deleteExpiredCommitLog", "Delete expired CommitLog files",
         _BROKER, opt("-c", "--cluster", help="clustername"))
async def delete_expired_commit_log(admin: MQAdmin, args: argparse.Namespace) -> Output:
    return await _housekeeping(admin, args, admin.delete_expired_commit_log)


@command("cleanUnusedTopic", "Clean unused topic on broker.",
         _BROKER, opt("-c", "--cluster", help="cluster name"))
async def clean_unused_topic(admin: MQAdmin, args: argparse.Namespace) -> Output:
    return await _housekeeping(admin, args, admin.clean_unused_topic)


def _long(text: str, name: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"{name}: not a number: '{text}'") from None


_STATS_FMT = "%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s\n"


@command("brokerConsumeStats", "Fetch broker consume stats data",
         opt("-b", "--brokerAddr", required=True, help="Broker address"),
         opt("-t", "--timeoutMillis", help="request timeout Millis"),
         opt("-l", "--level", help="threshold of print diff"),
         opt("-o", "--order", help="order topic"))
async def broker_consume_stats(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``BrokerConsumeStatsSubCommad``: every group's queues on one broker that have been
    consumed from (a last consume time), whose lag is at least ``-l``; then the broker's
    total lag, whatever ``-l`` left out."""
    is_order = args.order is not None and args.order.strip().lower() == "true"
    timeout = _long(args.timeoutMillis, "-t") / 1000 if args.timeoutMillis else 50.0
    level = _long(args.level, "-l") if args.level else 0
    stats = await admin.broker_consume_stats(args.brokerAddr.strip(), is_order=is_order,
                                             timeout=timeout)
    lines = [_STATS_FMT % ("#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset",
                           "#Consumer Offset", "#Diff", "#LastTime")]
    rows = []
    for groups in stats.consume_stats_list:
        for group, stats_of_topics in groups.items():
            for cs in stats_of_topics:
                for mq in sorted(cs.offset_table):
                    w = cs.offset_table[mq]
                    diff = w.broker_offset - w.consumer_offset
                    if diff < level or w.last_timestamp <= 0:
                        continue
                    rows.append({"topic": mq.topic, "group": group, "brokerName": mq.broker_name,
                                 "queueId": mq.queue_id, "brokerOffset": w.broker_offset,
                                 "consumerOffset": w.consumer_offset, "diff": diff,
                                 "lastTimestamp": w.last_timestamp})
                    lines.append(
                        "%-64s  %-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s\n" % (
                            front(mq.topic, 64), group, front(mq.broker_name, 32), mq.queue_id,
                            w.broker_offset, w.consumer_offset, diff,
                            format_date(w.last_timestamp)))
    lines.append("\nDiff Total: %d\n" % stats.total_diff)
    return Output({"queues": rows, "diffTotal": stats.total_diff}, "".join(lines))
