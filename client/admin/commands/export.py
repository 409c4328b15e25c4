"""Export commands (upstream ``tools/command/export``): exportMetadata, exportConfigs.

Both write fastjson's pretty form (``JSON.toJSONString(obj, true)``: tab indents, no space
after ``:``, a bean's fields in name order, a map in its Java ``HashMap`` order) to a file
under ``-f`` (default ``/tmp/rocketmq/export``) and print ``export <path> success``; as
upstream, the broker forms (``-b``) and exportConfigs end that line without a newline.
"""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from aiorocketmq.protocol import fastjson
from aiorocketmq.protocol.codes import MixAll, RequestCode
from aiorocketmq.protocol.javautil import java_hashmap_order, java_string_hash

from ..api import MQAdmin
from .base import Output, UsageError, command, now_ms, opt

DEFAULT_FILE_PATH = "/tmp/rocketmq/export"

def _bean(obj: dict[str, Any]) -> dict[str, Any]:
    """A Java bean as fastjson writes it: fields in name order."""
    return {k: obj[k] for k in sorted(obj)}


def _map(table: dict[str, Any], value: Any = _bean) -> dict[str, Any]:
    """A ``Map<String, bean>`` in Java ``HashMap`` order."""
    return {k: value(table[k]) for k in java_hashmap_order(table)}


def pretty_json(obj: Any) -> str:
    """``JSON.toJSONString(obj, true)``'s layout for already ordered dicts."""
    return json.dumps(obj, indent="\t", separators=(",", ":"), ensure_ascii=False)


def _write(path: str, text: str) -> None:
    """``MixAll.string2FileNotSafe``: the parent folders made, the file replaced."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


async def _json_body(admin: MQAdmin, addr: str, code: int) -> dict[str, Any]:
    response = await admin.invoke(addr, code, timeout=10.0)
    body = fastjson.loads(response.body) if response.body else {}
    return body if isinstance(body, dict) else {}


async def user_topic_config(admin: MQAdmin, addr: str, special: bool) -> dict[str, Any]:
    """The broker's GET_ALL_TOPIC_CONFIG wrapper as it sent it, its table cut to
    ``MQAdmin.user_topic_configs`` (upstream ``getUserTopicConfig``)."""
    wrapper = await _json_body(admin, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    keep = await admin.user_topic_configs(addr, special_topic=special)
    wrapper["topicConfigTable"] = {t: c for t, c in (wrapper.get("topicConfigTable") or {}).items()
                                   if t in keep}
    return wrapper


async def user_subscription_groups(admin: MQAdmin, addr: str) -> dict[str, Any]:
    """The broker's GET_ALL_SUBSCRIPTIONGROUP_CONFIG wrapper as it sent it, its table cut to
    ``MQAdmin.user_subscription_groups`` (upstream ``getUserSubscriptionGroup``)."""
    wrapper = await _json_body(admin, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    keep = await admin.user_subscription_groups(addr)
    wrapper["subscriptionGroupTable"] = {
        g: c for g, c in (wrapper.get("subscriptionGroupTable") or {}).items() if g in keep}
    return wrapper


def _wrapper_json(wrapper: dict[str, Any], table_key: str) -> dict[str, Any]:
    out = {k: wrapper[k] for k in sorted(wrapper)}
    if isinstance(out.get("dataVersion"), dict):
        out["dataVersion"] = _bean(out["dataVersion"])
    out[table_key] = _map(wrapper.get(table_key) or {})
    return out


@command("exportMetadata", "export metadata",
         opt("-c", "--clusterName", help="choose a cluster to export"),
         opt("-b", "--brokerAddr", help="choose a broker to export"),
         opt("-f", "--filePath", help="export metadata.json path | default /tmp/rocketmq/export"),
         opt("-t", "--topic", action="store_true", help="only export topic metadata"),
         opt("-g", "--subscriptionGroup", action="store_true",
             help="only export subscriptionGroup metadata"),
         opt("-s", "--specialTopic", action="store_true", help="need retryTopic and dlqTopic"))
async def export_metadata(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``ExportMetadataCommand``. ``-b`` with ``-t`` (or ``-g``): that broker's user topics
    (or groups) as the broker's wrapper; ``-c``: the masters' merged (queue numbers and
    retry queue numbers summed over brokers) with ``exportTime``; ``-b`` alone does nothing,
    as upstream."""
    base = args.filePath.strip() if args.filePath else DEFAULT_FILE_PATH
    special = bool(args.specialTopic)
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        if args.topic:
            path = base + "/topic.json"
            wrapper = await user_topic_config(admin, addr, special)
            _write(path, pretty_json(_wrapper_json(wrapper, "topicConfigTable")))
        elif args.subscriptionGroup:
            path = base + "/subscriptionGroup.json"
            wrapper = await user_subscription_groups(admin, addr)
            _write(path, pretty_json(_wrapper_json(wrapper, "subscriptionGroupTable")))
        else:
            return Output({"path": None}, "")
        return Output({"path": path}, "export %s success" % path)
    if not args.clusterName:
        raise UsageError("either -b brokerAddr or -c clusterName is required")
    topics: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for broker in await admin.brokers(args.clusterName.strip(), masters_only=True):
        wrapper = await user_topic_config(admin, broker.addr, special)
        for name, tc in wrapper["topicConfigTable"].items():
            seen = topics.get(name)
            if seen is not None:
                tc["writeQueueNums"] = seen.get("writeQueueNums", 0) + tc.get("writeQueueNums", 0)
                tc["readQueueNums"] = seen.get("readQueueNums", 0) + tc.get("readQueueNums", 0)
            topics[name] = tc
        sub_wrapper = await user_subscription_groups(admin, broker.addr)
        for name, cfg in sub_wrapper["subscriptionGroupTable"].items():
            seen = groups.get(name)
            if seen is not None:
                cfg["retryQueueNums"] = seen.get("retryQueueNums", 0) + cfg.get("retryQueueNums", 0)
            groups[name] = cfg
    result: dict[str, Any] = {}
    if args.topic:
        result["topicConfigTable"] = _map(topics)
        path = base + "/topic.json"
    elif args.subscriptionGroup:
        result["subscriptionGroupTable"] = _map(groups)
        path = base + "/subscriptionGroup.json"
    else:
        result["topicConfigTable"] = _map(topics)
        result["subscriptionGroupTable"] = _map(groups)
        path = base + "/metadata.json"
    result["exportTime"] = now_ms()
    _write(path, pretty_json({k: result[k] for k in java_hashmap_order(result)}))
    return Output({"path": path}, "export %s success\n" % path)


