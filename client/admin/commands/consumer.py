"""Subscription-group and consumer commands (upstream ``tools/command/consumer``,
``connection`` and ``offset``): updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, consumerStatus, resetOffsetByTime, cloneGroupOffset, getConsumerConfig."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from aiorocketmq.protocol.bodies import ConsumerConnection, ConsumeStats, SubscriptionGroupConfig
from aiorocketmq.protocol.codes import MixAll, MQVersion, ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError
from aiorocketmq.protocol.javautil import java_hashmap_order

from ..api import MQAdmin, RollbackStats
from ..subscriptions import client_subscriptions, issue_lines, subscription_issues
from .base import BROKER_OR_CLUSTER, Output, broker_targets, command, opt, parse_bool
from .formatting import (
    format_date,
    format_subscription_group_config,
    front,
    java_bool,
    parse_timestamp,
)


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
        lines.append(fmt % (front(mq.topic, 64), front(mq.broker_name, 32), mq.queue_id,
                            w.broker_offset, w.consumer_offset, diff, last))
    lines.append("\n")
    lines.append("Consume TPS: %.2f\n" % stats.consume_tps)
    lines.append("Diff Total: %d\n" % diff_total)
    return {"queues": queues, "consumeTps": stats.consume_tps, "diffTotal": diff_total}, "".join(lines)


@command("updateSubGroup", "Update or create subscription group",
         BROKER_OR_CLUSTER,
         opt("-g", "--groupName", required=True),
         opt("-s", "--consumeEnable"),
         opt("-m", "--consumeFromMinEnable"),
         opt("-d", "--consumeBroadcastEnable"),
         opt("-q", "--retryQueueNums", type=int),
         opt("-r", "--retryMaxTimes", type=int),
         opt("-i", "--brokerId", type=int),
         opt("-w", "--whichBrokerWhenConsumeSlowly", type=int),
         opt("-a", "--notifyConsumerIdsChanged"))
async def update_sub_group(admin: MQAdmin, args: argparse.Namespace) -> Output:
    # UpdateSubGroupSubCommand's defaults: no broadcast, not from min offset.
    cfg = SubscriptionGroupConfig(args.groupName, consume_broadcast_enable=False,
                                  consume_from_min_enable=False)
    for flag, attr in (("consumeEnable", "consume_enable"),
                       ("consumeFromMinEnable", "consume_from_min_enable"),
                       ("consumeBroadcastEnable", "consume_broadcast_enable"),
                       ("notifyConsumerIdsChanged", "notify_consumer_ids_changed_enable")):
        if getattr(args, flag) is not None:
            setattr(cfg, attr, parse_bool(getattr(args, flag)))
    for flag, attr in (("retryQueueNums", "retry_queue_nums"), ("retryMaxTimes", "retry_max_times"),
                       ("brokerId", "broker_id"),
                       ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly")):
        if getattr(args, flag) is not None:
            setattr(cfg, attr, getattr(args, flag))
    done = []
    for addr in await broker_targets(admin, args):
        await admin.create_subscription_group(addr, cfg)
        done.append(addr)
    text = "".join(f"create subscription group to {a} success.\n" for a in done) + \
        format_subscription_group_config(cfg) + "\n"
    return Output({"brokers": done, "subscriptionGroupConfig": cfg.to_json()}, text)


@command("deleteSubGroup", "Delete subscription group from broker",
         BROKER_OR_CLUSTER,
         opt("-g", "--groupName", required=True),
         opt("-r", "--removeOffset", action="store_true", help="remove its offsets too"))
async def delete_sub_group(admin: MQAdmin, args: argparse.Namespace) -> Output:
    done = []
    for addr in await broker_targets(admin, args):
        await admin.delete_subscription_group(addr, args.groupName,
                                              remove_offset=bool(args.removeOffset))
        done.append(addr)
    where = f"cluster [{args.clusterName}]" if args.clusterName else f"broker [{args.brokerAddr}]"
    text = f"delete subscription group [{args.groupName}] from {where} success.\n"
    return Output({"group": args.groupName, "brokers": done}, text)


@command("consumerProgress", "Query consumers's progress",
         opt("-g", "--groupName"),
         opt("-t", "--topicName"))
async def consumer_progress(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.groupName:
        stats = await admin.consume_stats(args.groupName, args.topicName)
        if not stats.offset_table:
            raise MQClientError(f"consumer group '{args.groupName}' not online or has no "
                                "consume stats")
        data, text = format_consumer_progress(stats)
        data["group"] = args.groupName
        data["subscriptionIssues"] = await _warn_inconsistent(admin, args.groupName)
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
        lines.append(fmt % (front(group, 64), count, version, ctype, model, tps, diff))
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


@command("consumerConnection",
         "Query consumer's socket connection, client version and subscription",
         opt("-g", "--consumerGroup", required=True))
async def consumer_connection(admin: MQAdmin, args: argparse.Namespace) -> Output:
    conn = await admin.consumer_connection(args.consumerGroup)
    data = json.loads(conn.encode(standard=True))
    data["subscriptionIssues"] = await _warn_inconsistent(admin, args.consumerGroup, conn)
    return Output(data, _connection_text(conn))


async def _warn_inconsistent(admin: MQAdmin, group: str,
                             conn: ConsumerConnection | None = None) -> list[dict[str, Any]]:
    """Ask each online client of ``group`` what it subscribes to and warn on stderr (stdout
    stays stock's) when they differ; the issues, for ``--json``."""
    if conn is None:
        try:
            conn = await admin.consumer_connection(group)
        except MQBrokerError:
            return []  # not online: nobody to disagree
    issues = subscription_issues(await client_subscriptions(admin, group, conn))
    for line in issue_lines(group, issues):
        print(line, file=sys.stderr)
    return issues


@command("consumerStatus", "Query consumer's internal data structure",
         opt("-g", "--consumerGroup", required=True),
         opt("-i", "--clientId"),
         opt("-s", "--jstack", action="store_true"))
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


@command("resetOffsetByTime", "Reset consumer offset by timestamp",
         opt("-g", "--group", required=True),
         opt("-t", "--topic", required=True),
         opt("-s", "--timestamp", required=True,
             help="now | currentTimeMillis | yyyy-MM-dd#HH:mm:ss:SSS"),
         opt("-f", "--force", help="true|false (default true)"))
async def reset_offset_by_time(admin: MQAdmin, args: argparse.Namespace) -> Output:
    # ResetOffsetByTimeCommand: "now" is -1 (the broker resets to the max offset).
    ts = -1 if args.timestamp.strip() == "now" else parse_timestamp(args.timestamp)
    force = parse_bool(args.force) if args.force is not None else True
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
                 args.group, args.topic, java_bool(force), args.timestamp, ts)]
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


