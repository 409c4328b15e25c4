"""Producer commands (upstream ``tools/command/connection`` and ``producer``):
producerConnection, producer."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
from typing import Any

from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.codes import MQVersion, RequestCode
from aiorocketmq.protocol.headers import GetAllProducerInfoRequestHeader
from aiorocketmq.protocol.javautil import java_hashmap_order

from ..api import MQAdmin
from .base import Output, command, opt


@command("producerConnection", "Query producer's socket connection and client version",
         opt("-g", "--producerGroup", required=True, help="producer group name"),
         opt("-t", "--topic", required=True, help="topic name"))
async def producer_connection(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``ProducerConnectionSubCommand``: ``%04d  clientId clientAddr language version``."""
    group, topic = args.producerGroup.strip(), args.topic.strip()
    conn = await admin.producer_connection(group, topic)
    rows, lines = [], []
    for i, c in enumerate(sorted(conn.connection_set, key=lambda c: c.client_id), 1):
        lang = getattr(c.language, "name", str(c.language))
        rows.append({"clientId": c.client_id, "clientAddr": c.client_addr, "language": lang,
                     "version": MQVersion.desc(c.version)})
        lines.append("%04d  %-32s %-22s %-8s %s\n" % (i, c.client_id, c.client_addr, lang,
                                                       MQVersion.desc(c.version)))
    return Output({"group": group, "topic": topic, "connections": rows}, "".join(lines))


def format_producer_table(table: dict[str, list[dict[str, Any]]]) -> str:
    """``ProducerSubCommand``: one line per instance (``ProducerInfo.toString``), groups in
    the order of stock's ``HashMap``."""
    lines = []
    for group in java_hashmap_order(table):
        instances = table[group]
        if not instances:
            lines.append("producer group (%s) instances are empty\n" % group)
            continue
        for p in instances:
            lines.append("producer group (%s) instance : clientId=%s,remoteIP=%s, language=%s, "
                         "version=%d, lastUpdateTimestamp=%d\n" % (
                             group, p.get("clientId"), p.get("remoteIP"), p.get("language"),
                             int(p.get("version", 0)), int(p.get("lastUpdateTimestamp", 0))))
    return "".join(lines)


@command("producer", "Query producer's instances, connection, status, etc.",
         opt("-b", "--broker", required=True, help="broker address"))
async def producer(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``ProducerSubCommand``: GET_ALL_PRODUCER_INFO (328) of one broker."""
    addr = args.broker.strip()
    response = await admin.invoke(addr, RequestCode.GET_ALL_PRODUCER_INFO,
                                  GetAllProducerInfoRequestHeader())
    body = fastjson.loads(response.body) if response.body else {}
    table = body.get("data") or {} if isinstance(body, dict) else {}
    return Output({"broker": addr, "producers": table}, format_producer_table(table))
