"""``mqadmin``: upstream's admin commands, names and flags (``tools/command/**``), over ``MQAdmin``.

``mqadmin <command> [-n host:port] [flags] [--json]``; without ``-n``, ``NAMESRV_ADDR``
from the environment, as upstream. Each command is an async function
returning an ``Output``: ``data`` (JSON-ready, printed by ``--json``) and ``text`` (the
readable table, laid out with upstream's printf widths). Expected failures (connection
refused, timeout, unknown topic or group, a refusal from a server, bad arguments) print
one line ``mqadmin <command>: <what went wrong>`` on stderr and exit 1 (2 for bad usage);
no traceback. Long scans (``printMsg``, ``consumeMessage``) report their progress over
queues on stderr.

Formatting helpers (``format_*``, ``parse_timestamp``) are pure functions for the unit
tests.
"""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from aiorocketmq.protocol.acl import PlainAccessConfig
from aiorocketmq.protocol.bodies import (
    ClusterInfo,
    ConsumerConnection,
    ConsumeStats,
    MessageQueue,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicStatsTable,
)
from aiorocketmq.protocol.codes import MixAll, MQVersion, Perm, ResponseCode
from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    ProtocolError,
    RemotingError,
    RocketMQError,
)
from aiorocketmq.protocol.javautil import java_hashmap_order
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.server.runtime import configure_logging

from . import acl as acl_admin
from .api import MessageTrack, MQAdmin, RollbackStats, namesrv_addr_from_env

__all__ = [
    "main",
    "build_parser",
    "Output",
    "parse_timestamp",
    "format_date",
    "format_human_ms",
    "format_cluster_list",
    "format_consumer_progress",
    "format_topic_status",
    "format_message",
    "format_message_tracks",
    "format_topic_config",
    "format_subscription_group_config",
    "java_map_string",
    "perm_to_string",
    "describe_error",
    "BODY_DIR",
]

# QueryMsgByIdSubCommand.createBodyFile: each shown message's body is written here.
BODY_DIR = "/tmp/rocketmq/msgbodys"


@dataclass(slots=True)
class Output:
    """What a command produced: ``data`` for ``--json``, ``text`` for people."""

    data: Any
    text: str


class UsageError(MQClientError):
    """Bad command-line arguments (exit code 2)."""


# -- pure formatting ------------------------------------------------------------------------


def format_date(ms: int) -> str:
    """``UtilAll.formatDate(date, "yyyy-MM-dd HH:mm:ss")`` in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def format_human_ms(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000)) + f",{ms % 1000:03d}"


def parse_timestamp(text: str, now_ms: int | None = None) -> int:
    """``resetOffsetByTime -s``: ``now``, epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS``.

    Raises:
        UsageError: anything else.
    """
    text = text.strip()
    if text == "now":
        return now_ms if now_ms is not None else time.time_ns() // 1_000_000
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        date_part, millis = text.rsplit(":", 1)
        t = time.strptime(date_part, "%Y-%m-%d#%H:%M:%S")
        if len(millis) != 3 or not millis.isdigit():
            raise ValueError(millis)
    except ValueError:
        raise UsageError(f"timestamp '{text}' is not now, epoch milliseconds or "
                         "yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(time.mktime(t)) * 1000 + int(millis)


def _front(s: str, width: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``width`` characters."""
    return s[:width]


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


def format_consumer_progress(stats: ConsumeStats) -> tuple[dict[str, Any], str]:
    """``consumerProgress -g`` (``ConsumerProgressSubCommand``): per queue, then totals."""
    fmt = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s\n"
    lines = [fmt % ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
                    "#Diff", "#LastTime")]
    queues = []
    diff_total = 0
    for mq in sorted(stats.offset_table):
        w = stats.offset_table[mq]
        diff = w.broker_offset - w.consumer_offset
        diff_total += diff
        last = "N/A" if w.last_timestamp == 0 else format_date(w.last_timestamp)
        queues.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
                       "diff": diff, "lastTimestamp": w.last_timestamp})
        lines.append(fmt % (_front(mq.topic, 64), _front(mq.broker_name, 32), mq.queue_id,
                            w.broker_offset, w.consumer_offset, diff, last))
    lines.append("\n")
    lines.append("Consume TPS: %.2f\n" % stats.consume_tps)
    lines.append("Diff Total: %d\n" % diff_total)
    return {"queues": queues, "consumeTps": stats.consume_tps, "diffTotal": diff_total}, "".join(lines)


def format_topic_status(table: TopicStatsTable) -> tuple[list[dict[str, Any]], str]:
    """``topicStatus`` (``TopicStatusSubCommand``)."""
    fmt = "%-32s  %-4s  %-20s  %-20s    %s\n"
    lines = [fmt % ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")]
    rows = []
    for mq in sorted(table.offset_table):
        o = table.offset_table[mq]
        human = format_human_ms(o.last_update_timestamp) if o.last_update_timestamp > 0 else ""
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                     "minOffset": o.min_offset, "maxOffset": o.max_offset,
                     "lastUpdateTimestamp": o.last_update_timestamp})
        lines.append(fmt % (_front(mq.broker_name, 32), mq.queue_id, o.min_offset, o.max_offset,
                            human))
    return rows, "".join(lines)


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: ``RWX`` with ``-`` for each missing bit."""
    return "".join(c if perm & bit else "-" for c, bit in (("R", Perm.READ), ("W", Perm.WRITE),
                                                            ("X", Perm.INHERIT)))


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def format_topic_config(tc: TopicConfig) -> str:
    """``TopicConfig.toString``."""
    return (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={perm_to_string(tc.perm)}, "
            f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
            f"order={_java_bool(tc.order)}]")


def format_subscription_group_config(cfg: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString``."""
    return (f"SubscriptionGroupConfig [groupName={cfg.group_name}, "
            f"consumeEnable={_java_bool(cfg.consume_enable)}, "
            f"consumeFromMinEnable={_java_bool(cfg.consume_from_min_enable)}, "
            f"consumeBroadcastEnable={_java_bool(cfg.consume_broadcast_enable)}, "
            f"retryQueueNums={cfg.retry_queue_nums}, retryMaxTimes={cfg.retry_max_times}, "
            f"brokerId={cfg.broker_id}, "
            f"whichBrokerWhenConsumeSlowly={cfg.which_broker_when_consume_slowly}, "
            f"notifyConsumerIdsChangedEnable={_java_bool(cfg.notify_consumer_ids_changed_enable)}]")


