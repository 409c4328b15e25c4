"""Topic commands (upstream ``tools/command/topic``): updateTopic, deleteTopic, topicList,
topicRoute, topicStatus, updateTopicPerm, topicClusterList, allocateMQ."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from aiorocketmq.client.allocate import AllocateMessageQueueAveragely
from aiorocketmq.protocol.bodies import MessageQueue, TopicConfig, TopicRouteData, TopicStatsTable
from aiorocketmq.protocol.codes import MixAll, Perm
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError
from aiorocketmq.protocol.javautil import java_hashmap_order

from ..api import MQAdmin
from .base import (
    BROKER_OR_CLUSTER,
    Output,
    UsageError,
    broker_targets,
    command,
    opt,
    parse_bool,
)
from .formatting import (
    format_human_ms,
    format_topic_config,
    front,
    java_hash_order,
    queue_hash,
)


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
        lines.append(fmt % (front(mq.broker_name, 32), mq.queue_id, o.min_offset, o.max_offset,
                            human))
    return rows, "".join(lines)


@command("updateTopic", "Update or create topic",
         BROKER_OR_CLUSTER,
         opt("-t", "--topic", required=True),
         opt("-r", "--readQueueNums", type=int, default=8),
         opt("-w", "--writeQueueNums", type=int, default=8),
         opt("-p", "--perm", type=int, default=int(Perm.READ | Perm.WRITE)),
         opt("-o", "--order", help="true|false"))
async def update_topic(admin: MQAdmin, args: argparse.Namespace) -> Output:
    tc = TopicConfig(args.topic, args.readQueueNums, args.writeQueueNums, args.perm,
                     order=parse_bool(args.order) if args.order else False)
    done = []
    for addr in await broker_targets(admin, args):
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


@command("deleteTopic", "Delete topic from broker and NameServer",
         opt("-c", "--clusterName", required=True),
         opt("-t", "--topic", required=True))
async def delete_topic(admin: MQAdmin, args: argparse.Namespace) -> Output:
    done = await admin.delete_topic(args.topic, args.clusterName)
    text = (f"delete topic [{args.topic}] from cluster [{args.clusterName}] success.\n"
            f"delete topic [{args.topic}] from NameServer success.\n")
    return Output({"topic": args.topic, "cluster": args.clusterName, "brokers": done}, text)


@command("topicList", "Fetch all topic list from name server",
         opt("-c", "--clusterModel", action="store_true", help="with clusters and groups"))
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
            lines.append(fmt % (front(cluster, 20), front(topic, 48), front(g, 48)))
    return Output({"rows": rows}, "".join(lines))


@command("topicRoute", "Examine topic route info",
         opt("-t", "--topic", required=True))
async def topic_route(admin: MQAdmin, args: argparse.Namespace) -> Output:
    route = await admin.topic_route(args.topic)
    data = json.loads(route.encode(standard=True))
    return Output(data, json.dumps(data, indent=1) + "\n")


@command("topicStatus", "Examine topic Status info",
         opt("-t", "--topic", required=True))
async def topic_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
    rows, text = format_topic_status(await admin.topic_stats(args.topic))
    return Output({"topic": args.topic, "queues": rows}, text)


@command("updateTopicPerm", "Update topic perm",
         BROKER_OR_CLUSTER,
         opt("-t", "--topic", required=True),
         opt("-p", "--perm", type=int, required=True, help="2 (W), 4 (R) or 6 (RW)"))
async def update_topic_perm(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.perm not in (2, 4, 6):
        raise UsageError("perm must be 2 (W), 4 (R) or 6 (RW)")
    route = await admin.topic_route(args.topic)
    lines, done = [], []
    for addr in await broker_targets(admin, args):
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


@command("topicClusterList", "get cluster info for topic",
         opt("-t", "--topic", required=True, help="topic name"))
async def topic_cluster_list(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``TopicClusterSubCommand``: the clusters holding the route's first broker, one a
    line, in the order of stock's ``HashSet``."""
    info = await admin.cluster_info()
    route = await admin.topic_route(args.topic.strip())
    first = route.broker_datas[0].broker_name if route.broker_datas else None
    clusters = java_hashmap_order(c for c in java_hashmap_order(info.cluster_addr_table)
                                  if first in info.cluster_addr_table[c])
    return Output({"topic": args.topic.strip(), "clusters": clusters},
                  "".join(f"{c}\n" for c in clusters))


def allocate_mq_json(topic: str, route: TopicRouteData, ips: Sequence[str]) -> tuple[dict[str, Any], str]:
    """``AllocateMQSubCommand``: each ip's queues under ``AllocateMessageQueueAveragely`` of
    the route's readable queues (in stock's ``HashSet`` order), as fastjson prints the
    ``RebalanceResult``: ``{"result":{ip:[{"brokerName":..,"queueId":..,"topic":..}]}}``."""
    readable = [MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                if Perm.readable(qd.perm) for i in range(qd.read_queue_nums)]
    mqs = java_hash_order(readable, lambda q: queue_hash(q.topic, q.broker_name, q.queue_id))
    averagely = AllocateMessageQueueAveragely()
    result: dict[str, list[dict[str, Any]]] = {}
    for ip in ips:
        result[ip] = [{"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic}
                      for q in averagely.allocate("aa", ip, mqs, ips)]
    ordered = {ip: result[ip] for ip in java_hashmap_order(result)}
    return {"result": ordered}, json.dumps({"result": ordered}, separators=(",", ":"),
                                           ensure_ascii=False) + "\n"


@command("allocateMQ", "Allocate MQ",
         opt("-t", "--topic", required=True, help="topic name"),
         opt("-i", "--ipList", required=True, help="ipList"))
async def allocate_mq(admin: MQAdmin, args: argparse.Namespace) -> Output:
    topic = args.topic.strip()
    ips = args.ipList.strip().split(",")
    data, text = allocate_mq_json(topic, await admin.topic_route(topic), ips)
    return Output(data, text)
