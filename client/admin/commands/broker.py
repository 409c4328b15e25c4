"""Cluster and broker commands (upstream ``tools/command/cluster`` and ``broker``):
clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from aiorocketmq.protocol.bodies import ClusterInfo

from ..api import MQAdmin
from .base import BROKER_OR_CLUSTER, Output, broker_targets, command, opt
from .formatting import format_properties


def format_cluster_list(info: ClusterInfo, runtime: dict[str, dict[str, str]],
                        now_ms: int) -> tuple[list[dict[str, Any]], str]:
    """``clusterList`` rows (``ClusterListSubCommand.printClusterBaseInfo``).

    ``runtime`` maps broker address -> its GET_BROKER_RUNTIME_INFO table (absent when
    the broker did not answer: its TPS columns show 0).

    Not upstream: each row also has ``role`` (MASTER for brokerId 0, else SLAVE) and, for
    a slave, ``replicationLagBytes`` (its master's commitLogMaxOffset minus its own; None
    when either did not answer); when the cluster has slaves, a ``#Role`` / ``#Lag`` table
    follows the stock one.
    """
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s\n"
    lines = [fmt % ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version",
                    "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE")]
    rows: list[dict[str, Any]] = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(set(info.cluster_addr_table[cluster])):
            bd = info.broker_addr_table.get(name)
            if bd is None:
                continue
            for bid, addr in sorted(bd.broker_addrs.items()):
                kv = runtime.get(addr, {})
                tps_in = _first_double(kv.get("putTps", ""))
                tps_out = _first_double(kv.get("getTransferedTps", ""))
                earliest = kv.get("earliestMessageTimeStamp", "")
                hour = (now_ms - int(earliest)) / 1000.0 / 3600.0 if earliest.lstrip("-").isdigit() else 0.0
                ratio = kv.get("commitLogDiskRatio", "")
                try:
                    space = float(ratio) if ratio else 0.0
                except ValueError:
                    space = 0.0
                row = {
                    "cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr,
                    "version": kv.get("brokerVersionDesc", ""), "inTps": tps_in, "outTps": tps_out,
                    "sendThreadPoolQueueSize": kv.get("sendThreadPoolQueueSize", ""),
                    "pullThreadPoolQueueSize": kv.get("pullThreadPoolQueueSize", ""),
                    "pageCacheLockTimeMills": kv.get("pageCacheLockTimeMills", ""),
                    "hour": hour, "space": space,
                }
                row["role"] = "MASTER" if bid == 0 else "SLAVE"
                row["replicationLagBytes"] = _replication_lag(runtime, bd.broker_addrs, bid)
                rows.append(row)
                lines.append(fmt % (
                    cluster, name, bid, addr, row["version"],
                    "%9.2f(%s,%sms)" % (tps_in, row["sendThreadPoolQueueSize"],
                                        kv.get("sendThreadPoolQueueHeadWaitTimeMills", "")),
                    "%9.2f(%s,%sms)" % (tps_out, row["pullThreadPoolQueueSize"],
                                        kv.get("pullThreadPoolQueueHeadWaitTimeMills", "")),
                    row["pageCacheLockTimeMills"], "%2.2f" % hour, "%.4f" % space))
    slaves = [r for r in rows if r["role"] == "SLAVE"]
    if slaves:
        ha_fmt = "%-22s  %-4s  %-6s  %-22s %14s\n"
        lines.append("\n" + ha_fmt % ("#Broker Name", "#BID", "#Role", "#Addr", "#Lag(bytes)"))
        for r in rows:
            lag = r["replicationLagBytes"]
            lines.append(ha_fmt % (r["brokerName"], r["brokerId"], r["role"], r["addr"],
                                   "-" if lag is None else lag))
    return rows, "".join(lines)


def _replication_lag(runtime: dict[str, dict[str, str]], addrs: dict[int, str], bid: int) -> int | None:
    """A slave's commit-log bytes behind its master, from both runtime infos."""
    if bid == 0 or 0 not in addrs:
        return None
    master = runtime.get(addrs[0], {}).get("commitLogMaxOffset", "")
    slave = runtime.get(addrs[bid], {}).get("commitLogMaxOffset", "")
    if not (master.isdigit() and slave.isdigit()):
        return None
    return max(int(master) - int(slave), 0)


def _first_double(text: str) -> float:
    first = text.split(" ")[0] if text else ""
    try:
        return float(first) if first else 0.0
    except ValueError:
        return 0.0


@command("clusterList", "List all of clusters")
async def cluster_list(admin: MQAdmin, args: argparse.Namespace) -> Output:
    info = await admin.cluster_info()
    addrs = [a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()]
    results = await asyncio.gather(*(admin.broker_runtime_info(a) for a in addrs),
                                   return_exceptions=True)
    runtime = {a: r for a, r in zip(addrs, results, strict=True) if isinstance(r, dict)}
    rows, text = format_cluster_list(info, runtime, time.time_ns() // 1_000_000)
    return Output({"brokers": rows}, text)


@command("brokerStatus", "Fetch broker runtime status data",
         BROKER_OR_CLUSTER)
async def broker_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
    addrs = await broker_targets(admin, args)
    data, lines = {}, []
    for addr in addrs:
        kv = await admin.broker_runtime_info(addr)
        data[addr] = kv
        for k in sorted(kv):
            if len(addrs) > 1:
                lines.append("%-24s %-32s: %s\n" % (addr, k, kv[k]))
            else:
                lines.append("%-32s: %s\n" % (k, kv[k]))
    return Output(data, "".join(lines))


@command("getBrokerConfig", "Get broker config by cluster or special broker",
         BROKER_OR_CLUSTER)
async def get_broker_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    data, text = {}, []
    for addr in await broker_targets(admin, args):
        props, version = await admin.broker_config(addr)
        data[addr] = {"version": version, "config": props}
        text.append(format_properties(addr, props))
    return Output(data, "".join(text))


@command("updateBrokerConfig", "Update broker's config",
         BROKER_OR_CLUSTER,
         opt("-k", "--key", required=True),
         opt("-v", "--value", required=True))
async def update_broker_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    done = []
    for addr in await broker_targets(admin, args):
        await admin.update_broker_config(addr, {args.key: args.value})
        done.append(addr)
    text = "".join(f"update broker config success, {a}\n" for a in done)
    return Output({"brokers": done, "key": args.key, "value": args.value}, text)