def java_map_string(props: Mapping[str, str]) -> str:
    """``AbstractMap.toString`` of a ``HashMap``: ``{k=v, k2=v2}`` in its iteration order."""
    return "{" + ", ".join(f"{k}={props[k]}" for k in java_hashmap_order(props)) + "}"


def message_json(msg: MessageExt) -> dict[str, Any]:
    return {
        "msgId": msg.msg_id, "offsetMsgId": msg.offset_msg_id, "topic": msg.topic,
        "tags": msg.properties.get("TAGS"), "keys": msg.properties.get("KEYS"),
        "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset, "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp, "storeTimestamp": msg.store_timestamp,
        "bornHost": msg.born_host, "storeHost": msg.store_host, "sysFlag": msg.sys_flag,
        "properties": dict(msg.properties),
        "body": bytes(msg.body).decode("utf-8", "replace"),
    }


def format_message(msg: MessageExt, body_path: str, *, offset_id: bool = True) -> str:
    """``QueryMsgByIdSubCommand.printMsg`` (``offset_id``) or
    ``QueryMsgByUniqueKeySubCommand.showMessage`` (no ``OffsetID:`` line); the body is in
    the file ``body_path``, as upstream."""
    rows: list[tuple[str, Any]] = [("OffsetID:", msg.offset_msg_id)] if offset_id else []
    rows += [
        ("Topic:", msg.topic),
        ("Tags:", "[%s]" % msg.properties.get("TAGS")),
        ("Keys:", "[%s]" % msg.properties.get("KEYS")),
        ("Queue ID:", msg.queue_id), ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset), ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", format_human_ms(msg.born_timestamp)),
        ("Store Timestamp:", format_human_ms(msg.store_timestamp)),
        ("Born Host:", msg.born_host), ("Store Host:", msg.store_host),
        ("System Flag:", msg.sys_flag), ("Properties:", java_map_string(msg.properties)),
        ("Message Body Path:", body_path),
    ]
    return "".join("%-20s %s\n" % row for row in rows)


def format_message_tracks(tracks: Sequence[MessageTrack]) -> str:
    """What ``printMsg`` prints after a message: its ``MessageTrack`` lines, or a warning."""
    if not tracks:
        return "\n\nWARN: No Consumer\n"
    return "\n\n" + "".join(f"{t}\n" for t in tracks)


def write_body_file(msg: MessageExt, index: int = 0) -> str:
    """``createBodyFile``: the body in ``BODY_DIR/<msgId>[_index]``; returns the path."""
    os.makedirs(BODY_DIR, exist_ok=True)
    path = f"{BODY_DIR}/{msg.msg_id}" + (f"_{index}" if index > 0 else "")
    with open(path, "wb") as fh:
        fh.write(bytes(msg.body))
    return path


def format_properties(title: str, props: dict[str, str]) -> str:
    """``getBrokerConfig`` / ``getNamesrvConfig``: a banner, then ``%-50s=  %s`` lines."""
    out = [f"============{title}============\n"]
    out.extend("%-50s=  %s\n" % (k, v) for k, v in sorted(props.items()))
    return "".join(out)


def describe_error(exc: BaseException) -> str:
    """One readable line for an expected failure."""
    if isinstance(exc, MQBrokerError):
        if exc.code == ResponseCode.TOPIC_NOT_EXIST and exc.remark and "not found" in exc.remark:
            return exc.remark
        try:
            name = ResponseCode(exc.code).name
        except ValueError:
            name = "UNKNOWN"
        where = f"{exc.addr} answered " if exc.addr else ""
        remark = (exc.remark or "").replace("\n", " ").strip()
        return f"{where}{name} ({exc.code}): {remark}"
    text = str(exc).replace("\n", " ").strip()
    return text or type(exc).__name__


# -- commands -------------------------------------------------------------------------------

Command = Callable[[MQAdmin, argparse.Namespace], Awaitable[Output]]
_COMMANDS: dict[str, tuple[Command, str]] = {}


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise UsageError(f"expected true or false, got '{text}'")
    return low == "true"


async def _broker_targets(admin: MQAdmin, args: argparse.Namespace) -> list[str]:
    if getattr(args, "brokerAddr", None):
        return [args.brokerAddr]
    if getattr(args, "clusterName", None):
        return [b.addr for b in await admin.brokers(args.clusterName, masters_only=True)]
    raise UsageError("either -b brokerAddr or -c clusterName is required")


async def update_topic(admin: MQAdmin, args: argparse.Namespace) -> Output:
    tc = TopicConfig(args.topic, args.readQueueNums, args.writeQueueNums, args.perm,
                     order=_bool(args.order) if args.order else False)
    done = []
    for addr in await _broker_targets(admin, args):
        await admin.create_topic(addr, tc)
        done.append(addr)
    text = "".join(f"create topic to {a} success.\n" for a in done) + format_topic_config(tc) + "\n"
    result: dict[str, Any] = {"brokers": done, "topicConfig": tc.to_json()}
    if tc.order:
        # Upstream UpdateTopicSubCommand: the nameserver's ORDER_TOPIC_CONFIG entry, which
        # routes then carry as orderTopicConf (when the nameserver has orderMessageEnable).
        brokers = await admin.brokers(getattr(args, "clusterName", None) or None)
        if getattr(args, "brokerAddr", None):
            names = [b.broker_name for b in brokers if b.addr == args.brokerAddr]
            conf = f"{names[0] if names else args.brokerAddr}:{tc.write_queue_nums}"
            value = await admin.update_order_conf(tc.topic_name, conf, is_cluster=False)
            text += f"set broker orderConf. isOrder=true, orderConf=[{conf}]\n"
        else:
            names = sorted({b.broker_name for b in brokers})
            value = ";".join(f"{n}:{tc.write_queue_nums}" for n in names)
            await admin.update_order_conf(tc.topic_name, value, is_cluster=True)
            text += f"set cluster orderConf. isOrder=true, orderConf=[{value}]\n"
        result["orderConf"] = value
    return Output(result, text)


async def delete_topic(admin: MQAdmin, args: argparse.Namespace) -> Output:
    done = await admin.delete_topic(args.topic, args.clusterName)
    text = (f"delete topic [{args.topic}] from cluster [{args.clusterName}] success.\n"
            f"delete topic [{args.topic}] from NameServer success.\n")
    return Output({"topic": args.topic, "cluster": args.clusterName, "brokers": done}, text)