@command("cloneGroupOffset", "Clone offset from other group",
         opt("-s", "--srcGroup", required=True),
         opt("-d", "--destGroup", required=True),
         opt("-t", "--topic", required=True),
         opt("-o", "--offline", help="true|false"))
async def clone_group_offset(admin: MQAdmin, args: argparse.Namespace) -> Output:
    offline = parse_bool(args.offline) if args.offline is not None else False
    await admin.clone_group_offset(args.srcGroup, args.destGroup, args.topic, offline=offline)
    text = "clone group offset success. srcGroup[%s], destGroup=[%s], topic[%s]\n" % (
        args.srcGroup, args.destGroup, args.topic)
    return Output({"srcGroup": args.srcGroup, "destGroup": args.destGroup, "topic": args.topic},
                  text)


def format_consumer_config(cluster: str | None, broker_name: str,
                           cfg: SubscriptionGroupConfig) -> str:
    """``GetConsumerConfigSubCommand``: a banner, then each declared field of
    ``SubscriptionGroupConfig`` as ``%-40s=  %s``."""
    fields: list[tuple[str, Any]] = [
        ("groupName", cfg.group_name), ("consumeEnable", java_bool(cfg.consume_enable)),
        ("consumeFromMinEnable", java_bool(cfg.consume_from_min_enable)),
        ("consumeBroadcastEnable", java_bool(cfg.consume_broadcast_enable)),
        ("retryQueueNums", cfg.retry_queue_nums), ("retryMaxTimes", cfg.retry_max_times),
        ("brokerId", cfg.broker_id),
        ("whichBrokerWhenConsumeSlowly", cfg.which_broker_when_consume_slowly),
        ("notifyConsumerIdsChangedEnable", java_bool(cfg.notify_consumer_ids_changed_enable)),
    ]
    lines = ["=============================%s:%s=============================\n" % (
        "null" if cluster is None else cluster, broker_name)]
    lines.extend("%s%-40s=  %s\n" % ("", name, "" if value is None else value)
                 for name, value in fields)
    return "".join(lines)


@command("getConsumerConfig", "Get consumer config by subscription group name!",
         opt("-g", "--groupName", required=True, help="subscription group name"))
async def get_consumer_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """The group's config on every broker that has it (its master, else any address), in
    the order of stock's ``HashMap`` of broker names; nothing when none has it."""
    group = args.groupName.strip()
    info = await admin.cluster_info()
    data, text = [], []
    for name in java_hashmap_order(info.broker_addr_table):
        addrs = info.broker_addr_table[name].broker_addrs
        addr = addrs.get(MixAll.MASTER_ID) or next(iter(addrs.values()), None)
        if addr is None:
            continue
        cfg = (await admin.subscription_groups(addr)).get(group)
        if cfg is None:
            continue
        cluster = next((c for c in java_hashmap_order(info.cluster_addr_table)
                        if name in info.cluster_addr_table[c]), None)
        data.append({"cluster": cluster, "brokerName": name, "config": cfg.to_json()})
        text.append(format_consumer_config(cluster, name, cfg))
    return Output(data, "".join(text))
