"""Cluster and broker commands (upstream ``tools/command/cluster`` and ``broker``):
clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig, clusterRT."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import asyncio
import decimal
import sys
import time
from typing import Any

from aiorocketmq.protocol.bodies import ClusterInfo
from aiorocketmq.protocol.javautil import java_hashmap_order
from aiorocketmq.protocol.message import Message

from ..api import MQAdmin
from .base import (
    BROKER_OR_CLUSTER,
    EXPECTED,
    Output,
    broker_targets,
    command,
    now_ms,
    opt,
    started_producer,
)
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


def _gmt8_now() -> str:
    """``CLusterSendMsgRTCommand.getCurTime``: ``yyyy-MM-dd HH:mm:ss`` in GMT+8."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 8 * 3600))


def _half_up(value: float) -> str:
    """``new BigDecimal(rt).setScale(0, ROUND_HALF_UP)``."""
    return str(int(decimal.Decimal(value).quantize(decimal.Decimal(1), decimal.ROUND_HALF_UP)))


@command("clusterRT", "List All clusters Message Send RT",
         opt("-a", "--amount", type=int, default=100, help="message amount | default 100"),
         opt("-s", "--size", type=int, default=128, help="message size | default 128 Byte"),
         opt("-c", "--cluster", help="cluster name | default display all cluster"),
         opt("-p", "--printLog", help="print as tlog | default false"),
         opt("-m", "--machineRoom", help="machine room name | default noname"),
         opt("-i", "--interval", type=int, default=10, help="print interval | default 10 seconds"),
         opt("--rounds", type=int, default=0,
             help="stop after this many rounds (not upstream; default 0: run until stopped, "
                  "as upstream)"))
async def cluster_rt(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``CLusterSendMsgRTCommand``: every ``-i`` seconds, ``-a`` sends of ``-s`` bytes to
    each broker of each cluster (to the topic named as the broker) and the average round
    trip without the first send. Runs until stopped, as upstream, unless ``--rounds``;
    each round is printed as it ends (with ``--json``, all rounds at the end)."""
    info = await admin.cluster_info()
    tlog = args.printLog is not None and args.printLog.strip().lower() == "true"
    room = args.machineRoom.strip() if args.machineRoom else "noname"
    clusters = [args.cluster.strip()] if args.cluster else \
        java_hashmap_order(info.cluster_addr_table)
    rows: list[dict[str, Any]] = []

    def emit(text: str) -> None:
        if args.json:
            return
        sys.stdout.write(text)
        sys.stdout.flush()

    if not tlog:
        emit("%-24s  %-24s  %-4s  %-8s  %-8s\n" % ("#Cluster Name", "#Broker Name", "#RT",
                                                  "#successCount", "#failCount"))
    body = b"a" * args.size
    rounds = 0
    async with started_producer(admin, str(now_ms())) as producer:
        while True:
            for cluster in clusters:
                names = info.cluster_addr_table.get(cluster)
                if names is None:
                    emit("cluster [%s] not exist" % cluster)
                    break
                for name in java_hashmap_order(names):
                    elapsed = ok = failed = 0
                    for i in range(args.amount):
                        start = now_ms()
                        try:
                            await producer.send(Message(name, body))
                            ok += 1
                        except EXPECTED:
                            failed += 1
                        if i != 0:
                            elapsed += now_ms() - start
                    rt = elapsed / (args.amount - 1) if args.amount > 1 else float("nan")
                    rows.append({"cluster": cluster, "brokerName": name, "rtMs": rt,
                                 "successCount": ok, "failCount": failed})
                    if not tlog:
                        emit("%-24s  %-24s  %-8s  %-16s  %-16s\n" % (
                            cluster, name, "NaN" if rt != rt else "%.2f" % rt, ok, failed))
                    else:
                        emit("%s|%s|%s|%s|%s\n" % (_gmt8_now(), room, cluster, name,
                                                   "NaN" if rt != rt else _half_up(rt)))
            rounds += 1
            if args.rounds and rounds >= args.rounds:
                break
            await asyncio.sleep(args.interval)
    # Already printed round by round; main prints text, so nothing more (JSON: the rows).
    return Output(rows, "")
