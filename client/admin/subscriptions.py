"""Whether the clients of one consumer group subscribe alike (mqadmin and mqdashboard).

Clients of one group that subscribe to different topics or tags are the most common cause
of "lost messages" reports: the broker keeps one merged subscription table per group, and
rebalancing hands each client queues of topics it may not subscribe to, so their messages
are filtered away. The broker cannot tell (its connection list keeps the merged table), so
each online client is asked for its own subscriptions with GET_CONSUMER_RUNNING_INFO (307),
as upstream's ``consumerStatus`` does, and the answers are compared.

* ``client_subscriptions(admin, group, conn)``: per client, its subscriptions (the group's
  own ``%RETRY%`` topic left out: every push consumer has it) or the error of its answer;
* ``subscription_issues(clients)``: per topic not every client subscribes to the same way,
  which clients lack it and which subscribe with each expression;
* ``issue_lines(group, issues)``: the same as warning lines for people.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from aiorocketmq.protocol.bodies import ConsumerConnection, ConsumerRunningInfo
from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.errors import MQBrokerError

from .api import MQAdmin

__all__ = ["client_subscriptions", "subscription_issues", "issue_lines", "describe_answer_error"]


def describe_answer_error(exc: BaseException) -> str:
    """A failed answer in one line (``CODE: n DESC: remark`` for a broker's refusal)."""
    if isinstance(exc, MQBrokerError):
        return f"CODE: {exc.code} DESC: {exc.remark}"
    return f"{type(exc).__name__}: {exc}"


async def client_subscriptions(admin: MQAdmin, group: str, conn: ConsumerConnection, *,
                               limit: asyncio.Semaphore | None = None,
                               describe: Callable[[BaseException], str] = describe_answer_error,
                               ) -> list[dict[str, Any]]:
    """What each online client of ``group`` subscribes to, from its own running info, in
    client-id order: ``{"client_id", "error", "subscriptions": [{"topic", "expression",
    "expression_type"}] | None}``. ``limit`` bounds the calls in flight."""
    clients = sorted({c.client_id for c in conn.connection_set if c.client_id})

    async def one(client_id: str) -> ConsumerRunningInfo:
        async with limit if limit is not None else contextlib.nullcontext():
            return await admin.consumer_running_info(group, client_id)

    infos = await asyncio.gather(*(one(c) for c in clients), return_exceptions=True)
    out: list[dict[str, Any]] = []
    for client_id, info in zip(clients, infos, strict=True):
        if isinstance(info, ConsumerRunningInfo):
            subs = sorted({(s.topic, s.sub_string or "*", s.expression_type or "TAG")
                           for s in info.subscription_set
                           if not s.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)})
            out.append({"client_id": client_id, "error": None, "subscriptions": [
                {"topic": t, "expression": e, "expression_type": x} for t, e, x in subs]})
        elif isinstance(info, BaseException):
            if not isinstance(info, Exception):
                raise info
            out.append({"client_id": client_id, "error": describe(info), "subscriptions": None})
    return out


def _subscription_key(sub: dict[str, Any]) -> str:
    expr = sub["expression"] or "*"
    kind = sub.get("expression_type") or "TAG"
    return expr if kind == "TAG" else f"{kind}: {expr}"


def subscription_issues(clients: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the clients of one group disagree: per topic, the clients that do not subscribe
    to it (``missing``) and the clients per expression (``by_expression``), for each topic
    that not every client subscribes to the same way. ``clients`` are rows of
    ``client_subscriptions`` (a client whose answer failed is left out)."""
    known = [c for c in clients if c.get("subscriptions") is not None]
    if len(known) < 2:
        return []
    topics = sorted({s["topic"] for c in known for s in c["subscriptions"]})
    issues = []
    for topic in topics:
        by_expression: dict[str, list[str]] = {}
        missing = []
        for c in known:
            subs = [s for s in c["subscriptions"] if s["topic"] == topic]
            if not subs:
                missing.append(c["client_id"])
            for s in subs:
                by_expression.setdefault(_subscription_key(s), []).append(c["client_id"])
        if missing or len(by_expression) > 1:
            issues.append({"topic": topic, "missing": missing,
                           "by_expression": dict(sorted(by_expression.items()))})
    return issues


def issue_lines(group: str, issues: list[dict[str, Any]]) -> list[str]:
    """``subscription_issues`` as warning lines, one per topic."""
    lines = []
    for issue in issues:
        parts = [f"{expr!r} by {', '.join(ids)}" for expr, ids in issue["by_expression"].items()]
        if issue["missing"]:
            parts.append(f"not subscribed by {', '.join(issue['missing'])}")
        lines.append(f"WARNING: the clients of group {group} subscribe to {issue['topic']} "
                     f"differently: {'; '.join(parts)} (clients of one group must subscribe "
                     "alike, or some of the topic's messages are never consumed)")
    return lines
