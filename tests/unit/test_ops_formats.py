"""Formats the operations commands depend on, checked against what stock 4.9.7 produced:
the order of a broker's ConcurrentHashMap of groups (GET_BROKER_CONSUME_STATS), fastjson's
pretty form (queryCq's subscription), ConsumeQueueData's toString and its JSON body."""

from __future__ import annotations

from aiorocketmq.protocol.bodies import (
    ConsumeQueueData,
    QueryConsumeQueueResponseBody,
    build_subscription_data,
)
from aiorocketmq.protocol.fastjson import dumps_pretty
from aiorocketmq.protocol.javautil import java_concurrent_hashmap_order


def test_subscription_group_table_order() -> None:
    # a stock 4.9.7 broker's GET_BROKER_CONSUME_STATS body listed its default groups so
    groups = ["TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
              "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER"]
    assert java_concurrent_hashmap_order(groups, 1024) == [
        "SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER", "CID_ONSAPI_PERMISSION", "TOOLS_CONSUMER",
        "CID_ONS-HTTP-PROXY", "FILTERSRV_CONSUMER", "CID_ONSAPI_PULL"]


def test_pretty_subscription_as_stock_tool_prints_it() -> None:
    sub = build_subscription_data("OpsT", "TagA || TagB")
    sub.sub_version = 1795695421620
    assert dumps_pretty(sub) == (
        '{\n\t"classFilterMode":false,\n\t"codeSet":[2598919,2598920],\n'
        '\t"expressionType":"TAG",\n\t"subString":"TagA || TagB",\n'
        '\t"subVersion":1795695421620,\n\t"tagsSet":["TagA","TagB"],\n\t"topic":"OpsT"\n}')
    assert dumps_pretty({"a": {"b": 1}}) == '{\n\t"a":{\n\t\t"b":1\n\t}\n}'


def test_consume_queue_data() -> None:
    unit = ConsumeQueueData(855, 171, 2598919)
    assert str(unit) == ("ConsumeQueueData{physicOffset=855, physicSize=171, tagsCode=2598919, "
                         "extendDataJson='null', bitMap='null', eval=false, msg='null'}")
    body = QueryConsumeQueueResponseBody(filter_data="G@T is not online!", queue_data=[unit],
                                         max_queue_index=2)
    # as a stock broker wrote it (fields sorted, nulls left out)
    assert body.encode() == (b'{"filterData":"G@T is not online!","maxQueueIndex":2,'
                             b'"minQueueIndex":0,"queueData":[{"eval":false,"physicOffset":855,'
                             b'"physicSize":171,"tagsCode":2598919}]}')
    assert QueryConsumeQueueResponseBody.decode(body.encode()) == body
