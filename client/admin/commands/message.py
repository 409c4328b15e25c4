"""Message commands (upstream ``tools/command/message``): queryMsgById, queryMsgByKey,
queryMsgTraceById, queryMsgByUniqueKey, queryMsgByOffset, printMsg, sendMessage,
consumeMessage, printMsgByQueue, sendMsgStatus, checkMsgSendRT. Long scans (``printMsg``, ``consumeMessage``) report their progress over
queues on stderr."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.javautil import java_hashmap_order
from aiorocketmq.protocol.message import Message, MessageExt

from ..api import MessageTrack, MQAdmin
from .base import (
    EXPECTED,
    Output,
    UsageError,
    command,
    now_ms,
    opt,
    parse_bool,
    started_producer,
)
from .formatting import (
    describe_error,
    format_human_ms,
    java_bool,
    java_map_string,
    parse_timestamp,
)

if TYPE_CHECKING:
    from aiorocketmq.client.api import SendResult

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


def _java_signed_bytes(body: bytes) -> str:
    """``Arrays.toString(byte[])``: signed bytes."""
    return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in body) + "]"


def _socket_addr(host: str) -> str:
    """``InetSocketAddress.toString`` of an address without a host name: ``/ip:port``."""
    return host if host.startswith("/") else "/" + host


def message_ext_string(msg: MessageExt, broker_name: str) -> str:
    """``MessageExt.toString`` of a pulled message (4.9.7): ``msgId=`` is the offset id, as
    the client decoder stores it; ``Message.toString`` inside."""
    txid = getattr(msg, "transaction_id", None) or "null"
    return (
        f"MessageExt [brokerName={broker_name}, queueId={msg.queue_id}, "
        f"storeSize={msg.store_size}, queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, "
        f"bornTimestamp={msg.born_timestamp}, bornHost={_socket_addr(msg.born_host)}, "
        f"storeTimestamp={msg.store_timestamp}, storeHost={_socket_addr(msg.store_host)}, "
        f"msgId={msg.offset_msg_id}, commitLogOffset={msg.commit_log_offset}, "
        f"bodyCRC={msg.body_crc}, reconsumeTimes={msg.reconsume_times}, "
        f"preparedTransactionOffset={msg.prepared_transaction_offset}, "
        f"toString()=Message{{topic='{msg.topic}', flag={msg.flag}, "
        f"properties={java_map_string(msg.properties)}, "
        f"body={_java_signed_bytes(bytes(msg.body))}, transactionId='{txid}'}}]")


def format_tag_counts(counts: dict[str, int]) -> str:
    """``printCalculateByTag``: most frequent first (ties in stock's ``HashMap`` order)."""
    ordered = sorted(java_hashmap_order(counts), key=lambda t: -counts[t])
    return "".join("Tag: %-30s Count: %s\n" % (t, counts[t]) for t in ordered)


def _true(text: str | None) -> bool:
    """``Boolean.parseBoolean``: true only for ``true`` (any case)."""
    return text is not None and text.strip().lower() == "true"


def _timestamp(text: str) -> int:
    """``PrintMessageByQueueCommand.timestampFormat``: epoch ms or yyyy-MM-dd#HH:mm:ss:SSS."""
    return parse_timestamp(text.strip())


@command("printMsgByQueue", "Print Message Detail",
         opt("-t", "--topic", required=True, help="topic name"),
         opt("-a", "--brokerName", required=True, help="broker name"),
         opt("-i", "--queueId", required=True, type=int, help="queue id"),
         opt("-c", "--charsetName", help="CharsetName(eg: UTF-8,GBK)"),
         opt("-s", "--subExpression", help="Subscribe Expression(eg: TagA || TagB)"),
         opt("-b", "--beginTimestamp",
             help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
         opt("-e", "--endTimestamp",
             help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
         opt("-p", "--printMsg", help="print msg. eg: true | false(default)"),
         opt("-d", "--printBody", help="print body. eg: true | false(default)"),
         opt("-f", "--calculate", help="calculate by tag. eg: true | false(default)"))
async def print_msg_by_queue(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``PrintMessageByQueueCommand``: pull one queue from its min (or ``-b``) to its max
    (or ``-e``) offset; ``-p true`` prints each message (``MSGID: <id> <MessageExt> BODY:``),
    ``-f true`` the count per tag."""
    charset = args.charsetName.strip() if args.charsetName else "utf-8"
    print_msgs, print_body, by_tag = _true(args.printMsg), _true(args.printBody), \
        _true(args.calculate)
    sub = args.subExpression.strip() if args.subExpression else "*"
    mq = MessageQueue(args.topic.strip(), args.brokerName.strip(), args.queueId)
    addr = await admin.broker_addr_of(mq.topic, mq.broker_name)
    low, high = await admin.queue_offsets(addr, mq)
    if args.beginTimestamp:
        low = await admin.search_offset(addr, mq, _timestamp(args.beginTimestamp))
    if args.endTimestamp:
        high = await admin.search_offset(addr, mq, _timestamp(args.endTimestamp))
    counts: dict[str, int] = {}
    msgs: list[MessageExt] = []
    lines: list[str] = []
    offset = low
    while offset < high:
        result = await admin.pull(addr, mq, offset, 32, sub_expression=sub)
        offset = result.next_begin_offset
        if result.status.name != "FOUND":
            break
        for m in result.msg_found_list:
            # PullAPIWrapper.processPullResult: the queue's offsets as properties.
            m.properties.setdefault("MIN_OFFSET", str(result.min_offset))
            m.properties.setdefault("MAX_OFFSET", str(result.max_offset))
            msgs.append(m)
            tag = m.properties.get("TAGS")
            if by_tag and tag and tag.strip():
                counts[tag] = counts.get(tag, 0) + 1
            if print_msgs:
                body = bytes(m.body).decode(charset, "replace") if print_body \
                    else "NOT PRINT BODY"
                lines.append(f"MSGID: {m.msg_id} {message_ext_string(m, mq.broker_name)} "
                             f"BODY: {body}\n")
    if by_tag:
        lines.append(format_tag_counts(counts))
    return Output({"messages": [message_json(m) for m in msgs] if print_msgs else len(msgs),
                   "tags": counts if by_tag else None}, "".join(lines))


def format_send_result(result: SendResult) -> str:
    """``SendResult.toString``."""
    mq = result.message_queue
    return (f"SendResult [sendStatus={result.status.name}, msgId={result.msg_id}, "
            f"offsetMsgId={result.offset_msg_id}, messageQueue=MessageQueue [topic={mq.topic}, "
            f"brokerName={mq.broker_name}, queueId={mq.queue_id}], "
            f"queueOffset={result.queue_offset}]")


def _hello_body(size: int) -> bytes:
    """``SendMsgStatusCommand.buildMessage``: "hello jodie" once per 11 bytes of ``size``."""
    return b"hello jodie" * len(range(0, size, 11))


@command("sendMsgStatus", "send msg to broker.",
         opt("-b", "--brokerName", required=True, help="Broker Name"),
         opt("-s", "--messageSize", type=int, default=128, help="Message Size, Default: 128"),
         opt("-c", "--count", type=int, default=50, help="send message count, Default: 50"))
async def send_msg_status(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``SendMsgStatusCommand``: to the topic named as the broker (which every broker
    serves), one 16-byte warm-up, then ``-c`` messages, each with its round trip."""
    topic = args.brokerName.strip()
    rows, lines = [], []
    async with started_producer(admin, "PID_SMSC") as producer:
        await producer.send(Message(topic, _hello_body(16)))
        for _ in range(args.count):
            begin = now_ms()
            result = await producer.send(Message(topic, _hello_body(args.messageSize)))
            rt = now_ms() - begin
            rows.append({"rtMs": rt, "sendStatus": result.status.name, "msgId": result.msg_id,
                         "queueId": result.message_queue.queue_id,
                         "queueOffset": result.queue_offset})
            lines.append(f"rt={rt}ms, SendResult={format_send_result(result)}\n")
    return Output(rows, "".join(lines))


@command("checkMsgSendRT", "check message send response time",
         opt("-t", "--topic", required=True, help="topic name"),
         opt("-a", "--amount", type=int, default=100, help="message amount | default 100"),
         opt("-s", "--size", type=int, default=128, help="message size | default 128 Byte"))
async def check_msg_send_rt(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``CheckMsgSendRTCommand``: ``-a`` sends, message ``i`` to queue ``i % n`` of the
    writable queues; a line each (``false`` and the time taken when a send failed), then
    the average round trip without the first send."""
    topic = args.topic.strip()
    fmt = "%-32s  %-4s  %-20s    %s\n"
    lines = [fmt % ("#Broker Name", "#QID", "#Send Result", "#RT")]
    rows = []
    elapsed = 0
    broker_name, queue_id = "", 0
    msg = Message(topic, b"a" * args.size)

    def select(mqs: list[MessageQueue], _msg: Message, arg: int) -> MessageQueue:
        nonlocal broker_name, queue_id
        mq = mqs[arg % len(mqs)]
        broker_name, queue_id = mq.broker_name, mq.queue_id
        return mq

    async with started_producer(admin, str(now_ms())) as producer:
        for i in range(args.amount):
            start = now_ms()
            try:
                await producer.send(msg, selector=select, arg=i)
                ok = True
            except EXPECTED:
                ok = False
            rt = now_ms() - start
            if i != 0:
                elapsed += rt
            rows.append({"brokerName": broker_name, "queueId": queue_id, "ok": ok, "rtMs": rt})
            lines.append(fmt % (broker_name, queue_id, java_bool(ok), rt))
    avg = elapsed / (args.amount - 1) if args.amount > 1 else float("nan")
    lines.append("Avg RT: %s\n" % ("NaN" if avg != avg else "%.2f" % avg))
    return Output({"sends": rows, "avgRtMs": avg}, "".join(lines))
