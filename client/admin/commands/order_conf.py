"""The ordered-topic configuration (upstream ``tools/command/topic/UpdateOrderConfCommand``):
updateOrderConf, the nameserver's ``ORDER_TOPIC_CONFIG`` entry of a topic."""

from __future__ import annotations

import argparse

from aiorocketmq.protocol.codes import MixAll, RequestCode
from aiorocketmq.protocol.headers import GetKVConfigRequestHeader, GetKVConfigResponseHeader

from ..api import MQAdmin
from .base import Output, UsageError, command, opt

_NS = MixAll.ORDER_TOPIC_CONFIG_NAMESPACE


@command("updateOrderConf", "Create or update or delete order conf",
         opt("-t", "--topic", required=True, help="topic name"),
         opt("-v", "--orderConf", help="set order conf [eg. brokerName1:num;brokerName2:num]"),
         opt("-m", "--method", required=True, help="option type [eg. put|get|delete"))
async def update_order_conf(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``put`` writes ``-v`` on every nameserver, ``get`` reads it (a missing entry fails with
    the nameserver's remark), ``delete`` removes it; the lines end without a newline, as
    upstream's."""
    topic, method = args.topic.strip(), args.method.strip()
    if method == "get":
        response = await admin.invoke_namesrv(RequestCode.GET_KV_CONFIG,
                                              GetKVConfigRequestHeader(namespace=_NS, key=topic))
        value = GetKVConfigResponseHeader.from_ext_fields(response.ext_fields or {}).value
        return Output({"topic": topic, "orderConf": value},
                      f"get orderConf success. topic=[{topic}], orderConf=[{value}] ")
    if method == "put":
        conf = (args.orderConf or "").strip()
        if not conf:
            raise UsageError("please set orderConf with option -v.")
        await admin.update_order_conf(topic, conf, is_cluster=True)
        return Output({"topic": topic, "orderConf": conf},
                      f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
    if method == "delete":
        await admin.delete_kv_config(_NS, topic)
        return Output({"topic": topic}, f"delete orderConf success. topic=[{topic}]")
    raise UsageError(f"-m must be put, get or delete, not '{method}'")