async def topic_list(admin: MQAdmin, args: argparse.Namespace) -> Output:
    topics = sorted(await admin.topic_list())
    if not args.clusterModel:
        return Output({"topics": topics}, "".join(f"{t}\n" for t in topics))
    info = await admin.cluster_info()
    fmt = "%-20s  %-48s  %-48s\n"
    lines = [fmt % ("#Cluster Name", "#Topic", "#Consumer Group")]
    rows = []
    for topic in topics:
        if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(
                MixAll.DLQ_GROUP_TOPIC_PREFIX):
            continue
        try:
            route = await admin.topic_route(topic)
            groups = await admin.query_topic_consume_by_who(topic)
        except MQBrokerError:
            continue
        names = {bd.broker_name for bd in route.broker_datas}
        cluster = next((c for c, bs in info.cluster_addr_table.items() if names & set(bs)), "")
        for g in groups or [""]:
            rows.append({"cluster": cluster, "topic": topic, "group": g})
            lines.append(fmt % (_front(cluster, 20), _front(topic, 48), _front(g, 48)))
    return Output({"rows": rows}, "".join(lines))


async def topic_route(admin: MQAdmin, args: argparse.Namespace) -> Output:
    route = await admin.topic_route(args.topic)
    data = json.loads(route.encode(standard=True))
    return Output(data, json.dumps(data, indent=1) + "\n")


async def topic_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
    rows, text = format_topic_status(await admin.topic_stats(args.topic))
    return Output({"topic": args.topic, "queues": rows}, text)


