"""startMonitoring (upstream ``tools/command/consumer/StartMonitoringSubCommand``, which runs
``tools/monitor/MonitorService`` with its ``DefaultMonitorListener``).

Every round (the first 20 s after the start, then every 60 s, as ``MonitorConfig``), for each
group that has a ``%RETRY%<group>`` topic and an online consumer:

* ``reportUndoneMsgs`` per topic of the group: its lag in total and on its worst queue, and
  the longest time between the last message consumed and the newest one stored;
* the consumers' running info, compared (``ConsumerRunningInfo.analyzeSubscription``: a push
  group running for over two minutes whose clients subscribe differently) and checked per
  client (``analyzeProcessQueue``: queues that could not be locked or did not consume for a
  minute with messages waiting).

Meanwhile a push consumer of ``__MONITOR_CONSUMER`` on ``OFFSET_MOVED_EVENT`` reports every
offset a broker corrected (``reportDeleteMsgsEvent``). Upstream writes these lines to the
client log; here they go to stdout as they happen, with the same text. Upstream runs until
killed; ``--rounds``, ``--delay`` and ``--interval`` (ours) bound and pace it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Any

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.bodies import ConsumerRunningInfo, ConsumeStats, MessageQueue
from aiorocketmq.protocol.codes import MixAll, MQVersion, SystemTopic
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.javautil import java_hashmap_order
from aiorocketmq.protocol.message import MessageExt

from ..api import MQAdmin
from .base import Output, UsageError, command, opt

_PREFIX = "[MONITOR] "
_NOTIFY = _PREFIX + " [NOTIFY] "
_MIN_RUNNING_INFO_VERSION = MQVersion.V3_1_8_SNAPSHOT


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _mq_text(mq: Mapping[str, Any] | MessageQueue) -> str:
    """``MessageQueue.toString``."""
    if isinstance(mq, MessageQueue):
        return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"
    return (f"MessageQueue [topic={mq.get('topic')}, brokerName={mq.get('brokerName')}, "
            f"queueId={mq.get('queueId')}]")


def delete_msgs_event_text(msg: MessageExt) -> str:
    """``DeleteMsgsEvent.toString`` of an OFFSET_MOVED_EVENT message."""
    ev = fastjson.loads(msg.body or b"{}")
    ome = (f"OffsetMovedEvent [consumerGroup={ev.get('consumerGroup')}, "
           f"messageQueue={_mq_text(ev.get('messageQueue') or {})}, "
           f"offsetRequest={ev.get('offsetRequest')}, offsetNew={ev.get('offsetNew')}]")
    return f"DeleteMsgsEvent [offsetMovedEvent={ome}, eventTimestamp={msg.store_timestamp}]"


def subscriptions_differ(infos: Mapping[str, ConsumerRunningInfo], now_ms: int) -> bool:
    """``not ConsumerRunningInfo.analyzeSubscription(criTable)`` (clients in id order)."""
    first = infos[min(infos)]
    push = first.properties.get(ConsumerRunningInfo.PROP_CONSUME_TYPE) == "CONSUME_PASSIVELY"
    started = int(first.properties.get(ConsumerRunningInfo.PROP_CONSUMER_START_TIMESTAMP) or 0)
    if not (push and now_ms - started > 2 * 60 * 1000):
        return False

    def subs(info: ConsumerRunningInfo) -> list[str]:  # SubscriptionData.equals: every field
        return sorted(fastjson.dumps(s.to_json()).decode() for s in info.subscription_set)

    prev = first
    for cid in sorted(infos):
        if subs(infos[cid]) != subs(prev):
            return True
        prev = infos[cid]
    return not prev.subscription_set


def process_queue_problems(client_id: str, info: ConsumerRunningInfo, now_ms: int) -> str:
    """``ConsumerRunningInfo.analyzeProcessQueue``: one line per troubled queue."""
    if info.properties.get(ConsumerRunningInfo.PROP_CONSUME_TYPE) != "CONSUME_PASSIVELY":
        return ""
    orderly = (info.properties.get(ConsumerRunningInfo.PROP_CONSUME_ORDERLY) or "").lower() == "true"
    out = []
    for mq, pq in info.mq_table.items():
        if orderly:
            if not pq.locked:
                out.append(f"{client_id} {_mq_text(mq)} can't lock for a while, "
                           f"{now_ms - pq.last_lock_timestamp}ms\n")
            elif pq.dropped and pq.try_unlock_times > 0:
                out.append(f"{client_id} {_mq_text(mq)} unlock {pq.try_unlock_times} times, "
                           f"still failed\n")
        else:
            diff = now_ms - pq.last_consume_timestamp
            if diff > 60 * 1000 and pq.cached_msg_count > 0:
                out.append(f"{client_id} {_mq_text(mq)} can't consume for a while, maybe "
                           f"blocked, {diff}ms\n")
    return "".join(out)


async def _undone(admin: MQAdmin, group: str, topic: str, stats: ConsumeStats) -> str:
    """``UndoneMsgs.toString`` after ``computeUndoneMsgs``."""
    total = single_max = delay_max = 0
    for mq, w in stats.offset_table.items():
        diff = w.broker_offset - w.consumer_offset
        single_max = max(single_max, diff)
        if diff > 0:
            total += diff
        if w.last_timestamp > 0:
            try:
                addr = await admin.broker_addr_of(mq.topic, mq.broker_name)
                _low, high = await admin.queue_offsets(addr, mq)
                if high > 0:
                    pulled = await admin.pull(addr, mq, high - 1, 1)
                    if pulled.msg_found_list:
                        delay_max = max(delay_max,
                                        pulled.msg_found_list[0].store_timestamp - w.last_timestamp)
            except RocketMQError:
                pass
    return (f"UndoneMsgs [consumerGroup={group}, topic={topic}, undoneMsgsTotal={total}, "
            f"undoneMsgsSingleMQ={single_max}, undoneMsgsDelayTimeMills={delay_max}]")


async def _report_undone(admin: MQAdmin, group: str) -> list[str]:
    try:
        stats = await admin.consume_stats(group)
        await admin.consumer_connection(group)
    except RocketMQError:
        return []
    by_topic: dict[str, ConsumeStats] = {}
    for mq, w in stats.offset_table.items():
        by_topic.setdefault(mq.topic, ConsumeStats()).offset_table[mq] = w
    return [await _undone(admin, group, topic, by_topic[topic])
            for topic in java_hashmap_order(by_topic)]


async def _report_running_info(admin: MQAdmin, group: str) -> list[str]:
    try:
        conn = await admin.consumer_connection(group)
    except RocketMQError:
        return []
    infos: dict[str, ConsumerRunningInfo] = {}
    for c in conn.connection_set:
        if c.version < _MIN_RUNNING_INFO_VERSION:
            continue
        try:
            infos[c.client_id] = await admin.consumer_running_info(group, c.client_id)
        except RocketMQError:
            continue
    if not infos:
        return []
    lines = []
    now = _now_ms()
    name = infos[min(infos)].properties.get("consumerGroup")
    if subscriptions_differ(infos, now):
        lines.append(f"{_NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {name}, "
                     f"Subscription different")
    for cid in sorted(infos):
        problems = process_queue_problems(cid, infos[cid], now)
        if problems:
            lines.append(f"{_NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {name}, "
                         f"ClientId: {cid}, {problems}")
    return lines


async def monitor_round(admin: MQAdmin) -> list[str]:
    """One ``doMonitorWork``: its lines, beginRound to endRound."""
    lines = [_PREFIX + "=========================================beginRound"]
    for topic in await admin.topic_list():
        if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(MixAll.RETRY_GROUP_TOPIC_PREFIX):]
            lines.extend(f"{_PREFIX}reportUndoneMsgs: {u}" for u in await _report_undone(admin, group))
            lines.extend(await _report_running_info(admin, group))
    lines.append(_PREFIX + "=========================================endRound")
    return lines


def _ms(text: str | None, default: int, name: str) -> int:
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name}: not a number: '{text}'") from None
    if value < 0:
        raise UsageError(f"{name} may not be negative")
    return value


@command("startMonitoring", "Start Monitoring",
         opt("--rounds", help="stop after this many rounds (default: run until killed)"),
         opt("--delay", help="milliseconds before the first round (default 20000)"),
         opt("--interval", help="milliseconds between rounds (default 60000)"))
async def start_monitoring(admin: MQAdmin, args: argparse.Namespace) -> Output:
    rounds = _ms(args.rounds, 0, "--rounds")
    delay = _ms(args.delay, 20_000, "--delay")
    interval = _ms(args.interval, 60_000, "--interval")

    def on_moved(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        try:
            _say(f"{_PREFIX}reportDeleteMsgsEvent: {delete_msgs_event_text(msgs[0])}")
        except (ValueError, RocketMQError):
            pass
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(MixAll.MONITOR_CONSUMER_GROUP, config=ClientConfig(
        namesrv_addr=";".join(admin.namesrv_addrs)), consume_thread_max=1)
    consumer.subscribe(SystemTopic.OFFSET_MOVED_EVENT, "*")
    consumer.register_message_listener(on_moved)
    await consumer.start()
    done = 0
    try:
        await asyncio.sleep(delay / 1000)
        while True:
            for line in await monitor_round(admin):
                _say(line)
            done += 1
            if rounds and done >= rounds:
                break
            await asyncio.sleep(interval / 1000)
    finally:
        await consumer.shutdown()
    return Output({"rounds": done}, "")
