"""Offset commands (upstream ``tools/command/offset``) not under consumer: skipAccumulatedMessage."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse

from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError

from ..api import MQAdmin
from .base import Output, command, opt
from .formatting import front


@command("skipAccumulatedMessage", "Skip all messages that are accumulated (not consumed) currently",
         opt("-g", "--group", required=True, help="set the consumer group"),
         opt("-t", "--topic", required=True, help="set the topic"),
         opt("-f", "--force", help="set the force rollback by timestamp switch[true|false]"))
async def skip_accumulated_message(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``SkipAccumulationSubCommand``: every queue's offset to its end (timestamp -1), through
    the group's online consumers, or, when none is online, by rewriting the stored offsets."""
    group, topic = args.group.strip(), args.topic.strip()
    # Boolean.valueOf: "true" in any case, anything else false
    force = True if args.force is None else args.force.strip().lower() == "true"
    try:
        table = await admin.reset_offset_by_time(topic, group, -1, force=force)
    except MQBrokerError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        stats = await admin.reset_offset_by_time_offline(topic, group, -1, force=force)
        fmt = "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s\n"
        lines = [fmt % ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                        "#timestampOffset", "#rollbackOffset")]
        lines.extend("%-20s  %-20d  %-20d  %-20d  %-20d  %-20d\n" % (
            front(s.broker_name, 32), s.queue_id, s.broker_offset, s.consumer_offset,
            s.timestamp_offset, s.rollback_offset) for s in stats)
        data = [{"brokerName": s.broker_name, "queueId": s.queue_id,
                 "brokerOffset": s.broker_offset, "consumerOffset": s.consumer_offset,
                 "timestampOffset": s.timestamp_offset, "rollbackOffset": s.rollback_offset}
                for s in stats]
        return Output({"group": group, "topic": topic, "online": False, "queues": data},
                      "".join(lines))
    lines = ["%-40s  %-40s  %-40s\n" % ("#brokerName", "#queueId", "#offset")]
    rows = []
    for mq in sorted(table):
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": table[mq]})
        lines.append("%-40s  %-40d  %-40d\n" % (front(mq.broker_name, 32), mq.queue_id, table[mq]))
    return Output({"group": group, "topic": topic, "online": True, "queues": rows}, "".join(lines))
