"""exportMetrics (upstream ``tools/command/export/ExportMetricsCommand``): one cluster's
brokers' load as ``<dir>/metrics.json``.

Per broker (by name; its master's address): ``runtimeEnv`` (cpuNum from the broker config's
``clientCallbackExecutorThreads``, totalMemKBytes from its runtime info), ``runtimeQuota``
(disk ratios, this minute's in/out TPS of normal, transactional and scheduled messages, the
last day's counts, the average message size, user topics and groups) and ``runtimeVersion``
(this tool's version, the language and version of every online consumer of a user group);
then the cluster's totals. The file is fastjson's pretty form of upstream's ``HashMap``s, in
their iteration order, so it reads as the stock tool's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Mapping
from typing import Any

from aiorocketmq.protocol.bodies import BrokerStatsData
from aiorocketmq.protocol.codes import CURRENT_VERSION, MixAll, MQVersion, SystemTopic
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError
from aiorocketmq.protocol.fastjson import dumps
from aiorocketmq.protocol.javautil import java_hashmap_order

from ..api import MQAdmin
from .base import Output, command, opt

_DEFAULT_DIR = "/tmp/rocketmq/export"
_TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # Stats.TOPIC_PUT_NUMS


def _java_map(entries: Mapping[str, Any]) -> dict[str, Any]:
    """``entries`` in a ``java.util.HashMap``'s iteration order."""
    return {k: entries[k] for k in java_hashmap_order(entries)}


def pretty_map_json(obj: Any, indent: int = 0) -> str:
    """``JSON.toJSONString(map, true)`` for nested maps: one line per entry (null values
    left out), an empty map as ``{`` and ``}`` on two lines; lists and sets on one line."""
    if not isinstance(obj, Mapping):
        return dumps(obj).decode("utf-8")
    parts = ["{"]
    first = True
    for k, v in obj.items():
        if v is None:
            continue
        parts.append(("" if first else ",") + "\n" + "\t" * (indent + 1))
        parts.append(dumps(str(k)).decode("utf-8") + ":" + pretty_map_json(v, indent + 1))
        first = False
    parts.append("\n" + "\t" * indent + "}")
    return "".join(parts)


