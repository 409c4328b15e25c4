"""One declarative spec per request code: the facts every layer reads about a request.

Contract: ``REQUEST_SPECS[code] -> RequestSpec`` holds, for each request code the project
handles or knows the header of:

* ``handled_by``: the modules (under ``aiorocketmq.``) whose processor table registers a
  handler for it: ``server.broker...``, ``server.namesrv.processor``, ``client...``. A
  broker that forwards a request to a client (GET_CONSUMER_RUNNING_INFO) names both;
  a code only known by its header names none;
* ``header`` / ``response_header``: the custom header classes of the request and of its
  successful answer (``protocol/headers.py``; upstream's ``decodeCommandCustomHeader``
  calls), ``None`` for none;
* ``edge_decodes``: a server's edge decodes ``header`` once, after its checks, into
  ``request.header`` (``protocol.validation.guard``), and the handler reads it with
  ``headers.decode_header``; a bad header is answered there (SYSTEM_ERROR, the decoder's
  remark). False where the handler decodes the header its own way: the sends and the
  reply sends (the send path's fast decoder). ``edge_header(spec)`` is the class the edge
  decodes, or ``None``;
* ``body``: what the request body carries: a ``protocol/bodies.py`` class (JSON), or one
  of ``MESSAGE`` (a message's bytes), ``BATCH`` (batched messages), ``PROPERTIES``
  (``key=value`` lines), ``RAW`` (bytes handed on unread); ``None`` for no body;
* ``rules`` and ``json_body``: the edge checks of ``protocol.validation`` (the
  ``FieldCheck`` per header key; whether a JSON body is held to UTF-8 text);
* ``acl``: the resources upstream's ``PlainAccessValidator.parse`` gives the code
  (``AclSpec``; ``None``: a valid signature is all it needs) and ``admin``: only an admin
  account may send it (``Permission.ADMIN_CODE``);
* ``may_create_topic``: handling it may auto-create a topic, so the broker answers after
  the new topic's registration with the nameservers.

Derived here, so nothing else lists codes: ``REQUEST_HEADERS`` / ``RESPONSE_HEADERS``,
``broker_specs()`` / ``namesrv_specs()`` (the codes each server registers), and the
tables the broker's ACL, edge checks and topic creation read (they bind a code's spec
once, when its handler is registered: a request costs the processor table's dict access
and nothing more). ``tests/unit/test_request_specs.py`` checks that the specs are complete
and that clients register exactly the codes their specs name,
``tests/integration/test_request_specs.py`` the same of the broker and the nameserver.

Sources: upstream ``RequestCode.java``, the processors' ``processRequest`` switches,
``PlainAccessValidator.parse``, ``Permission.ADMIN_CODE`` (docs/PROTOCOL.md 3.6, 4, 13.2,
13.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from .acl import Permission
from .bodies import (
    CheckClientRequestBody,
    DataVersion,
    HeartbeatData,
    LockBatchRequestBody,
    RegisterBrokerBody,
    SubscriptionGroupConfig,
    UnlockBatchRequestBody,
)
from .codes import RequestCode
from .headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    CheckTransactionStateRequestHeader,
    CloneGroupOffsetRequestHeader,
    CommandHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    CreateAccessConfigRequestHeader,
    CreateTopicRequestHeader,
    DeleteAccessConfigRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetAllProducerInfoRequestHeader,
    GetAllTopicConfigResponseHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerListByGroupResponseHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetProducerConnectionListRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    GetTopicStatsInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PutKVConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueryTopicConsumeByWhoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    ReplyMessageRequestHeader,
    ResetOffsetRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnRegisterBrokerRequestHeader,
    UnregisterClientRequestHeader,
    UnregisterClientResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    UpdateConsumerOffsetResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from .validation import (
    FieldCheck,
    RequestCheck,
    check_group,
    check_non_negative_int32,
    check_perm,
    check_queue_id,
    check_queue_nums,
    check_stored_topic,
    check_topic,
)

__all__ = [
    "MESSAGE",
    "BATCH",
    "PROPERTIES",
    "RAW",
    "AclResource",
    "AclSpec",
    "RequestSpec",
    "REQUEST_SPECS",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "BROKER",
    "NAMESRV",
    "CLIENT",
    "broker_specs",
    "namesrv_specs",
    "client_specs",
    "specs_of",
    "edge_check",
    "edge_header",
    "acl_header_fields",
]

# Bodies that are not a bodies.py class.
MESSAGE = "message"  # one message's body bytes
BATCH = "batch"  # messages encoded as a batch (MessageDecoder.encodeMessages)
PROPERTIES = "properties"  # key=value lines (MixAll.properties2String)
RAW = "raw"  # bytes the handler hands on (to a client) without reading them

BodyKind = type[Any] | str | None

# The modules that register handlers (``handled_by``), under ``aiorocketmq.``.
BROKER = "server.broker."
NAMESRV = "server.namesrv."
CLIENT = "client."
_P = "server.broker.processors."
_SEND = _P + "send"
_PULL = _P + "pull"
_QUERY = _P + "query"
_CLIENT_MANAGE = _P + "client_manage"
_CONSUMER_MANAGE = _P + "consumer_manage"
_ADMIN = _P + "admin"
_ADMIN_BROKER = _P + "admin_broker"
_ADMIN_GROUP = _P + "admin_group"
_SEND_BACK = _P + "send_back"
_LOCK = _P + "lock"
_END_TRANSACTION = _P + "end_transaction"
_REPLY = _P + "reply"
_SCHEDULE = "server.broker.schedule"
_ACL_ADMIN = "server.broker.acl.processor"
_NAMESRV = "server.namesrv.processor"
_CLIENT = "client.instance"
_CLIENT_REPLY = "client.request_reply"

SUB = Permission.SUB
PUB = Permission.PUB


class AclResource(NamedTuple):
    """One resource ``PlainAccessValidator.parse`` asks of a request.

    The name is the value of header field ``key``. With ``retry``, that value is a group
    and the resource is its ``%RETRY%`` topic. With ``retry_group`` (the sends), a
    ``%RETRY%`` topic in ``key`` is asked as ``retry_group``'s retry topic with SUB
    instead of the topic with ``perm``.
    """

    key: str
    perm: int
    retry: bool = False
    retry_group: str | None = None


@dataclass(frozen=True, slots=True)
class AclSpec:
    """What the broker's ACL check needs of one request code (docs/PROTOCOL.md 13.2).

    ``decodes_header``: upstream decodes the request's header first, so its required
    fields must be present and its required numbers parse (the spec's ``header``);
    ``heartbeat_body``: each consumer group in the HeartbeatData body asks its retry
    topic and its subscribed topics with SUB. The ``resources`` follow, in order.
    """

    resources: tuple[AclResource, ...] = ()
    decodes_header: bool = False
    heartbeat_body: bool = False


_NO_RULES: Mapping[str, FieldCheck] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """Everything the project states about one request code (module docstring)."""

    code: RequestCode
    handled_by: tuple[str, ...]
    header: type[CommandHeader] | None = None
    response_header: type[CommandHeader] | None = None
    body: BodyKind = None
    rules: Mapping[str, FieldCheck] = field(default_factory=lambda: _NO_RULES)
    json_body: bool = False
    acl: AclSpec | None = None
    admin: bool = False
    may_create_topic: bool = False
    edge_decodes: bool = True
    #: The edge checks built from ``rules`` and ``json_body`` (``protocol.validation``).
    edge: RequestCheck = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "edge", RequestCheck(self.rules, self.json_body))

    def handled_in(self, prefix: str) -> bool:
        """A module under ``prefix`` (``BROKER``, ``NAMESRV``, ``CLIENT``) handles it."""
        return any(m.startswith(prefix) for m in self.handled_by)


RC = RequestCode

# Group names are held to the client's rule wherever the broker would store them (offsets,
# auto-created subscription groups, retry topics).
_OFFSET_KEY: Mapping[str, FieldCheck] = MappingProxyType(
    {"consumerGroup": check_group, "topic": check_stored_topic, "queueId": check_queue_id})
_GROUP = MappingProxyType({"consumerGroup": check_group})

_ACL_SEND = AclSpec((AclResource("topic", PUB, retry_group="group"),))
_ACL_SEND_V2 = AclSpec((AclResource("b", PUB, retry_group="a"),))
_ACL_PULL = AclSpec((AclResource("topic", SUB), AclResource("consumerGroup", SUB, retry=True)))

_SPECS: tuple[RequestSpec, ...] = (
    # -- broker: sends (docs/PROTOCOL.md 4.1) --------------------------------------------
    RequestSpec(RC.SEND_MESSAGE, (_SEND,), SendMessageRequestHeader, SendMessageResponseHeader,
                MESSAGE, acl=_ACL_SEND, may_create_topic=True, edge_decodes=False),
    RequestSpec(RC.SEND_MESSAGE_V2, (_SEND,), SendMessageRequestHeaderV2,
                SendMessageResponseHeader, MESSAGE, acl=_ACL_SEND_V2, may_create_topic=True,
                edge_decodes=False),
    RequestSpec(RC.SEND_BATCH_MESSAGE, (_SEND,), SendMessageRequestHeaderV2,
                SendMessageResponseHeader, BATCH, may_create_topic=True, edge_decodes=False),
    RequestSpec(RC.SEND_REPLY_MESSAGE, (_REPLY,), SendMessageRequestHeader,
                SendMessageResponseHeader, MESSAGE, may_create_topic=True, edge_decodes=False),
    RequestSpec(RC.SEND_REPLY_MESSAGE_V2, (_REPLY,), SendMessageRequestHeaderV2,
                SendMessageResponseHeader, MESSAGE, may_create_topic=True, edge_decodes=False),
    RequestSpec(RC.CONSUMER_SEND_MSG_BACK, (_SEND_BACK,), ConsumerSendMsgBackRequestHeader,
                rules={"group": check_group},
                acl=AclSpec((AclResource("group", SUB, retry=True),)), may_create_topic=True),
    RequestSpec(RC.END_TRANSACTION, (_END_TRANSACTION,), EndTransactionRequestHeader),
    # -- broker: pulls, offsets, queries -------------------------------------------------
    RequestSpec(RC.PULL_MESSAGE, (_PULL,), PullMessageRequestHeader, PullMessageResponseHeader,
                rules=_GROUP, acl=_ACL_PULL),
    RequestSpec(RC.LITE_PULL_MESSAGE, (_PULL,), PullMessageRequestHeader,
                PullMessageResponseHeader, rules=_GROUP),
    RequestSpec(RC.QUERY_MESSAGE, (_QUERY,), QueryMessageRequestHeader, QueryMessageResponseHeader,
                acl=AclSpec((AclResource("topic", SUB),))),
    RequestSpec(RC.VIEW_MESSAGE_BY_ID, (_QUERY,), ViewMessageRequestHeader),
    RequestSpec(RC.GET_MAX_OFFSET, (_QUERY,), GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader),
    RequestSpec(RC.GET_MIN_OFFSET, (_QUERY,), GetMinOffsetRequestHeader, GetMinOffsetResponseHeader),
    RequestSpec(RC.SEARCH_OFFSET_BY_TIMESTAMP, (_QUERY,), SearchOffsetRequestHeader,
                SearchOffsetResponseHeader),
    RequestSpec(RC.GET_EARLIEST_MSG_STORETIME, (_QUERY,), GetEarliestMsgStoretimeRequestHeader,
                GetEarliestMsgStoretimeResponseHeader),
    RequestSpec(RC.QUERY_CONSUMER_OFFSET, (_CONSUMER_MANAGE,), QueryConsumerOffsetRequestHeader,
                QueryConsumerOffsetResponseHeader),
    RequestSpec(RC.UPDATE_CONSUMER_OFFSET, (_CONSUMER_MANAGE,), UpdateConsumerOffsetRequestHeader,
                UpdateConsumerOffsetResponseHeader, rules=_OFFSET_KEY,
                acl=AclSpec((AclResource("consumerGroup", SUB, retry=True),
                             AclResource("topic", SUB)), decodes_header=True)),
    RequestSpec(RC.GET_CONSUMER_LIST_BY_GROUP, (_CONSUMER_MANAGE,),
                GetConsumerListByGroupRequestHeader, GetConsumerListByGroupResponseHeader,
                acl=AclSpec((AclResource("consumerGroup", SUB, retry=True),),
                            decodes_header=True)),
    # -- broker: clients -------------------------------------------------------------------
    RequestSpec(RC.HEART_BEAT, (_CLIENT_MANAGE,), None, None, HeartbeatData, json_body=True,
                acl=AclSpec(heartbeat_body=True), may_create_topic=True),
    RequestSpec(RC.UNREGISTER_CLIENT, (_CLIENT_MANAGE,), UnregisterClientRequestHeader,
                UnregisterClientResponseHeader, json_body=True,
                acl=AclSpec((AclResource("consumerGroup", SUB, retry=True),),
                            decodes_header=True)),
    RequestSpec(RC.CHECK_CLIENT_CONFIG, (_CLIENT_MANAGE,), None, None, CheckClientRequestBody,
                json_body=True),
    RequestSpec(RC.LOCK_BATCH_MQ, (_LOCK,), None, None, LockBatchRequestBody, json_body=True),
    RequestSpec(RC.UNLOCK_BATCH_MQ, (_LOCK,), None, None, UnlockBatchRequestBody, json_body=True),
    # -- broker: topics and groups (admin) -------------------------------------------------
    RequestSpec(RC.UPDATE_AND_CREATE_TOPIC, (_ADMIN,), CreateTopicRequestHeader,
                rules={"topic": check_topic, "readQueueNums": check_queue_nums,
                       "writeQueueNums": check_queue_nums, "perm": check_perm,
                       "topicSysFlag": check_non_negative_int32},
                admin=True),
    RequestSpec(RC.DELETE_TOPIC_IN_BROKER, (_ADMIN,), DeleteTopicRequestHeader, admin=True),
    RequestSpec(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, (_ADMIN_GROUP,), None, None,
                SubscriptionGroupConfig, json_body=True, admin=True),
    RequestSpec(RC.DELETE_SUBSCRIPTIONGROUP, (_ADMIN_GROUP,), DeleteSubscriptionGroupRequestHeader,
                admin=True),
    RequestSpec(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, (_ADMIN_GROUP,)),
    RequestSpec(RC.GET_CONSUME_STATS, (_ADMIN_GROUP,), GetConsumeStatsRequestHeader),
    RequestSpec(RC.GET_CONSUMER_CONNECTION_LIST, (_ADMIN_GROUP,),
                GetConsumerConnectionListRequestHeader),
    RequestSpec(RC.GET_PRODUCER_CONNECTION_LIST, (_ADMIN_GROUP,),
                GetProducerConnectionListRequestHeader),
    RequestSpec(RC.QUERY_TOPIC_CONSUME_BY_WHO, (_ADMIN_GROUP,), QueryTopicConsumeByWhoRequestHeader),
    RequestSpec(RC.GET_ALL_CONSUMER_OFFSET, (_ADMIN_GROUP,)),
    RequestSpec(RC.CLONE_GROUP_OFFSET, (_ADMIN_GROUP,), CloneGroupOffsetRequestHeader,
                rules={"destGroup": check_group}),
    RequestSpec(RC.INVOKE_BROKER_TO_RESET_OFFSET, (_ADMIN_GROUP,), ResetOffsetRequestHeader,
                rules={"group": check_group, "topic": check_stored_topic}),
    RequestSpec(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, (_ADMIN_GROUP,),
                GetConsumerStatusRequestHeader),
    RequestSpec(RC.QUERY_CONSUME_TIME_SPAN, (_ADMIN_GROUP,), QueryConsumeTimeSpanRequestHeader),
    RequestSpec(RC.QUERY_CORRECTION_OFFSET, (_ADMIN_GROUP,), QueryCorrectionOffsetHeader),
    RequestSpec(RC.GET_ALL_PRODUCER_INFO, (_ADMIN_GROUP,), GetAllProducerInfoRequestHeader),
    # Forwarded by the broker to the client, which answers it.
    RequestSpec(RC.GET_CONSUMER_RUNNING_INFO, (_ADMIN_GROUP, _CLIENT),
                GetConsumerRunningInfoRequestHeader, body=RAW),
    RequestSpec(RC.CONSUME_MESSAGE_DIRECTLY, (_ADMIN_GROUP, _CLIENT),
                ConsumeMessageDirectlyResultRequestHeader, body=RAW),
    # -- broker: the broker itself (admin) -------------------------------------------------
    RequestSpec(RC.GET_BROKER_CONFIG, (_ADMIN_BROKER,), None, GetBrokerConfigResponseHeader),
    RequestSpec(RC.UPDATE_BROKER_CONFIG, (_ADMIN_BROKER,), body=PROPERTIES, admin=True),
    RequestSpec(RC.GET_BROKER_RUNTIME_INFO, (_ADMIN_BROKER,)),
    RequestSpec(RC.GET_TIMER_CHECK_POINT, (_ADMIN_BROKER,)),
    RequestSpec(RC.GET_TIMER_METRICS, (_ADMIN_BROKER,)),
    RequestSpec(RC.GET_ALL_TOPIC_CONFIG, (_ADMIN_BROKER,), None, GetAllTopicConfigResponseHeader),
    RequestSpec(RC.GET_TOPIC_STATS_INFO, (_ADMIN_BROKER,), GetTopicStatsInfoRequestHeader),
    RequestSpec(RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, (_ADMIN_BROKER,)),
    RequestSpec(RC.CLEAN_EXPIRED_CONSUMEQUEUE, (_ADMIN_BROKER,)),
    RequestSpec(RC.DELETE_EXPIRED_COMMITLOG, (_ADMIN_BROKER,)),
    RequestSpec(RC.CLEAN_UNUSED_TOPIC, (_ADMIN_BROKER,)),
    RequestSpec(RC.VIEW_BROKER_STATS_DATA, (_ADMIN_BROKER,), ViewBrokerStatsDataRequestHeader),
    RequestSpec(RC.GET_BROKER_CONSUME_STATS, (_ADMIN_BROKER,), GetConsumeStatsInBrokerHeader),
    RequestSpec(RC.GET_ALL_DELAY_OFFSET, (_SCHEDULE,)),
    RequestSpec(RC.QUERY_CONSUME_QUEUE, (_ADMIN_BROKER,), QueryConsumeQueueRequestHeader),
    # -- broker: ACL administration (docs/PROTOCOL.md 13.4) --------------------------------
    RequestSpec(RC.UPDATE_AND_CREATE_ACL_CONFIG, (_ACL_ADMIN,), CreateAccessConfigRequestHeader),
    RequestSpec(RC.DELETE_ACL_CONFIG, (_ACL_ADMIN,), DeleteAccessConfigRequestHeader),
    RequestSpec(RC.GET_BROKER_CLUSTER_ACL_INFO, (_ACL_ADMIN,), None,
                GetBrokerAclConfigResponseHeader),
    RequestSpec(RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, (_ACL_ADMIN,),
                UpdateGlobalWhiteAddrsConfigRequestHeader),
    RequestSpec(RC.GET_BROKER_CLUSTER_ACL_CONFIG, (_ACL_ADMIN,)),
    # -- broker codes known by their header, not handled yet -------------------------------
    RequestSpec(RC.RESUME_CHECK_HALF_MESSAGE, (), ResumeCheckHalfMessageRequestHeader),
    # -- nameserver (docs/PROTOCOL.md 4.3, 4.4) --------------------------------------------
    RequestSpec(RC.REGISTER_BROKER, (_NAMESRV,), RegisterBrokerRequestHeader,
                RegisterBrokerResponseHeader, RegisterBrokerBody, json_body=True),
    RequestSpec(RC.UNREGISTER_BROKER, (_NAMESRV,), UnRegisterBrokerRequestHeader),
    RequestSpec(RC.GET_ROUTEINFO_BY_TOPIC, (_NAMESRV,), GetRouteInfoRequestHeader),
    RequestSpec(RC.GET_BROKER_CLUSTER_INFO, (_NAMESRV,)),
    RequestSpec(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, (_NAMESRV,)),
    RequestSpec(RC.GET_TOPICS_BY_CLUSTER, (_NAMESRV,), GetTopicsByClusterRequestHeader),
    RequestSpec(RC.GET_SYSTEM_TOPIC_LIST_FROM_NS, (_NAMESRV,)),
    RequestSpec(RC.GET_UNIT_TOPIC_LIST, (_NAMESRV,)),
    RequestSpec(RC.GET_HAS_UNIT_SUB_TOPIC_LIST, (_NAMESRV,)),
    RequestSpec(RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, (_NAMESRV,)),
    RequestSpec(RC.DELETE_TOPIC_IN_NAMESRV, (_NAMESRV,), DeleteTopicFromNamesrvRequestHeader),
    RequestSpec(RC.WIPE_WRITE_PERM_OF_BROKER, (_NAMESRV,), WipeWritePermOfBrokerRequestHeader,
                WipeWritePermOfBrokerResponseHeader),
    RequestSpec(RC.ADD_WRITE_PERM_OF_BROKER, (_NAMESRV,), AddWritePermOfBrokerRequestHeader,
                AddWritePermOfBrokerResponseHeader),
    RequestSpec(RC.PUT_KV_CONFIG, (_NAMESRV,), PutKVConfigRequestHeader),
    RequestSpec(RC.GET_KV_CONFIG, (_NAMESRV,), GetKVConfigRequestHeader, GetKVConfigResponseHeader),
    RequestSpec(RC.DELETE_KV_CONFIG, (_NAMESRV,), DeleteKVConfigRequestHeader),
    RequestSpec(RC.GET_KVLIST_BY_NAMESPACE, (_NAMESRV,), GetKVListByNamespaceRequestHeader),
    RequestSpec(RC.GET_NAMESRV_CONFIG, (_NAMESRV,)),
    RequestSpec(RC.UPDATE_NAMESRV_CONFIG, (_NAMESRV,), body=PROPERTIES),
    RequestSpec(RC.QUERY_DATA_VERSION, (_NAMESRV,), QueryDataVersionRequestHeader,
                QueryDataVersionResponseHeader, DataVersion),
    # -- sent by the broker to clients (client/instance.py) --------------------------------
    RequestSpec(RC.NOTIFY_CONSUMER_IDS_CHANGED, (_CLIENT,), NotifyConsumerIdsChangedRequestHeader),
    RequestSpec(RC.CHECK_TRANSACTION_STATE, (_CLIENT,), CheckTransactionStateRequestHeader,
                body=MESSAGE),
    RequestSpec(RC.RESET_CONSUMER_CLIENT_OFFSET, (_CLIENT,), ResetOffsetRequestHeader, body=RAW),
    RequestSpec(RC.GET_CONSUMER_STATUS_FROM_CLIENT, (_CLIENT,), GetConsumerStatusRequestHeader),
    RequestSpec(RC.PUSH_REPLY_MESSAGE_TO_CLIENT, (_CLIENT_REPLY,), ReplyMessageRequestHeader,
                body=MESSAGE),
)

del RC


def _table(specs: tuple[RequestSpec, ...]) -> Mapping[int, RequestSpec]:
    table: dict[int, RequestSpec] = {}
    for spec in specs:
        if int(spec.code) in table:
            raise TypeError(f"two specs for request code {spec.code!r}")
        table[int(spec.code)] = spec
    return MappingProxyType(table)


#: Request code -> its spec.
REQUEST_SPECS: Mapping[int, RequestSpec] = _table(_SPECS)

#: Request code -> header class of that request. Codes without a custom header
#: (HEART_BEAT, LOCK_BATCH_MQ, GET_BROKER_CLUSTER_INFO, ...) are absent.
REQUEST_HEADERS: Mapping[int, type[CommandHeader]] = MappingProxyType(
    {c: s.header for c, s in REQUEST_SPECS.items() if s.header is not None})

#: Request code -> header class of its (successful) response. For PULL_MESSAGE the
#: header also accompanies codes 19, 20 and 21.
RESPONSE_HEADERS: Mapping[int, type[CommandHeader]] = MappingProxyType(
    {c: s.response_header for c, s in REQUEST_SPECS.items() if s.response_header is not None})


def specs_of(prefix: str) -> Mapping[int, RequestSpec]:
    """The specs of the codes a module under ``prefix`` handles."""
    return MappingProxyType({c: s for c, s in REQUEST_SPECS.items() if s.handled_in(prefix)})


def broker_specs() -> Mapping[int, RequestSpec]:
    """The codes the broker registers, with their specs."""
    return specs_of(BROKER)


def namesrv_specs() -> Mapping[int, RequestSpec]:
    """The codes the nameserver registers, with their specs."""
    return specs_of(NAMESRV)


def client_specs() -> Mapping[int, RequestSpec]:
    """The codes a client handles (the broker sends them), with their specs."""
    return specs_of(CLIENT)


_TEXT_ONLY = RequestCheck()


def edge_check(spec: RequestSpec | None) -> RequestCheck:
    """The edge checks of a code with ``spec``; without one, only the header text check."""
    return _TEXT_ONLY if spec is None else spec.edge


def edge_header(spec: RequestSpec | None) -> type[CommandHeader] | None:
    """The header class the edge decodes for a code with ``spec`` (``None``: none)."""
    return spec.header if spec is not None and spec.edge_decodes else None


def acl_header_fields(spec: RequestSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """For an ``AclSpec`` with ``decodes_header``: the wire keys of the header's required
    fields in declaration order, and those of its required numbers (``Integer.parseInt`` /
    ``Long.parseLong``), as upstream's ``decodeCommandCustomHeader`` checks them."""
    if spec.header is None:
        return (), ()
    required = spec.header.required_fields()
    return (tuple(wire for wire, _ in required),
            tuple(wire for wire, kind in required if kind in ("int32", "int64")))
