"""The dashboard's JSON API under ``/api/...`` (aiohttp handlers), and its error table.

=======  ====================================  =============================================
method   path                                  what
=======  ====================================  =============================================
GET      /api/session                          who am I, login required?, CSRF token
POST     /api/login, /api/logout               ``{"username", "password"}``
GET      /api/cluster                          brokers per cluster (``DashboardService.cluster``)
GET      /api/topics?q=&kinds=normal,retry     topic list with search, paged: ``page`` (from 1),
         &page=&size=                          ``size`` (100, at most 500); the answer has
                                               ``total``, ``pages``
POST     /api/topics                           create or update (``topic``, ``cluster`` or
                                               ``broker_addr``, queue nums, ``perm``, ``order``)
GET      /api/topics/{topic}                   route, per-queue offsets, consuming groups
DELETE   /api/topics/{topic}                   ``{"confirm": "<topic>"}``
POST     /api/topics/{topic}/messages          send a test message ``{"body", "tags", "keys"}``
GET      /api/groups?q=&system=false           one page of groups (``size`` 50) with members,
         &page=&size=                          lag, consume TPS, ``subscription_consistent``
GET      /api/groups/{group}                   members, subscriptions, per-queue lag
POST     /api/groups                           create or update a subscription group
                                               (``group``, ``cluster`` or ``broker_addr``,
                                               ``config``: SubscriptionGroupConfig fields)
DELETE   /api/groups/{group}                   ``{"confirm": "<group>", "remove_offset"}``
GET      /api/groups/{group}/config            its subscription group config per master
GET      /api/groups/{group}/clients/{id}      a client's running info (307)
GET      /api/brokers/{addr}/config            a broker's configuration (26)
POST     /api/groups/{group}/reset             ``{"topic", "timestamp_ms", "confirm": group}``
POST     /api/groups/{group}/skip              ``{"topic"?, "confirm": group}``
GET      /api/messages?topic=&begin=&end=      by time range (epoch ms)
GET      /api/messages?topic=&key=             by key
GET      /api/messages/{id}?topic=&preview=    one message (``preview``: text, json, hex;
         &limit=                               ``limit``: bytes, at most 65536)
POST     /api/messages/{id}/resend             ``{"group", "topic"?, "client_id"?}``
GET      /api/messages/{id}/trace?trace_topic=  its trace records (``queryMsgTraceById``)
GET      /api/dlq?group=&begin=&end=           dead letters of a group (``%DLQ%<group>``)
GET      /api/dlq/export?group=&begin=&end=    the same with properties and bodies, as a file
POST     /api/dlq/resend                       ``{"group", "msg_ids": [...]}``: to an online
                                               client of the group (CONSUME_MESSAGE_DIRECTLY)
GET      /api/acl                              every master's accounts (secrets masked) and
                                               global white list
POST     /api/acl/accounts                     create or update an account on every master
DELETE   /api/acl/accounts/{access_key}        ``{"confirm": "<access_key>"}``
PUT      /api/acl/white-list                   ``{"addrs": [...]}``: the whole global white list
GET      /api/connections?producer_group=&topic=  consumers per group; producers of a group
GET      /api/live                             live TPS / lag samples
GET      /api/timers                           timer messages: pending per topic (every master's
                                               GET_TIMER_METRICS) and each master's progress
=======  ====================================  =============================================

Every answer is JSON; an error is ``{"error": "<what went wrong>"}`` (plus ``code`` and
``remark`` for a refusal from a broker) with the status of ``error_status``.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from aiorocketmq.protocol.errors import (
    MQBrokerError,
    MQClientError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
)

from .auth import Session
from .sampler import LiveSampler
from .service import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_PREVIEW_BYTES,
    DashboardService,
    InputError,
    NotFoundError,
)

__all__ = ["SERVICE", "SAMPLER", "SESSION", "routes", "error_status", "error_body", "acting_user"]

SERVICE = web.AppKey("service", DashboardService)
SAMPLER = web.AppKey("sampler", LiveSampler)
# The request's Session (or None), set by the app's guard middleware. aiohttp >= 3.13 wants a
# typed RequestKey; older releases take the plain string.
SESSION: Any = web.RequestKey("session", Session) if hasattr(web, "RequestKey") else "session"

routes = web.RouteTableDef()
DEFAULT_TOPIC_PAGE_SIZE = 100


def error_status(exc: BaseException) -> int:
    """HTTP status of an error raised under a handler."""
    if isinstance(exc, (NotFoundError, TopicNotExistError)):
        return 404
    if isinstance(exc, MQClientError):
        return 400
    if isinstance(exc, RemotingTimeoutError):
        return 504
    if isinstance(exc, (MQBrokerError, RemotingError)):
        return 502
    return 500


def error_body(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, TopicNotExistError):
        return {"error": f"topic does not exist: {exc.remark}"}
    if isinstance(exc, MQBrokerError):
        return {"error": f"the cluster refused: CODE {exc.code} {exc.remark or ''}".strip(),
                "code": exc.code, "remark": exc.remark}
    if isinstance(exc, RemotingError):
        return {"error": f"cluster unreachable: {exc}"}
    return {"error": str(exc)}


def acting_user(request: web.Request) -> str:
    """``user@address`` of the request, for the log lines of destructive actions."""
    session: Session | None = request.get(SESSION)
    user = session.user if session is not None else "anonymous"
    return f"{user}@{request.remote}"


def _service(request: web.Request) -> DashboardService:
    return request.app[SERVICE]


async def _json_object(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise InputError("request body must be a JSON object")
    return data


def _str(data: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        if required:
            raise InputError(f"'{key}' is required")
        return None
    if not isinstance(value, str):
        raise InputError(f"'{key}' must be a string")
    return value


def _int_query(request: web.Request, key: str, default: int | None = None) -> int | None:
    raw = request.query.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"'{key}' must be an integer (epoch milliseconds for times), "
                         f"got {raw[:40]!r}") from None


def _paging(request: web.Request, default_size: int) -> tuple[int, int]:
    page = _int_query(request, "page", 1)
    size = _int_query(request, "size", default_size)
    assert page is not None and size is not None
    return page, size


def _bool_query(request: web.Request, key: str) -> bool:
    raw = request.query.get(key, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise InputError(f"'{key}' must be true or false")
    return raw in ("true", "1")


# -- cluster and topics ---------------------------------------------------------------------


@routes.get("/api/cluster")
async def get_cluster(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).cluster())


@routes.get("/api/timers")
async def get_timers(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).timers())


@routes.get("/api/topics")
async def get_topics(request: web.Request) -> web.Response:
    kinds = [k for k in request.query.get("kinds", "normal").split(",") if k]
    bad = set(kinds) - {"normal", "retry", "dlq", "system"}
    if bad:
        raise InputError(f"unknown topic kind(s): {', '.join(sorted(bad))}")
    page, size = _paging(request, DEFAULT_TOPIC_PAGE_SIZE)
    return web.json_response(await _service(request).topics(
        request.query.get("q", ""), kinds=kinds, page=page, size=size))


@routes.post("/api/topics")
async def post_topic(request: web.Request) -> web.Response:
    data = await _json_object(request)
    result = await _service(request).create_or_update_topic(
        topic=_str(data, "topic", required=True) or "",
        cluster=_str(data, "cluster"), broker_addr=_str(data, "broker_addr"),
        read_queue_nums=data.get("read_queue_nums", 8),
        write_queue_nums=data.get("write_queue_nums", 8),
        perm=data.get("perm", 6), order=data.get("order", False), user=acting_user(request))
    return web.json_response(result)


@routes.get("/api/topics/{topic}")
async def get_topic(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).topic(request.match_info["topic"]))


@routes.delete("/api/topics/{topic}")
async def delete_topic(request: web.Request) -> web.Response:
    data = await _json_object(request)
    result = await _service(request).delete_topic(
        request.match_info["topic"], confirm=_str(data, "confirm"), user=acting_user(request))
    return web.json_response(result)


@routes.post("/api/topics/{topic}/messages")
async def post_test_message(request: web.Request) -> web.Response:
    data = await _json_object(request)
    result = await _service(request).send_test_message(
        request.match_info["topic"], body=_str(data, "body", required=True) or "",
        tags=_str(data, "tags"), keys=_str(data, "keys"), user=acting_user(request))
    return web.json_response(result)


# -- consumer groups ------------------------------------------------------------------------


@routes.get("/api/groups")
async def get_groups(request: web.Request) -> web.Response:
    page, size = _paging(request, DEFAULT_PAGE_SIZE)
    return web.json_response(await _service(request).groups(
        request.query.get("q", ""), include_system=_bool_query(request, "system"),
        page=page, size=size))


@routes.post("/api/groups")
async def post_group(request: web.Request) -> web.Response:
    data = await _json_object(request)
    settings = data.get("config") or {}
    if not isinstance(settings, dict):
        raise InputError("'config' must be an object of subscription group settings")
    return web.json_response(await _service(request).create_or_update_group(
        _str(data, "group", required=True) or "", cluster=_str(data, "cluster"),
        broker_addr=_str(data, "broker_addr"), settings=settings, user=acting_user(request)))


@routes.delete("/api/groups/{group}")
async def delete_group(request: web.Request) -> web.Response:
    data = await _json_object(request)
    return web.json_response(await _service(request).delete_group(
        request.match_info["group"], confirm=_str(data, "confirm"),
        remove_offset=data.get("remove_offset", False), user=acting_user(request)))


@routes.get("/api/groups/{group}/config")
async def get_group_config(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).group_config(request.match_info["group"]))


@routes.get("/api/groups/{group}/clients/{client_id}")
async def get_running_info(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).consumer_running_info(
        request.match_info["group"], request.match_info["client_id"]))


@routes.get("/api/brokers/{addr}/config")
async def get_broker_config(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).broker_config(request.match_info["addr"]))


@routes.get("/api/groups/{group}")
async def get_group(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).group(request.match_info["group"]))


@routes.post("/api/groups/{group}/reset")
async def post_reset_offset(request: web.Request) -> web.Response:
    data = await _json_object(request)
    ts = data.get("timestamp_ms")
    if ts is None:
        raise InputError("'timestamp_ms' is required (epoch milliseconds, or -1 for the newest)")
    result = await _service(request).reset_offset(
        request.match_info["group"], topic=_str(data, "topic", required=True) or "",
        timestamp_ms=ts, confirm=_str(data, "confirm"), user=acting_user(request))
    return web.json_response(result)


@routes.post("/api/groups/{group}/skip")
async def post_skip_backlog(request: web.Request) -> web.Response:
    data = await _json_object(request)
    result = await _service(request).skip_backlog(
        request.match_info["group"], topic=_str(data, "topic"), confirm=_str(data, "confirm"),
        user=acting_user(request))
    return web.json_response(result)


# -- messages -------------------------------------------------------------------------------


@routes.get("/api/messages")
async def get_messages(request: web.Request) -> web.Response:
    service = _service(request)
    topic = request.query.get("topic", "")
    if not topic:
        raise InputError("'topic' is required")
    key = request.query.get("key")
    if key is not None:
        return web.json_response(await service.messages_by_key(topic, key))
    begin = _int_query(request, "begin")
    end = _int_query(request, "end")
    if begin is None or end is None:
        raise InputError("give 'key', or a time range 'begin' and 'end' (epoch milliseconds)")
    return web.json_response(await service.messages_by_time(topic, begin, end))


@routes.get("/api/messages/{msg_id}")
async def get_message(request: web.Request) -> web.Response:
    limit = _int_query(request, "limit", DEFAULT_PREVIEW_BYTES)
    assert limit is not None
    return web.json_response(await _service(request).message(
        request.match_info["msg_id"], topic=request.query.get("topic") or None,
        preview=request.query.get("preview", "text"), limit=limit))


@routes.post("/api/messages/{msg_id}/resend")
async def post_resend(request: web.Request) -> web.Response:
    data = await _json_object(request)
    return web.json_response(await _service(request).resend(
        request.match_info["msg_id"], group=_str(data, "group", required=True) or "",
        topic=_str(data, "topic"), client_id=_str(data, "client_id"), user=acting_user(request)))


@routes.get("/api/messages/{msg_id}/trace")
async def get_trace(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).message_trace(
        request.match_info["msg_id"], request.query.get("trace_topic") or None))


# -- dead-letter queue ----------------------------------------------------------------------


def _dlq_query(request: web.Request) -> tuple[str, int, int]:
    group = request.query.get("group", "")
    if not group:
        raise InputError("'group' is required")
    begin = _int_query(request, "begin")
    end = _int_query(request, "end")
    if begin is None or end is None:
        raise InputError("give a time range 'begin' and 'end' (epoch milliseconds)")
    return group, begin, end


@routes.get("/api/dlq")
async def get_dlq(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).dlq_messages(*_dlq_query(request)))


@routes.get("/api/dlq/export")
async def get_dlq_export(request: web.Request) -> web.Response:
    group, begin, end = _dlq_query(request)
    data = await _service(request).dlq_export(group, begin, end)
    response = web.json_response(data, dumps=lambda v: json.dumps(v, indent=1,
                                                                  ensure_ascii=False))
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in group)
    response.headers["Content-Disposition"] = (
        f'attachment; filename="dlq-{name}-{data["exported_ms"]}.json"')
    return response


@routes.post("/api/dlq/resend")
async def post_dlq_resend(request: web.Request) -> web.Response:
    data = await _json_object(request)
    return web.json_response(await _service(request).dlq_resend(
        _str(data, "group", required=True) or "", data.get("msg_ids"),
        user=acting_user(request)))


# -- ACL --------------------------------------------------------------------------------


@routes.get("/api/acl")
async def get_acl(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).acl())


@routes.post("/api/acl/accounts")
async def post_acl_account(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).update_acl_account(
        await _json_object(request), user=acting_user(request)))


@routes.delete("/api/acl/accounts/{access_key}")
async def delete_acl_account(request: web.Request) -> web.Response:
    data = await _json_object(request)
    return web.json_response(await _service(request).delete_acl_account(
        request.match_info["access_key"], confirm=_str(data, "confirm"),
        user=acting_user(request)))


@routes.put("/api/acl/white-list")
async def put_acl_white_list(request: web.Request) -> web.Response:
    data = await _json_object(request)
    return web.json_response(await _service(request).update_global_white_list(
        data.get("addrs"), user=acting_user(request)))


# -- connections and live charts ------------------------------------------------------------


@routes.get("/api/connections")
async def get_connections(request: web.Request) -> web.Response:
    return web.json_response(await _service(request).connections(
        producer_group=request.query.get("producer_group") or None,
        topic=request.query.get("topic") or None))


@routes.get("/api/live")
async def get_live(request: web.Request) -> web.Response:
    return web.json_response(request.app[SAMPLER].snapshot())