def java_properties_order(keys: list[str]) -> list[str]:
    """The order a ``new Properties()`` (Java 9+: a ``ConcurrentHashMap(8)``) filled in this
    order iterates ``keys``: 16 bins, doubled when the count reaches 3/4 of them; a resize
    moves each bin's nodes before its last same-side run to the front, reversed
    (``ConcurrentHashMap.transfer``)."""
    n = 16
    bins: list[list[int]] = [[] for _ in range(n)]

    def spread(k: str) -> int:
        h = java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 0x7FFFFFFF

    hashes = [spread(k) for k in keys]
    for idx, h in enumerate(hashes):
        bins[h & (n - 1)].append(idx)
        if idx + 1 >= n - (n >> 2):
            grown: list[list[int]] = [[] for _ in range(2 * n)]
            for i, chain in enumerate(bins):
                if not chain:
                    continue
                side = [hashes[j] & n for j in chain]
                last = len(chain) - 1
                while last > 0 and side[last - 1] == side[-1]:
                    last -= 1
                low = chain[last:] if side[-1] == 0 else []
                high = chain[last:] if side[-1] != 0 else []
                for j, sd in zip(chain[:last], side[:last], strict=True):
                    if sd == 0:
                        low.insert(0, j)
                    else:
                        high.insert(0, j)
                grown[i], grown[i + n] = low, high
            bins, n = grown, 2 * n
    return [keys[j] for chain in bins for j in chain]


# ExportConfigsCommand.needBrokerProprties: the broker keys exported, in its order.
EXPORTED_BROKER_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
    "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
    "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
    "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)


@command("exportConfigs", "export configs",
         opt("-c", "--clusterName", required=True, help="choose a cluster to export"),
         opt("-f", "--filePath", help="export configs.json path | default /tmp/rocketmq/export"))
async def export_configs(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``ExportConfigsCommand``: each master's chosen broker keys by broker name, and the
    cluster's scale (nameservers, masters, slaves), in ``<-f>/configs.json``."""
    base = args.filePath.strip() if args.filePath else DEFAULT_FILE_PATH
    brokers = await admin.brokers(args.clusterName.strip())
    masters = [b for b in brokers if b.broker_id == MixAll.MASTER_ID]
    slaves = [b for b in brokers
              if b.broker_id != MixAll.MASTER_ID and b.broker_name in
              {m.broker_name for m in masters}]
    configs: dict[str, dict[str, str]] = {}
    for m in masters:
        props, _ = await admin.broker_config(m.addr)
        # Not upstream: a key the broker does not report is left out (stock's
        # Properties.setProperty(key, null) throws, and the command fails).
        chosen = {k: props[k] for k in EXPORTED_BROKER_KEYS if k in props}
        configs[props["brokerName"]] = {k: chosen[k] for k in java_properties_order(list(chosen))}
    scale = {"namesrvSize": len(admin.namesrv_addrs), "masterBrokerSize": len(masters),
             "slaveBrokerSize": len(slaves)}
    result = {"brokerConfigs": _map(configs, dict),
              "clusterScale": {k: scale[k] for k in java_hashmap_order(scale)}}
    path = base + "/configs.json"
    _write(path, pretty_json({k: result[k] for k in java_hashmap_order(result)}))
    return Output({"path": path, **result}, "export %s success" % path)
