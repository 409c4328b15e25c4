"""Statistics commands (upstream ``tools/command/stats``): statsAll."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
from typing import Any

from aiorocketmq.protocol.bodies import BrokerStatsData
from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.javautil import java_hashmap_order

from ..api import MQAdmin
from .base import EXPECTED, Output, command, opt
from .formatting import front

_ROW = "%-64s  %-64s %12d %11.2f %11.2f %14d %14d\n"
_NO_CONSUMER_ROW = "%-64s  %-64s %12d %11.2f %11s %14d %14s\n"
_HEADER = "%-64s  %-64s %12s %11s %11s %14s %14s\n" % (
    "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
    "#OutMsg24Hour")


def compute_24hour_sum(bsd: BrokerStatsData) -> int:
    """``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the
    minute's."""
    for item in (bsd.stats_day, bsd.stats_hour, bsd.stats_minute):
        if item.sum != 0:
            return item.sum
    return 0


async def _stats(admin: MQAdmin, addr: str, name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour count) of one stats item; (0, 0) when the broker has none (as
    stock, which ignores the failure)."""
    try:
        bsd = await admin.view_broker_stats_data(addr, name, key)
    except EXPECTED:
        return 0.0, 0
    return bsd.stats_minute.tps, compute_24hour_sum(bsd)


async def _topic_rows(admin: MQAdmin, topic: str, active_only: bool) -> list[dict[str, Any]]:
    """``printTopicDetail``: one row per consuming group, or one ``NO_CONSUMER`` row."""
    route = await admin.topic_route(topic)
    groups = await admin.query_topic_consume_by_who(topic)
    masters = [bd.broker_addrs[MixAll.MASTER_ID] for bd in route.broker_datas
               if MixAll.MASTER_ID in bd.broker_addrs]
    in_tps, in_today = 0.0, 0
    for addr in masters:
        tps, count = await _stats(admin, addr, "TOPIC_PUT_NUMS", topic)
        in_tps, in_today = in_tps + tps, in_today + count
    rows: list[dict[str, Any]] = []
    if not groups:
        if not active_only or in_today > 0:
            rows.append({"topic": topic, "group": None, "accumulation": 0, "inTps": in_tps,
                         "outTps": None, "inMsg24Hour": in_today, "outMsg24Hour": None})
        return rows
    for group in java_hashmap_order(groups):
        out_tps, out_today = 0.0, 0
        for addr in masters:
            tps, count = await _stats(admin, addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps, out_today = out_tps + tps, out_today + count
        accumulate = 0
        try:
            accumulate = max((await admin.consume_stats(group, topic)).compute_total_diff(), 0)
        except EXPECTED:
            pass
        if not active_only or in_today > 0 or out_today > 0:
            rows.append({"topic": topic, "group": group, "accumulation": accumulate,
                         "inTps": in_tps, "outTps": out_tps, "inMsg24Hour": in_today,
                         "outMsg24Hour": out_today})
    return rows


def format_stats_row(row: dict[str, Any]) -> str:
    if row["group"] is None:
        return _NO_CONSUMER_ROW % (front(row["topic"], 64), "", 0, row["inTps"], "",
                                   row["inMsg24Hour"], "NO_CONSUMER")
    return _ROW % (front(row["topic"], 64), front(row["group"], 64), row["accumulation"],
                   row["inTps"], row["outTps"], row["inMsg24Hour"], row["outMsg24Hour"])


@command("statsAll", "Topic and Consumer tps stats",
         opt("-a", "--activeTopic", action="store_true", help="print active topic only"),
         opt("-t", "--topic", help="print select topic only"))
async def stats_all(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``StatsAllSubCommand``: every topic (but retry and DLQ topics) in the order of
    stock's ``HashSet``; a topic whose route or groups cannot be read is skipped."""
    rows: list[dict[str, Any]] = []
    for topic in java_hashmap_order(await admin.topic_list()):
        if topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX)):
            continue
        if args.topic and topic != args.topic:
            continue
        try:
            rows.extend(await _topic_rows(admin, topic, args.activeTopic))
        except EXPECTED:
            continue
    return Output(rows, _HEADER + "".join(format_stats_row(r) for r in rows))