def compute_24h_sum(data: BrokerStatsData) -> int:
    """``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    for item in (data.stats_day, data.stats_hour, data.stats_minute):
        if item.sum != 0:
            return item.sum
    return 0


def _write(directory: str, path: str, text: str) -> None:
    """``MixAll.string2FileNotSafe``: the directories made, the file written over."""
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


async def _stats(admin: MQAdmin, addr: str, topic: str) -> BrokerStatsData | None:
    try:
        return await admin.view_broker_stats_data(addr, _TOPIC_PUT_NUMS, topic)
    except MQBrokerError:  # upstream catches the MQClientException of a refusal
        return None


def _first_double(text: str | None) -> float:
    if text is None:
        raise MQClientError("the broker's runtime info lacks a TPS figure")
    parts = text.split(" ")
    return float(parts[0]) if parts else 0.0


async def _client_info(admin: MQAdmin, groups: list[str]) -> list[str]:
    seen: list[str] = []
    for group in groups:
        try:
            conn = await admin.consumer_connection(group)
        except (MQBrokerError, MQClientError):
            continue
        for c in conn.connection_set:
            info = f"{c.language.name}%{MQVersion.desc(c.version)}"
            if info not in seen:
                seen.append(info)
    return java_hashmap_order(seen)  # a HashSet


async def _broker_report(admin: MQAdmin, addr: str, total_tps: dict[str, float],
                         total_day: dict[str, int]) -> dict[str, Any]:
    kv = await admin.broker_runtime_info(addr)
    props, _version = await admin.broker_config(addr)
    groups = await admin.user_subscription_groups(addr)
    topics = await admin.user_topic_configs(addr)
    trans = await _stats(admin, addr, SystemTopic.TRANS_HALF_TOPIC)
    schedule = await _stats(admin, addr, SystemTopic.SCHEDULE_TOPIC)
    normal_in = _first_double(kv.get("putTps"))
    normal_out = _first_double(kv.get("getTransferedTps"))
    trans_in = trans.stats_minute.tps if trans is not None else 0.0
    schedule_in = schedule.stats_minute.tps if schedule is not None else 0.0
    trans_day = compute_24h_sum(trans) if trans is not None else 0
    schedule_day = compute_24h_sum(schedule) if schedule is not None else 0
    try:
        day_in = int(kv["msgPutTotalTodayMorning"]) - int(kv["msgPutTotalYesterdayMorning"])
        day_out = int(kv["msgGetTotalTodayMorning"]) - int(kv["msgGetTotalYesterdayMorning"])
    except (KeyError, ValueError) as exc:
        raise MQClientError(f"the broker's runtime info lacks a daily count: {exc}") from None
    for key, value in (("totalNormalInTps", normal_in), ("totalNormalOutTps", normal_out),
                       ("totalTransInTps", trans_in), ("totalScheduleInTps", schedule_in)):
        total_tps[key] += value
    for key, count in (("normalOneDayInNum", day_in), ("normalOneDayOutNum", day_out),
                       ("transOneDayInNum", trans_day), ("scheduleOneDayInNum", schedule_day)):
        total_day[key] += count
    quota = _java_map({
        "diskRatio": _java_map({"commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                                "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio")}),
        "tps": _java_map({"normalInTps": normal_in, "normalOutTps": normal_out,
                          "transInTps": trans_in, "scheduleInTps": schedule_in}),
        "oneDayNum": _java_map({"normalOneDayInNum": day_in, "normalOneDayOutNum": day_out,
                                "transOneDayInNum": trans_day,
                                "scheduleOneDayInNum": schedule_day}),
        "messageAverageSize": kv.get("putMessageAverageSize"),
        "topicSize": len(topics),
        "groupSize": len(groups),
    })
    return _java_map({
        "runtimeEnv": _java_map({"cpuNum": props.get("clientCallbackExecutorThreads"),
                                 "totalMemKBytes": kv.get("totalMemKBytes")}),
        "runtimeQuota": quota,
        "runtimeVersion": _java_map({
            "rocketmqVersion": MQVersion.desc(CURRENT_VERSION),
            "clientInfo": await _client_info(admin, list(groups))}),
    })


@command("exportMetrics", "export metrics",
         opt("-c", "--clusterName", required=True, help="choose a cluster to export"),
         opt("-f", "--filePath", help="export metrics.json path | default /tmp/rocketmq/export"))
async def export_metrics(admin: MQAdmin, args: argparse.Namespace) -> Output:
    cluster = args.clusterName.strip()
    directory = args.filePath.strip() if args.filePath is not None else _DEFAULT_DIR
    info = await admin.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        raise MQClientError(f"cluster '{cluster}' not found on nameserver "
                            f"{admin.remoting.namesrv_addr_chosen}")
    total_tps = dict.fromkeys(("totalNormalInTps", "totalNormalOutTps", "totalTransInTps",
                               "totalScheduleInTps"), 0.0)
    total_day = dict.fromkeys(("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum",
                               "scheduleOneDayInNum"), 0)
    report: dict[str, Any] = {}
    for name in names:
        bd = info.broker_addr_table.get(name)
        if bd is None:
            continue
        addr = bd.broker_addrs.get(MixAll.MASTER_ID)
        if addr is None:
            raise MQClientError(f"broker {name} has no master")
        report[name] = await _broker_report(admin, addr, total_tps, total_day)
    result = _java_map({
        "evaluateReport": _java_map(report),
        "totalData": _java_map({"totalTps": _java_map(total_tps),
                                "totalOneDayNum": _java_map(total_day)}),
    })
    path = directory + "/metrics.json"
    await asyncio.to_thread(_write, directory, path, pretty_map_json(result))
    return Output({"path": path, "metrics": result}, f"export {path} success")
