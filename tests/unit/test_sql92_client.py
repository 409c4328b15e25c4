"""Client-side SQL92 plumbing without sockets: MessageSelector -> SubscriptionData, the broker
version gate, and the Spark source's expressionType option."""

from __future__ import annotations

import pytest

from aiorocketmq.client import MessageSelector
from aiorocketmq.client.selector import check_broker_version, subscription_data
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.spark_sink.options import parse_source_options


def test_selectors_build_subscription_data() -> None:
    sd = subscription_data("T", MessageSelector.by_sql("a > 1"))
    assert (sd.sub_string, sd.expression_type, sd.tags_set, sd.code_set) == ("a > 1", "SQL92", [], [])
    tag = subscription_data("T", MessageSelector.by_tag("A || B"))
    assert (tag.expression_type, tag.tags_set) == ("TAG", ["A", "B"])
    assert subscription_data("T", "A").tags_set == ["A"]
    assert subscription_data("T", None).sub_string == "*"
    assert subscription_data("T", MessageSelector.by_tag(None)).sub_string == "*"


def test_invalid_selectors() -> None:
    with pytest.raises(MQClientError, match="Expression can't be null! SQL92"):
        subscription_data("T", MessageSelector.by_sql(""))
    with pytest.raises(MQClientError, match="ParseException"):
        subscription_data("T", MessageSelector.by_sql("a ="))


def test_broker_version_gate() -> None:
    sd = subscription_data("T", MessageSelector.by_sql("a > 1"))
    check_broker_version(sd, "b", 409)
    check_broker_version(sd, "b", 0)  # unknown yet: let through
    with pytest.raises(MQClientError, match=r"The broker\[b, 231\] does not upgrade"):
        check_broker_version(sd, "b", 231)
    check_broker_version(subscription_data("T", "*"), "b", 100)


def test_spark_expression_type_option() -> None:
    base = {"nameServer": "127.0.0.1:9876", "topic": "T"}
    opts = parse_source_options({**base, "subExpression": "a > 1", "expressionType": "sql92"},
                                streaming=True)
    assert (opts.expression_type, opts.sub_expression) == ("SQL92", "a > 1")
    assert parse_source_options(base, streaming=True).expression_type == "TAG"
    with pytest.raises(MQClientError, match="must be 'TAG' or 'SQL92'"):
        parse_source_options({**base, "expressionType": "XPATH"}, streaming=True)
    with pytest.raises(MQClientError, match="needs the option subExpression"):
        parse_source_options({**base, "expressionType": "SQL92"}, streaming=True)
    with pytest.raises(MQClientError, match="not a valid SQL92 selector"):
        parse_source_options({**base, "expressionType": "SQL92", "subExpression": "a >"},
                             streaming=True)
