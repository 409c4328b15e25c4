"""Message commands (upstream ``tools/command/message``): queryMsgById, queryMsgByKey,
queryMsgTraceById, queryMsgByUniqueKey, queryMsgByOffset, printMsg, sendMessage,
consumeMessage. Long scans (``printMsg``, ``consumeMessage``) report their progress over
queues on stderr."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any

from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import MessageExt

from ..api import MessageTrack, MQAdmin
from .base import EXPECTED, Output, UsageError, command, opt, parse_bool
from .formatting import describe_error, format_human_ms, java_map_string, parse_timestamp

# QueryMsgByIdSubCommand.createBodyFile: each shown message's body is written here.
BODY_DIR = "/tmp/rocketmq/msgbodys"


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


async def _show_message(admin: MQAdmin, msg: MessageExt, *, index: int = 0,
                        offset_id: bool = True) -> str:
    """One message as ``printMsg`` / ``showMessage`` show it, message tracks included (a
    failed track lookup is reported on stderr, as upstream prints its stack trace)."""
    text = format_message(msg, write_body_file(msg, index), offset_id=offset_id)
    try:
        tracks = await admin.message_track_detail(msg)
    except EXPECTED as exc:
        print(f"mqadmin: message track of {msg.msg_id}: {describe_error(exc)}", file=sys.stderr)
        return text
    return text + format_message_tracks(tracks)


@command("queryMsgById", "Query Message by Id",
         opt("-i", "--msgId", required=True,
             help="message id(s), comma-separated: offset ids, or unique keys (UNIQ_KEY)"),
         opt("-t", "--topic", help="topic of unique-key ids (default: search every topic)"))
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


@command("queryMsgByKey", "Query Message by Key",
         opt("-t", "--topic", required=True),
         opt("-k", "--msgKey", required=True))
async def query_msg_by_key(admin: MQAdmin, args: argparse.Namespace) -> Output:
    msgs = await admin.query_message_by_key(args.topic, args.msgKey)
    fmt = "%-50s %4s %40s\n"
    lines = [fmt % ("#Message ID", "#QID", "#Offset")]
    lines.extend(fmt % (m.msg_id, m.queue_id, m.queue_offset) for m in msgs)
    return Output([message_json(m) for m in msgs], "".join(lines))


@command("queryMsgTraceById", "query a message trace",
         opt("-i", "--msgId", required=True, help="Message Id"),
         opt("-t", "--traceTopic", help="The name value of message trace topic"))
async def query_msg_trace_by_id(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``queryMsgTraceById``: the message's trace records (``client.trace.query``)."""
    from aiorocketmq.client.trace.query import format_trace_views, query_trace_views

    views = await query_trace_views(admin, args.msgId.strip(),
                                    args.traceTopic.strip() if args.traceTopic else None)
    return Output([dataclasses.asdict(v) for v in views], format_trace_views(views))


@command("queryMsgByUniqueKey", "Query Message by Unique key",
         opt("-t", "--topic", required=True),
         opt("-i", "--msgId", required=True),
         opt("-a", "--showAll", action="store_true", help="Print all message, the limit is 32"))
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


@command("queryMsgByOffset", "Query Message by offset",
         opt("-t", "--topic", required=True),
         opt("-b", "--brokerName", required=True),
         opt("-i", "--queueId", type=int, required=True),
         opt("-o", "--offset", type=int, required=True))
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


@command("printMsg", "Print Message Detail",
         opt("-t", "--topic", required=True),
         opt("-c", "--charsetName"),
         opt("-s", "--subExpression"),
         opt("-b", "--beginTimestamp"),
         opt("-e", "--endTimestamp"),
         opt("-d", "--printBody", help="true|false"))
async def print_msg(admin: MQAdmin, args: argparse.Namespace) -> Output:
    begin = parse_timestamp(args.beginTimestamp) if args.beginTimestamp else None
    end = parse_timestamp(args.endTimestamp) if args.endTimestamp else None
    body = parse_bool(args.printBody) if args.printBody is not None else True
    msgs = await _scan(admin, args.topic, broker_name=None, queue_id=None, begin_ms=begin,
                       end_ms=end, start_offset=None, limit=None,
                       group=MixAll.TOOLS_CONSUMER_GROUP, sub=args.subExpression or "*")
    return Output([message_json(m) for m in msgs],
                  "".join(_msg_line(m, body, args.charsetName or "utf-8") for m in msgs))


@command("sendMessage", "Send a message",
         opt("-t", "--topic", required=True),
         opt("-p", "--body", required=True),
         opt("-k", "--key"),
         opt("-c", "--tags"),
         opt("-b", "--broker"),
         opt("-i", "--qid", type=int))
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


@command("consumeMessage", "Consume message",
         opt("-t", "--topic", required=True),
         opt("-b", "--brokerName"),
         opt("-i", "--queueId", type=int),
         opt("-o", "--offset", type=int),
         opt("-g", "--consumerGroup"),
         opt("-s", "--beginTimestamp"),
         opt("-e", "--endTimestamp"),
         opt("-c", "--messageNumber", type=int, default=128))
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
