"""How a consumer selects messages of a topic (upstream ``MessageSelector``, ``FilterAPI.build``).

``MessageSelector.by_tag("A || B")`` selects by tags (the broker filters by tag hash code and
the client again by tag); ``MessageSelector.by_sql("a > 5 AND TAGS IN ('A')")`` by an SQL92
expression over the message's properties (``TAGS`` included), evaluated by the broker, which
must run with ``enablePropertyFilter=true``: a consumer's ``start()`` asks every broker of its
SQL92 topics (CHECK_CLIENT_CONFIG) and fails with the broker's answer otherwise. A plain
string where a selector is accepted means a TAG expression, as before.

``subscription_data(topic, selector)`` builds the ``SubscriptionData`` a heartbeat and a pull
carry; an SQL92 expression is checked by our own parser first (``protocol.filter``), so a
typo fails in ``subscribe()`` with the parser's message rather than at the broker.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiorocketmq.protocol.bodies import SubscriptionData, build_subscription_data
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.filter import ExpressionType, FilterError, compile_sql92

__all__ = ["MessageSelector", "Selector", "subscription_data", "check_broker_version",
           "SQL92_MIN_BROKER_VERSION"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """An expression and its type (``TAG`` or ``SQL92``)."""

    expression_type: str
    expression: str | None

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """Select by an SQL92 expression over the message properties."""
        return cls(ExpressionType.SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None) -> MessageSelector:
        """Select by tags: ``"A || B"``, or ``"*"`` / ``None`` for every message."""
        return cls(ExpressionType.TAG, tag)


Selector = MessageSelector | str | None


def subscription_data(topic: str, selector: Selector) -> SubscriptionData:
    """``FilterAPI.build(topic, expression, type)`` for a selector or a TAG string.

    Raises:
        MQClientError: an empty SQL92 expression, or one that does not compile.
    """
    if not isinstance(selector, MessageSelector):
        return build_subscription_data(topic, selector)
    if ExpressionType.is_tag_type(selector.expression_type):
        return build_subscription_data(topic, selector.expression)
    try:
        sd = build_subscription_data(topic, selector.expression, selector.expression_type)
    except ValueError as exc:
        raise MQClientError(f"subscription exception: {exc}") from exc
    if selector.expression_type == ExpressionType.SQL92:
        try:
            compile_sql92(selector.expression or "")
        except FilterError as exc:
            raise MQClientError(f"subscription exception: invalid SQL92 expression "
                                f"{selector.expression!r}: {exc.remark}") from exc
    return sd


SQL92_MIN_BROKER_VERSION = 232  # MQVersion.Version.V4_1_0_SNAPSHOT


def check_broker_version(sd: SubscriptionData, broker_name: str, broker_version: int) -> None:
    """``PullAPIWrapper.pullKernelImpl``: a broker older than 4.1.0 cannot filter by SQL92.

    A version of 0 (no heartbeat answered yet) is let through, where upstream would refuse.

    Raises:
        MQClientError: a non-TAG subscription and a broker too old for it.
    """
    if (0 < broker_version < SQL92_MIN_BROKER_VERSION
            and not ExpressionType.is_tag_type(sd.expression_type)):
        raise MQClientError(f"The broker[{broker_name}, {broker_version}] does not upgrade to "
                            f"support for filter message by {sd.expression_type}")
