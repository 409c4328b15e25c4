"""Formatting shared by the ``mqadmin`` commands: upstream's date formats, Java ``toString``s,
property tables, and one readable line for a failure.

Pure functions (no sockets), so ``tests/unit/test_mqadmin_format.py`` tests them directly.
A table only one command prints stays beside that command in its family module.
"""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from aiorocketmq.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from aiorocketmq.protocol.codes import Perm, ResponseCode
from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.protocol.javautil import java_hashmap_order, java_string_hash

from .base import UsageError

__all__ = [
    "describe_error",
    "format_date",
    "format_human_ms",
    "format_properties",
    "format_subscription_group_config",
    "format_topic_config",
    "front",
    "java_bool",
    "java_hash_order",
    "java_int",
    "java_list",
    "java_map_string",
    "parse_timestamp",
    "perm_to_string",
    "queue_hash",
]

T = TypeVar("T")


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


def front(s: str, width: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``width`` characters."""
    return s[:width]


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: ``RWX`` with ``-`` for each missing bit."""
    return "".join(c if perm & bit else "-" for c, bit in (("R", Perm.READ), ("W", Perm.WRITE),
                                                            ("X", Perm.INHERIT)))


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def java_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(values) + "]"


def format_topic_config(tc: TopicConfig) -> str:
    """``TopicConfig.toString``."""
    return (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={perm_to_string(tc.perm)}, "
            f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
            f"order={java_bool(tc.order)}]")


def format_subscription_group_config(cfg: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString``."""
    return (f"SubscriptionGroupConfig [groupName={cfg.group_name}, "
            f"consumeEnable={java_bool(cfg.consume_enable)}, "
            f"consumeFromMinEnable={java_bool(cfg.consume_from_min_enable)}, "
            f"consumeBroadcastEnable={java_bool(cfg.consume_broadcast_enable)}, "
            f"retryQueueNums={cfg.retry_queue_nums}, retryMaxTimes={cfg.retry_max_times}, "
            f"brokerId={cfg.broker_id}, "
            f"whichBrokerWhenConsumeSlowly={cfg.which_broker_when_consume_slowly}, "
            f"notifyConsumerIdsChangedEnable={java_bool(cfg.notify_consumer_ids_changed_enable)}]")


def java_map_string(props: Mapping[str, str]) -> str:
    """``AbstractMap.toString`` of a ``HashMap``: ``{k=v, k2=v2}`` in its iteration order."""
    return "{" + ", ".join(f"{k}={props[k]}" for k in java_hashmap_order(props)) + "}"


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


def java_int(value: int) -> int:
    """``value`` wrapped to a Java ``int`` (32-bit two's complement)."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value >= 0x80000000 else value


def java_hash_order(items: Sequence[T], hash_of: Callable[[T], int]) -> list[T]:
    """``items`` in the order a ``java.util.HashSet`` / ``HashMap`` filled in this order
    iterates them, given each one's ``hashCode()`` (as ``java_hashmap_order`` for strings)."""
    n = len(items)
    capacity = 16
    while n > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1

    def bucket(item: T) -> int:
        h = hash_of(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return [item for _, _, item in sorted((bucket(it), i, it) for i, it in enumerate(items))]


def queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """``MessageQueue.hashCode``."""
    h = 31 + java_string_hash(broker_name)
    h = 31 * h + queue_id
    return java_int(31 * h + java_string_hash(topic))