async def update_topic_perm(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.perm not in (2, 4, 6):
        raise UsageError("perm must be 2 (W), 4 (R) or 6 (RW)")
    route = await admin.topic_route(args.topic)
    lines, done = [], []
    for addr in await _broker_targets(admin, args):
        tc = await admin.topic_config(addr, args.topic)
        if tc is None:
            names = [bd.broker_name for bd in route.broker_datas
                     if addr in bd.broker_addrs.values()]
            qd = next((q for q in route.queue_datas if q.broker_name in names), None)
            if qd is None:
                raise MQClientError(f"topic '{args.topic}' not found on broker {addr}")
            tc = TopicConfig(args.topic, qd.read_queue_nums, qd.write_queue_nums, qd.perm)
        old = tc.perm
        tc.perm = args.perm
        await admin.create_topic(addr, tc)
        done.append({"broker": addr, "oldPerm": int(old), "newPerm": args.perm})
        lines.append(f"update topic perm from {old} to {args.perm} in {addr} success.\n")
    return Output({"topic": args.topic, "brokers": done}, "".join(lines))


async def cluster_list(admin: MQAdmin, args: argparse.Namespace) -> Output:
    info = await admin.cluster_info()
    addrs = [a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()]
    results = await asyncio.gather(*(admin.broker_runtime_info(a) for a in addrs),
                                   return_exceptions=True)
    runtime = {a: r for a, r in zip(addrs, results, strict=True) if isinstance(r, dict)}
    rows, text = format_cluster_list(info, runtime, time.time_ns() // 1_000_000)
    return Output({"brokers": rows}, text)


async def broker_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
    addrs = await _broker_targets(admin, args)
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


async def get_broker_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    data, text = {}, []
    for addr in await _broker_targets(admin, args):
        props, version = await admin.broker_config(addr)
        data[addr] = {"version": version, "config": props}
        text.append(format_properties(addr, props))
    return Output(data, "".join(text))


async def update_broker_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    done = []
    for addr in await _broker_targets(admin, args):
        await admin.update_broker_config(addr, {args.key: args.value})
        done.append(addr)
    text = "".join(f"update broker config success, {a}\n" for a in done)
    return Output({"brokers": done, "key": args.key, "value": args.value}, text)


async def update_sub_group(admin: MQAdmin, args: argparse.Namespace) -> Output:
    # UpdateSubGroupSubCommand's defaults: no broadcast, not from min offset.
    cfg = SubscriptionGroupConfig(args.groupName, consume_broadcast_enable=False,
                                  consume_from_min_enable=False)
    for flag, attr in (("consumeEnable", "consume_enable"),
                       ("consumeFromMinEnable", "consume_from_min_enable"),
                       ("consumeBroadcastEnable", "consume_broadcast_enable"),
                       ("notifyConsumerIdsChanged", "notify_consumer_ids_changed_enable")):
        if getattr(args, flag) is not None:
            setattr(cfg, attr, _bool(getattr(args, flag)))
    for flag, attr in (("retryQueueNums", "retry_queue_nums"), ("retryMaxTimes", "retry_max_times"),
                       ("brokerId", "broker_id"),
                       ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly")):
        if getattr(args, flag) is not None:
            setattr(cfg, attr, getattr(args, flag))
    done = []
    for addr in await _broker_targets(admin, args):
        await admin.create_subscription_group(addr, cfg)
        done.append(addr)
    text = "".join(f"create subscription group to {a} success.\n" for a in done) + \
        format_subscription_group_config(cfg) + "\n"
    return Output({"brokers": done, "subscriptionGroupConfig": cfg.to_json()}, text)


async def delete_sub_group(admin: MQAdmin, args: argparse.Namespace) -> Output:
    done = []
    for addr in await _broker_targets(admin, args):
        await admin.delete_subscription_group(addr, args.groupName,
                                              remove_offset=bool(args.removeOffset))
        done.append(addr)
    where = f"cluster [{args.clusterName}]" if args.clusterName else f"broker [{args.brokerAddr}]"
    text = f"delete subscription group [{args.groupName}] from {where} success.\n"
    return Output({"group": args.groupName, "brokers": done}, text)


async def consumer_progress(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.groupName:
        stats = await admin.consume_stats(args.groupName, args.topicName)
        if not stats.offset_table:
            raise MQClientError(f"consumer group '{args.groupName}' not online or has no "
                                "consume stats")
        data, text = format_consumer_progress(stats)
        data["group"] = args.groupName
        return Output(data, text)
    fmt = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s\n"
    lines = [fmt % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")]
    rows = []
    for topic in sorted(await admin.topic_list()):
        if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            continue
        group = topic[len(MixAll.RETRY_GROUP_TOPIC_PREFIX):]
        gstats: ConsumeStats | None = None
        conn: ConsumerConnection | None = None
        try:
            gstats = await admin.consume_stats(group)
        except MQBrokerError:
            pass
        try:
            conn = await admin.consumer_connection(group)
        except MQBrokerError:
            pass
        count = len(conn.connection_set) if conn else 0
        version = (MQVersion.desc(min(c.version for c in conn.connection_set))
                   if conn and conn.connection_set else "OFFLINE")
        ctype = {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH"}.get(
            (conn.consume_type if conn else None) or "", "")
        model = (conn.message_model if conn else None) or ""
        tps = int(gstats.consume_tps) if gstats else 0
        diff = gstats.compute_total_diff() if gstats else 0
        rows.append({"group": group, "count": count, "version": version, "type": ctype,
                     "model": model, "tps": tps, "diffTotal": diff})
        lines.append(fmt % (_front(group, 64), count, version, ctype, model, tps, diff))
    return Output({"groups": rows}, "".join(lines))


def _connection_text(conn: ConsumerConnection) -> str:
    lines = ["%-36s %-22s %-10s %s\n" % ("#ClientId", "#ClientAddr", "#Language", "#Version")]
    for c in sorted(conn.connection_set, key=lambda c: c.client_id):
        lang = getattr(c.language, "name", str(c.language))
        lines.append("%-36s %-22s %-10s %s\n" % (c.client_id, c.client_addr, lang,
                                                MQVersion.desc(c.version)))
    lines.append("\nBelow is subscription:\n")
    lines.append("%-20s %s\n" % ("#Topic", "#SubExpression"))
    for topic in sorted(conn.subscription_table):
        lines.append("%-20s %s\n" % (topic, conn.subscription_table[topic].sub_string))
    lines.append("\n")
    lines.append(f"ConsumeType: {conn.consume_type}\n")
    lines.append(f"MessageModel: {conn.message_model}\n")
    lines.append(f"ConsumeFromWhere: {conn.consume_from_where}\n")
    return "".join(lines)


async def consumer_connection(admin: MQAdmin, args: argparse.Namespace) -> Output:
    conn = await admin.consumer_connection(args.consumerGroup)
    return Output(json.loads(conn.encode(standard=True)), _connection_text(conn))


async def consumer_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
    conn = await admin.consumer_connection(args.consumerGroup)
    ids = sorted(c.client_id for c in conn.connection_set)
    if args.clientId:
        if args.clientId not in ids:
            raise MQClientError(f"client '{args.clientId}' of group '{args.consumerGroup}' "
                                "is not online")
        ids = [args.clientId]
    data: dict[str, Any] = {}
    lines = []
    for i, cid in enumerate(ids, 1):
        info = await admin.consumer_running_info(args.consumerGroup, cid,
                                                 jstack=bool(args.jstack))
        data[cid] = json.loads(info.encode(standard=True))
        lines.append("%03d  %-40s\n" % (i, cid))
        for k in sorted(info.properties):
            lines.append("     %-40s: %s\n" % (k, info.properties[k]))
        lines.append("     %-32s  %-32s  %-4s  %-20s\n" % ("#Topic", "#Broker Name", "#QID",
                                                          "#Commit Offset"))
        for mq in sorted(info.mq_table):
            lines.append("     %-32s  %-32s  %-4d  %-20d\n" % (
                mq.topic, mq.broker_name, mq.queue_id, info.mq_table[mq].commit_offset))
    return Output(data, "".join(lines))


async def reset_offset_by_time(admin: MQAdmin, args: argparse.Namespace) -> Output:
    # ResetOffsetByTimeCommand: "now" is -1 (the broker resets to the max offset).
    ts = -1 if args.timestamp.strip() == "now" else parse_timestamp(args.timestamp)
    force = _bool(args.force) if args.force is not None else True
    try:
        table = await admin.reset_offset_by_time(args.topic, args.group, ts, force=force)
    except MQBrokerError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        # No consumer online: rewrite the stored offsets (ResetOffsetByTimeOldCommand).
        stats = await admin.reset_offset_by_time_offline(args.topic, args.group, ts, force=force)
        return _rollback_output(args, ts, force, stats)
    lines = ["rollback consumer offset by specified group[%s], topic[%s], force[%s], "
             "timestamp(string)[%s], timestamp(long)[%s]\n" % (
                 args.group, args.topic, str(force).lower(), args.timestamp, ts)]
    lines.append("%-40s  %-40s  %-40s\n" % ("#brokerName", "#queueId", "#offset"))
    rows = []
    for mq in sorted(table):
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": table[mq]})
        lines.append("%-40s  %-40d  %-40d\n" % (mq.broker_name, mq.queue_id, table[mq]))
    return Output({"group": args.group, "topic": args.topic, "timestamp": ts, "force": force,
                   "offsets": rows}, "".join(lines))


def _rollback_output(args: argparse.Namespace, ts: int, force: bool,
                     stats: Sequence[RollbackStats]) -> Output:
    """``ResetOffsetByTimeOldCommand.resetOffset``'s report."""
    lines = ["rollback consumer offset by specified consumerGroup[%s], topic[%s], force[%s], "
             "timestamp(string)[%s], timestamp(long)[%s]\n" % (
                 args.group, args.topic, _java_bool(force), args.timestamp, ts)]
    fmt = "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s\n"
    lines.append(fmt % ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                        "#timestampOffset", "#rollbackOffset"))
    rows = []
    for r in stats:
        rows.append({"brokerName": r.broker_name, "queueId": r.queue_id,
                     "brokerOffset": r.broker_offset, "consumerOffset": r.consumer_offset,
                     "timestampOffset": r.timestamp_offset, "offset": r.rollback_offset})
        lines.append(fmt % (r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset,
                            r.timestamp_offset, r.rollback_offset))
    return Output({"group": args.group, "topic": args.topic, "timestamp": ts, "force": force,
                   "offline": True, "offsets": rows}, "".join(lines))


async def clone_group_offset(admin: MQAdmin, args: argparse.Namespace) -> Output:
    offline = _bool(args.offline) if args.offline is not None else False
    await admin.clone_group_offset(args.srcGroup, args.destGroup, args.topic, offline=offline)
    text = "clone group offset success. srcGroup[%s], destGroup=[%s], topic[%s]\n" % (
        args.srcGroup, args.destGroup, args.topic)
    return Output({"srcGroup": args.srcGroup, "destGroup": args.destGroup, "topic": args.topic},
                  text)


async def _show_message(admin: MQAdmin, msg: MessageExt, *, index: int = 0,
                        offset_id: bool = True) -> str:
    """One message as ``printMsg`` / ``showMessage`` show it, message tracks included (a
    failed track lookup is reported on stderr, as upstream prints its stack trace)."""
    text = format_message(msg, write_body_file(msg, index), offset_id=offset_id)
    try:
        tracks = await admin.message_track_detail(msg)
    except _EXPECTED as exc:
        print(f"mqadmin: message track of {msg.msg_id}: {describe_error(exc)}", file=sys.stderr)
        return text
    return text + format_message_tracks(tracks)


async def query_msg_by_id(admin: MQAdmin, args: argparse.Namespace) -> Output:
    msgs, text = [], []
    for msg_id in (i.strip() for i in args.msgId.split(",")):
        if not msg_id:
            continue
        msg = await admin.find_message(msg_id, args.topic)
        if msg is None:
            where = f"topic '{args.topic}'" if args.topic else "any topic"
            raise MQClientError(f"no message with id '{msg_id}' in {where} (not an offset "
                                "message id, nor a unique key found by QUERY_MESSAGE)")
        msgs.append(msg)
        text.append(await _show_message(admin, msg))
    return Output([message_json(m) for m in msgs], "".join(text))


async def query_msg_by_key(admin: MQAdmin, args: argparse.Namespace) -> Output:
    msgs = await admin.query_message_by_key(args.topic, args.msgKey)
    fmt = "%-50s %4s %40s\n"
    lines = [fmt % ("#Message ID", "#QID", "#Offset")]
    lines.extend(fmt % (m.msg_id, m.queue_id, m.queue_offset) for m in msgs)
    return Output([message_json(m) for m in msgs], "".join(lines))


async def query_msg_trace_by_id(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``queryMsgTraceById``: the message's trace records (``client.trace.query``)."""
    from aiorocketmq.client.trace.query import format_trace_views, query_trace_views

    views = await query_trace_views(admin, args.msgId.strip(),
                                    args.traceTopic.strip() if args.traceTopic else None)
    return Output([dataclasses.asdict(v) for v in views], format_trace_views(views))


async def query_msg_by_unique_key(admin: MQAdmin, args: argparse.Namespace) -> Output:
    msgs = await admin.query_message_by_unique_key(args.topic, args.msgId)
    if not msgs:
        raise MQClientError(f"message with unique key '{args.msgId}' not found in topic "
                            f"'{args.topic}'")
    # QueryMsgByUniqueKeySubCommand: oldest first; only the first unless -a.
    msgs.sort(key=lambda m: m.store_timestamp)
    if not args.showAll:
        msgs = msgs[:1]
    text = [await _show_message(admin, m, index=i, offset_id=False) for i, m in enumerate(msgs)]
    return Output([message_json(m) for m in msgs], "".join(text))


async def query_msg_by_offset(admin: MQAdmin, args: argparse.Namespace) -> Output:
    addr = await admin.broker_addr_of(args.topic, args.brokerName)
    mq = MessageQueue(args.topic, args.brokerName, args.queueId)
    result = await admin.pull(addr, mq, args.offset, 1)
    if not result.msg_found_list:
        raise MQClientError(f"no message at offset {args.offset} of {mq.topic}/"
                            f"{mq.broker_name}/{mq.queue_id} ({result.status.name})")
    msg = result.msg_found_list[0]
    return Output(message_json(msg), await _show_message(admin, msg))


def _progress(i: int, n: int, mq: MessageQueue) -> None:
    print(f"[{i}/{n}] {mq.topic} {mq.broker_name} queue {mq.queue_id}", file=sys.stderr,
          flush=True)


async def _scan(admin: MQAdmin, topic: str, *, broker_name: str | None, queue_id: int | None,
                begin_ms: int | None, end_ms: int | None, start_offset: int | None,
                limit: int | None, group: str, sub: str) -> list[MessageExt]:
    """Pull queue after queue from the start (or the begin timestamp) to the max offset."""
    queues = [(a, mq) for a, mq in await admin.readable_queues(topic, broker_name)
              if queue_id is None or mq.queue_id == queue_id]
    out: list[MessageExt] = []
    for i, (addr, mq) in enumerate(queues, 1):
        _progress(i, len(queues), mq)
        low, high = await admin.queue_offsets(addr, mq)
        offset = low if start_offset is None else start_offset
        if begin_ms is not None:
            offset = max(offset, await admin.search_offset(addr, mq, begin_ms))
        stop = high
        if end_ms is not None:
            stop = min(stop, await admin.search_offset(addr, mq, end_ms))
        while offset < stop and (limit is None or len(out) < limit):
            result = await admin.pull(addr, mq, offset, 32, group=group, sub_expression=sub)
            if result.next_begin_offset <= offset:
                break
            for m in result.msg_found_list:
                if m.queue_offset < stop and (limit is None or len(out) < limit):
                    out.append(m)
            offset = result.next_begin_offset
        if limit is not None and len(out) >= limit:
            break
    return out


def _msg_line(m: MessageExt, body: bool, charset: str = "utf-8") -> str:
    text = bytes(m.body).decode(charset, "replace") if body else "NOT PRINT BODY"
    return (f"MSGID: {m.msg_id} queueId={m.queue_id} queueOffset={m.queue_offset} "
            f"tags={m.properties.get('TAGS')} keys={m.properties.get('KEYS')} BODY: {text}\n")


async def print_msg(admin: MQAdmin, args: argparse.Namespace) -> Output:
    begin = parse_timestamp(args.beginTimestamp) if args.beginTimestamp else None
    end = parse_timestamp(args.endTimestamp) if args.endTimestamp else None
    body = _bool(args.printBody) if args.printBody is not None else True
    msgs = await _scan(admin, args.topic, broker_name=None, queue_id=None, begin_ms=begin,
                       end_ms=end, start_offset=None, limit=None,
                       group=MixAll.TOOLS_CONSUMER_GROUP, sub=args.subExpression or "*")
    return Output([message_json(m) for m in msgs],
                  "".join(_msg_line(m, body, args.charsetName or "utf-8") for m in msgs))


async def send_message(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.qid is not None and not args.broker:
        raise UsageError("-i queueId needs -b brokerName")
    result = await admin.send_message(args.topic, args.body.encode("utf-8"), tags=args.tags,
                                      keys=args.key, broker_name=args.broker, queue_id=args.qid)
    fmt = "%-32s  %-4s  %-20s    %s\n"
    mq = result.message_queue
    text = fmt % ("#Broker Name", "#QID", "#Send Result", "#MsgId") + fmt % (
        mq.broker_name, mq.queue_id, result.status.name, result.msg_id)
    return Output({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                   "sendStatus": result.status.name, "msgId": result.msg_id,
                   "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset}, text)


async def consume_message(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.queueId is not None and not args.brokerName:
        raise UsageError("-i queueId needs -b brokerName")
    begin = parse_timestamp(args.beginTimestamp) if args.beginTimestamp else None
    end = parse_timestamp(args.endTimestamp) if args.endTimestamp else None
    msgs = await _scan(admin, args.topic, broker_name=args.brokerName, queue_id=args.queueId,
                       begin_ms=begin, end_ms=end, start_offset=args.offset,
                       limit=args.messageNumber, group=args.consumerGroup or
                       MixAll.TOOLS_CONSUMER_GROUP, sub="*")
    lines = ["Consume ok\n" + _msg_line(m, True) for m in msgs]
    return Output([message_json(m) for m in msgs], "".join(lines))


async def update_kv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    await admin.put_kv_config(args.namespace, args.key, args.value)
    return Output({"namespace": args.namespace, "key": args.key, "value": args.value},
                  "create or update kv config to namespace success.\n")


async def delete_kv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    await admin.delete_kv_config(args.namespace, args.key)
    return Output({"namespace": args.namespace, "key": args.key},
                  "delete kv config from namespace success.\n")


async def get_kv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.key:
        value = await admin.get_kv_config(args.namespace, args.key)
        if value is None:
            raise MQClientError(f"key '{args.key}' not found in namespace '{args.namespace}'")
        table = {args.key: value}
    else:
        table = await admin.get_kv_list(args.namespace)
    return Output({"namespace": args.namespace, "table": table},
                  "".join("%-50s=  %s\n" % (k, table[k]) for k in sorted(table)))


async def get_namesrv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    configs = await admin.get_namesrv_config()
    return Output(configs, "".join(format_properties(a, p) for a, p in configs.items()))


async def update_namesrv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    await admin.update_namesrv_config({args.key: args.value})
    text = "update name server config success!%s\n%s : %s\n" % (
        admin.namesrv_addrs, args.key, args.value)
    return Output({"namesrv": admin.namesrv_addrs, "key": args.key, "value": args.value}, text)


# -- argument parsing -----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors become one line and exit code 2 (never a traceback)."""

    def error(self, message: str) -> NoReturn:
        words = self.prog.split()
        hint = f"mqadmin {words[-1]} -h" if len(words) > 1 else "mqadmin -h"
        raise UsageError(f"{message} (see '{hint}')")


def _add(sub: Any, name: str, fn: Command, help_text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("-n", "--namesrvAddr", default=None,
                   help="name server address list, e.g. 127.0.0.1:9876;192.168.0.1:9876 "
                        "(default: the NAMESRV_ADDR environment variable)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds per request (default 3)")
    _COMMANDS[name] = (fn, help_text)
    return p


def _broker_or_cluster(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("-b", "--brokerAddr", help="broker address")
    g.add_argument("-c", "--clusterName", help="cluster name")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mqadmin", description="aiorocketmq admin tool (upstream mqadmin commands)")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    sub.required = True

    p = _add(sub, "updateTopic", update_topic, "Update or create topic")
    _broker_or_cluster(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-r", "--readQueueNums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=int(Perm.READ | Perm.WRITE))
    p.add_argument("-o", "--order", help="true|false")

    p = _add(sub, "deleteTopic", delete_topic, "Delete topic from broker and NameServer")
    p.add_argument("-c", "--clusterName", required=True)
    p.add_argument("-t", "--topic", required=True)

    p = _add(sub, "topicList", topic_list, "Fetch all topic list from name server")
    p.add_argument("-c", "--clusterModel", action="store_true", help="with clusters and groups")

    p = _add(sub, "topicRoute", topic_route, "Examine topic route info")
    p.add_argument("-t", "--topic", required=True)

    p = _add(sub, "topicStatus", topic_status, "Examine topic Status info")
    p.add_argument("-t", "--topic", required=True)

    p = _add(sub, "updateTopicPerm", update_topic_perm, "Update topic perm")
    _broker_or_cluster(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--perm", type=int, required=True, help="2 (W), 4 (R) or 6 (RW)")

    _add(sub, "clusterList", cluster_list, "List all of clusters")

    p = _add(sub, "brokerStatus", broker_status, "Fetch broker runtime status data")
    _broker_or_cluster(p)

    p = _add(sub, "getBrokerConfig", get_broker_config, "Get broker config by cluster or special broker")
    _broker_or_cluster(p)

    p = _add(sub, "updateBrokerConfig", update_broker_config, "Update broker's config")
    _broker_or_cluster(p)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)

    p = _add(sub, "updateSubGroup", update_sub_group, "Update or create subscription group")
    _broker_or_cluster(p)
    p.add_argument("-g", "--groupName", required=True)
    p.add_argument("-s", "--consumeEnable")
    p.add_argument("-m", "--consumeFromMinEnable")
    p.add_argument("-d", "--consumeBroadcastEnable")
    p.add_argument("-q", "--retryQueueNums", type=int)
    p.add_argument("-r", "--retryMaxTimes", type=int)
    p.add_argument("-i", "--brokerId", type=int)
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int)
    p.add_argument("-a", "--notifyConsumerIdsChanged")

    p = _add(sub, "deleteSubGroup", delete_sub_group, "Delete subscription group from broker")
    _broker_or_cluster(p)
    p.add_argument("-g", "--groupName", required=True)
    p.add_argument("-r", "--removeOffset", action="store_true", help="remove its offsets too")

    p = _add(sub, "consumerProgress", consumer_progress, "Query consumers's progress")
    p.add_argument("-g", "--groupName")
    p.add_argument("-t", "--topicName")

    p = _add(sub, "consumerConnection", consumer_connection,
             "Query consumer's socket connection, client version and subscription")
    p.add_argument("-g", "--consumerGroup", required=True)

    p = _add(sub, "consumerStatus", consumer_status, "Query consumer's internal data structure")
    p.add_argument("-g", "--consumerGroup", required=True)
    p.add_argument("-i", "--clientId")
    p.add_argument("-s", "--jstack", action="store_true")

    p = _add(sub, "resetOffsetByTime", reset_offset_by_time, "Reset consumer offset by timestamp")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--timestamp", required=True,
                   help="now | currentTimeMillis | yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-f", "--force", help="true|false (default true)")

    p = _add(sub, "cloneGroupOffset", clone_group_offset, "Clone offset from other group")
    p.add_argument("-s", "--srcGroup", required=True)
    p.add_argument("-d", "--destGroup", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-o", "--offline", help="true|false")

    p = _add(sub, "queryMsgById", query_msg_by_id, "Query Message by Id")
    p.add_argument("-i", "--msgId", required=True,
                   help="message id(s), comma-separated: offset ids, or unique keys (UNIQ_KEY)")
    p.add_argument("-t", "--topic", help="topic of unique-key ids (default: search every topic)")

    p = _add(sub, "queryMsgByKey", query_msg_by_key, "Query Message by Key")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--msgKey", required=True)

    p = _add(sub, "queryMsgTraceById", query_msg_trace_by_id, "query a message trace")
    p.add_argument("-i", "--msgId", required=True, help="Message Id")
    p.add_argument("-t", "--traceTopic", help="The name value of message trace topic")

    p = _add(sub, "queryMsgByUniqueKey", query_msg_by_unique_key, "Query Message by Unique key")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-i", "--msgId", required=True)
    p.add_argument("-a", "--showAll", action="store_true", help="Print all message, the limit is 32")

    p = _add(sub, "queryMsgByOffset", query_msg_by_offset, "Query Message by offset")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", required=True)
    p.add_argument("-i", "--queueId", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)

    p = _add(sub, "printMsg", print_msg, "Print Message Detail")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--charsetName")
    p.add_argument("-s", "--subExpression")
    p.add_argument("-b", "--beginTimestamp")
    p.add_argument("-e", "--endTimestamp")
    p.add_argument("-d", "--printBody", help="true|false")

    p = _add(sub, "sendMessage", send_message, "Send a message")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--body", required=True)
    p.add_argument("-k", "--key")
    p.add_argument("-c", "--tags")
    p.add_argument("-b", "--broker")
    p.add_argument("-i", "--qid", type=int)

    p = _add(sub, "consumeMessage", consume_message, "Consume message")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName")
    p.add_argument("-i", "--queueId", type=int)
    p.add_argument("-o", "--offset", type=int)
    p.add_argument("-g", "--consumerGroup")
    p.add_argument("-s", "--beginTimestamp")
    p.add_argument("-e", "--endTimestamp")
    p.add_argument("-c", "--messageNumber", type=int, default=128)

    p = _add(sub, "updateKvConfig", update_kv_config, "Create or update KV config")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)

    p = _add(sub, "deleteKvConfig", delete_kv_config, "Delete KV config")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)

    p = _add(sub, "getKvConfig", get_kv_config, "Get a KV config value or a whole namespace")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key")

    _add(sub, "getNamesrvConfig", get_namesrv_config, "Get configs of name server")

    p = _add(sub, "updateNamesrvConfig", update_namesrv_config, "Update configs of name server")
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)
    _add_acl_commands(sub)
    return parser


# -- ACL (tools/command/acl/*) ----------------------------------------------------------------


async def _acl_targets(admin: MQAdmin, args: argparse.Namespace, *, masters_only: bool) -> list[str]:
    """``-b`` the one broker; ``-c`` the cluster's masters (and slaves, for the commands that
    write: upstream ``fetchMasterAndSlaveAddrByClusterName``)."""
    if args.brokerAddr:
        return [args.brokerAddr.strip()]
    return [b.addr for b in await admin.brokers(args.clusterName.strip(),
                                                masters_only=masters_only)]


def _acl_perm_list(text: str | None) -> list[str] | None:
    return None if text is None else text.strip().split(",")


async def update_acl_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    config = PlainAccessConfig(
        access_key=args.accessKey.strip(), secret_key=args.secretKey.strip(),
        white_remote_address=None if args.whiteRemoteAddress is None
        else args.whiteRemoteAddress.strip(),
        admin=args.admin is not None and args.admin.strip().lower() == "true",
        default_topic_perm=None if args.defaultTopicPerm is None else args.defaultTopicPerm.strip(),
        default_group_perm=None if args.defaultGroupPerm is None else args.defaultGroupPerm.strip(),
        topic_perms=_acl_perm_list(args.topicPerms), group_perms=_acl_perm_list(args.groupPerms))
    lines = []
    for addr in await _acl_targets(admin, args, masters_only=False):
        await acl_admin.update_acl_config(admin, addr, config)
        lines.append("create or update plain access config to %s success.\n" % addr)
    lines.append("%r" % config)
    return Output({"accessKey": config.access_key, "brokers": len(lines) - 1}, "".join(lines))


async def delete_acl_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    ak = args.accessKey.strip()
    lines = []
    for addr in await _acl_targets(admin, args, masters_only=False):
        await acl_admin.delete_acl_config(admin, addr, ak)
        lines.append("delete plain access config account from %s success.\n" % addr)
    lines.append("account's accesskey is:%s" % ak)
    return Output({"accessKey": ak}, "".join(lines))


async def update_global_white_addr(admin: MQAdmin, args: argparse.Namespace) -> Output:
    addrs = args.globalWhiteRemoteAddresses.strip()
    path = None if args.aclFileFullPath is None else args.aclFileFullPath.strip()
    lines = []
    for addr in await _acl_targets(admin, args, masters_only=False):
        await acl_admin.update_global_white_addr_config(admin, addr, addrs, path)
        lines.append("update global white remote addresses to %s success.\n" % addr)
    return Output({"globalWhiteRemoteAddresses": addrs.split(",")}, "".join(lines))


async def cluster_acl_config_version(admin: MQAdmin, args: argparse.Namespace) -> Output:
    rows: list[dict[str, Any]] = []
    text = []
    if args.clusterName:
        text.append("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n" % (
            "#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
            "#AclConfigVersionNum", "#AclLastUpdateTime"))
    for addr in await _acl_targets(admin, args, masters_only=True):
        info = await acl_admin.acl_version_info(admin, addr)
        for path in java_hashmap_order(info.all_acl_config_data_version):
            v = info.all_acl_config_data_version[path]
            rows.append({"clusterName": info.cluster_name, "brokerName": info.broker_name,
                         "brokerAddr": info.broker_addr, "aclFilePath": path,
                         "counter": v.counter, "timestamp": v.timestamp})
            text.append("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n" % (
                info.cluster_name, info.broker_name, info.broker_addr, path, v.counter,
                format_date(v.timestamp)))
    text.append("get cluster's plain access config version success.\n" if args.clusterName
                else "get broker's plain access config version success.\n")
    return Output(rows, "".join(text))


def _java_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(values) + "]"


async def get_acl_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    data = []
    text = []
    for addr in await _acl_targets(admin, args, masters_only=True):
        whites, configs = await acl_admin.broker_acl_config(admin, addr)
        data.append({"brokerAddr": addr, "globalWhiteAddrs": whites,
                     "plainAccessConfigs": [c.to_json() for c in configs]})
        text.append("\n%-20s: %s\n\naccounts:\n" % ("globalWhiteRemoteAddresses",
                                                     _java_list(whites)))
        for c in configs:
            # PlainAccessConfig's declared fields, in order (GetAccessConfigSubCommand)
            for name, value in (("accessKey", c.access_key), ("secretKey", c.secret_key),
                                ("whiteRemoteAddress", c.white_remote_address),
                                ("admin", "true" if c.admin else "false"),
                                ("defaultTopicPerm", c.default_topic_perm),
                                ("defaultGroupPerm", c.default_group_perm),
                                ("topicPerms", None if c.topic_perms is None
                                 else _java_list(c.topic_perms)),
                                ("groupPerms", None if c.group_perms is None
                                 else _java_list(c.group_perms))):
                text.append("%-1s %-18s: %s\n" % ("", name, "" if value is None else value))
            text.append("\n")
    return Output(data, "".join(text))


def _add_acl_commands(sub: Any) -> None:
    p = _add(sub, "updateAclConfig", update_acl_config, "Update acl config yaml file in broker")
    _broker_or_cluster(p)
    p.add_argument("-a", "--accessKey", required=True, help="set accessKey in acl config file")
    p.add_argument("-s", "--secretKey", required=True, help="set secretKey in acl config file")
    p.add_argument("-w", "--whiteRemoteAddress",
                   help="set white ip Address for account in acl config file")
    p.add_argument("-i", "--defaultTopicPerm", help="set default topicPerm in acl config file")
    p.add_argument("-u", "--defaultGroupPerm", help="set default GroupPerm in acl config file")
    p.add_argument("-t", "--topicPerms", help="set topicPerms list,eg: topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", help="set groupPerms list,eg: groupD=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", help="set admin flag in acl config file")
    for name in ("deleteAclConfig", "deleteAccessConfig"):
        p = _add(sub, name, delete_acl_config, "Delete Acl Config Account in broker")
        _broker_or_cluster(p)
        p.add_argument("-a", "--accessKey", required=True,
                       help="set accessKey in acl config file for deleting which account")
    p = _add(sub, "clusterAclConfigVersion", cluster_acl_config_version,
             "List all of acl config version information in cluster")
    _broker_or_cluster(p)
    p = _add(sub, "updateGlobalWhiteAddr", update_global_white_addr,
             "Update global white address for acl Config File in broker")
    _broker_or_cluster(p)
    p.add_argument("-g", "--globalWhiteRemoteAddresses", required=True,
                   help="set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*")
    p.add_argument("-p", "--aclFileFullPath",
                   help="update global white address of specified acl file,eg: /xxx/plain_test.yml")
    for name in ("getAclConfig", "getAccessConfigSubCommand"):
        p = _add(sub, name, get_acl_config, "List all of acl config information in cluster")
        _broker_or_cluster(p)


# -- entry point ----------------------------------------------------------------------------

_EXPECTED = (RocketMQError, OSError, asyncio.TimeoutError, UnicodeError)


async def _run(args: argparse.Namespace) -> Output:
    fn = _COMMANDS[args.command][0]
    # As stock MQAdminStartup: sign with $ROCKETMQ_HOME/conf/tools.yml when it has keys.
    async with MQAdmin(args.namesrvAddr or namesrv_addr_from_env(), timeout=args.timeout,
                       rpc_hook=acl_admin.tools_rpc_hook()) as admin:
        return await fn(admin, args)


def _quiet_logs() -> None:
    """Library logs go to stderr, warnings and up: stdout carries only the command's output."""
    configure_logging("console", "WARNING")


def usage_text() -> str:
    """``MQAdminStartup.printHelp``: every command with its description."""
    lines = ["The most commonly used mqadmin commands are:\n"]
    lines.extend("   %-20s %s\n" % (name, desc) for name, (_, desc) in _COMMANDS.items())
    lines.append("\nSee 'mqadmin help <command>' for more information on a specific command.\n")
    return "".join(lines)


def _startup(parser: argparse.ArgumentParser, argv: list[str]) -> int | None:
    """``MQAdminStartup.main0`` before a command runs: no arguments print the command list,
    ``help <command>`` its options; an unknown command is one line on stderr (exit 1).
    None: go on and run the command."""
    if not argv:
        sys.stdout.write(usage_text())
        return 0
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(usage_text())
        return 0
    name = argv[1] if argv[0] == "help" and len(argv) == 2 else argv[0]
    if name not in _COMMANDS:
        print(f"The sub command {name} not exist.", file=sys.stderr)
        return 1
    if argv[0] == "help":
        parser.parse_args([name, "-h"])  # prints the command's help and exits 0
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the process exit code (0 ok, 1 failure, 2 usage)."""
    _quiet_logs()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    name = "mqadmin"
    try:
        early = _startup(parser, argv)
        if early is not None:
            return early
        args = parser.parse_args(argv)
        name = f"mqadmin {args.command}"
        output = asyncio.run(_run(args))
    except UsageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except (MQBrokerError, RemotingError, MQClientError, ProtocolError) as exc:
        print(f"{name}: {describe_error(exc)}", file=sys.stderr)
        return 1
    except _EXPECTED as exc:
        print(f"{name}: {describe_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if args.json:
        sys.stdout.write(json.dumps(output.data, indent=1, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(output.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
