"""The nameserver's request handlers, one per request code, in one table.

Upstream ``namesrv/processor/DefaultRequestProcessor`` (docs/PROTOCOL.md 3.1, 4.3, 4.4, 7).
The processor contract is docs/ARCHITECTURE.md's: ``handler(channel, request)`` returns a
response (or a coroutine of one: the KV and config changes, which wait for the disk).
Codes not in :attr:`NamesrvProcessor.table` get REQUEST_CODE_NOT_SUPPORTED from the
Channel, with upstream's remark.

Response shapes follow upstream exactly, which the 4.9.7 vectors confirm:

* Handlers whose upstream response has a custom header class (REGISTER_BROKER,
  GET_KV_CONFIG, WIPE/ADD_WRITE_PERM, QUERY_DATA_VERSION) always carry ``extFields``,
  ``{}`` when every field is null (frame 1); every other answer is bare: no ``extFields``,
  no body unless it has data (frames 1105, 1109, 1117, 1234, 1099).
* GET_ROUTEINFO_BY_TOPIC writes standard JSON when the request's version is >= V4_9_4 or
  it sets ``acceptStandardJsonOnly=true``, fastjson's legacy form otherwise (frames
  1338-1343); every other JSON body is legacy (GET_BROKER_CLUSTER_INFO, frame 991).
* TOPIC_NOT_EXIST carries upstream's remark, newline and FAQ line included (frame 6).

Bad input is answered, never stored: a header that does not decode (decoded once by the
edge, from the code's spec), header text or a registration body holding a lone UTF-16
surrogate (``protocol.validation``'s edge checks, in front of every handler), a body that is not JSON or does not inflate, a CRC32 mismatch:
each gets SYSTEM_ERROR with a remark saying what was wrong, and no table is touched
(decoding and validation finish before the first mutation). A registered topic config
with a queue count outside ``0..route_info.MAX_QUEUE_NUMS`` or a perm outside ``0..15`` is
left out of the route table (logged) while the broker's other topics register. Upstream
is laxer (it stores any int); we diverge on purpose so one corrupt topic cannot poison
every client's routes, nor take the broker's other routes with it.

Encoded routes are cached per (topic, form) until ``RouteInfoManager.generation`` moves,
so the hot path is a dict lookup plus one response frame.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.atomic_file import AtomicFileWriter
from aiorocketmq.protocol.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    properties_to_string,
    string_to_properties,
)
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import MixAll, MQVersion, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import ProtocolError
from aiorocketmq.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
    decode_header,
)
from aiorocketmq.protocol.request_specs import edge_check, edge_header, namesrv_specs
from aiorocketmq.protocol.validation import guard as edge_guard

from .config import PATH_KEYS, ConfigError, NamesrvConfig
from .kv_config import KVConfigManager
from .route_info import RouteInfoManager

if TYPE_CHECKING:
    from aiorocketmq.protocol.bodies import TopicList

__all__ = ["NamesrvProcessor", "TOPIC_NOT_EXIST_REMARK", "FAQ_APPLY_TOPIC_URL"]

log = get_logger("aiorocketmq.namesrv")

# FAQUrl.APPLY_TOPIC_URL and FAQUrl.suggestTodo: "\nSee <url> for further details."
FAQ_APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"
TOPIC_NOT_EXIST_REMARK = (
    "No topic route info in name server for the topic: {topic}"
    "\nSee " + FAQ_APPLY_TOPIC_URL + " for further details."
)
_ROUTE_CACHE_MAX = 65536  # entries; at most two per routed topic, cleared on any change

_SUCCESS = int(ResponseCode.SUCCESS)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_TOPIC_NOT_EXIST = int(ResponseCode.TOPIC_NOT_EXIST)
_QUERY_NOT_FOUND = int(ResponseCode.QUERY_NOT_FOUND)
_NO_PERMISSION = int(ResponseCode.NO_PERMISSION)
_STANDARD_JSON_SINCE = MQVersion.V4_9_4
_REGISTER_BODY_SINCE = MQVersion.V3_0_11
_ORDER_NS = MixAll.ORDER_TOPIC_CONFIG_NAMESPACE

_Sync: TypeAlias = Callable[[Channel, RemotingCommand], RemotingCommand]
_Async: TypeAlias = Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand]]


class NamesrvProcessor:
    """Every nameserver request handler; ``table`` maps RequestCode -> handler."""

    __slots__ = ("config", "routes", "kv", "table", "_route_cache", "_route_generation",
                 "_config_writer")

    def __init__(self, config: NamesrvConfig, routes: RouteInfoManager,
                 kv: KVConfigManager) -> None:
        self.config = config
        self.routes = routes
        self.kv = kv
        self._route_cache: dict[tuple[str, bool], bytes] = {}
        self._route_generation = -1
        self._config_writer: AtomicFileWriter | None = None
        rc = RequestCode
        sync: dict[int, _Sync] = {
            rc.REGISTER_BROKER: self.register_broker,
            rc.UNREGISTER_BROKER: self.unregister_broker,
            rc.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            rc.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            rc.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._topic_list(routes.all_topics),
            rc.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            rc.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._topic_list(routes.system_topics),
            rc.GET_UNIT_TOPIC_LIST: self._topic_list(routes.unit_topics),
            rc.GET_HAS_UNIT_SUB_TOPIC_LIST: self._topic_list(routes.has_unit_sub_topics),
            rc.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._topic_list(
                routes.has_unit_sub_ununit_topics),
            rc.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            rc.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            rc.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            rc.GET_KV_CONFIG: self.get_kv_config,
            rc.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            rc.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            rc.QUERY_DATA_VERSION: self.query_data_version,
        }
        asynchronous: dict[int, _Async] = {
            rc.PUT_KV_CONFIG: self.put_kv_config,
            rc.DELETE_KV_CONFIG: self.delete_kv_config,
            rc.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
        }
        table: dict[int, Handler] = {int(c): _guard(h) for c, h in sync.items()}
        table.update({int(c): _guard_async(h) for c, h in asynchronous.items()})
        # Each handler behind the edge of its request spec (protocol/request_specs.py): the
        # checks, then the header decoded once into request.header (decode_header reads it).
        specs = namesrv_specs()
        self.table = {c: edge_guard(h, edge_check(specs.get(c)), _log_refused,
                                    edge_header(specs.get(c)))
                      for c, h in table.items()}

    # -- brokers --------------------------------------------------------------------------

    def register_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """REGISTER_BROKER (103), two-way or oneway; body per version and ``compressed``."""
        h = decode_header(RegisterBrokerRequestHeader, request)
        body = request.body
        if h.body_crc32 != 0:
            crc = zlib.crc32(body or b"") & 0x7FFFFFFF
            if crc != h.body_crc32:
                log.warning("namesrv.register_crc_mismatch", peer=channel.remote_addr,
                            broker_addr=h.broker_addr, header_crc32=h.body_crc32, body_crc32=crc)
                return request.create_response(_SYSTEM_ERROR, "crc32 not match", ext_fields={})
        filters: list[str] | None
        try:
            if request.version >= _REGISTER_BODY_SINCE:
                if body:
                    rb = RegisterBrokerBody.decode(body, compressed=h.compressed)
                    wrapper, filters = rb.topic_config_serialize_wrapper, rb.filter_server_list
                else:
                    wrapper, filters = _empty_wrapper(), []
            else:
                wrapper = TopicConfigSerializeWrapper.decode(body) if body else _empty_wrapper()
                filters = None
        except ProtocolError as exc:
            form = ("compressed RegisterBrokerBody" if h.compressed
                    else "RegisterBrokerBody" if request.version >= _REGISTER_BODY_SINCE
                    else "TopicConfigSerializeWrapper")
            raise ProtocolError(f"bad {form} from {h.broker_addr}: {exc}") from exc
        result = self.routes.register_broker(
            h.cluster_name, h.broker_addr, h.broker_name, h.broker_id, h.ha_server_addr,
            wrapper.data_version, wrapper.topic_config_table, filters, channel)
        ext = RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr,
                                           master_addr=result.master_addr).to_ext_fields()
        return request.create_response(_SUCCESS, ext_fields=ext, body=self._order_conf_body())

    def _order_conf_body(self) -> bytes | None:
        table = self.kv.get_namespace(_ORDER_NS)
        return None if table is None else KVTable(table=table).encode()

    def unregister_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_BROKER (104): bare answer."""
        h = decode_header(UnRegisterBrokerRequestHeader, request)
        self.routes.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return request.create_response(_SUCCESS)

    def query_data_version(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """QUERY_DATA_VERSION (322): header ``changed``; body the stored DataVersion."""
        h = decode_header(QueryDataVersionRequestHeader, request)
        if not request.body:
            raise ProtocolError("QUERY_DATA_VERSION needs a DataVersion body")
        version = DataVersion.decode(request.body)
        changed, stored = self.routes.query_data_version(h.broker_addr, version)
        ext = QueryDataVersionResponseHeader(changed=changed).to_ext_fields()
        return request.create_response(_SUCCESS, ext_fields=ext,
                                       body=None if stored is None else stored.encode())

    # -- routes and lists -----------------------------------------------------------------

    def get_route_info_by_topic(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC (105): the hot path."""
        h = decode_header(GetRouteInfoRequestHeader, request)
        topic = h.topic
        standard = request.version >= _STANDARD_JSON_SINCE or h.accept_standard_json_only is True
        routes = self.routes
        cache = self._route_cache
        if routes.generation != self._route_generation or len(cache) >= _ROUTE_CACHE_MAX:
            cache.clear()
            self._route_generation = routes.generation
        # With orderMessageEnable the answer also depends on the KV table, whose changes
        # do not move the route generation: no caching then.
        ordered = self.config.order_message_enable
        key = (topic, standard)
        body = None if ordered else cache.get(key)
        if body is None:
            order_conf = self.kv.get(_ORDER_NS, topic) if ordered else None
            route = routes.pick_topic_route(topic, order_conf)
            if route is None:
                return request.create_response(
                    _TOPIC_NOT_EXIST, TOPIC_NOT_EXIST_REMARK.format(topic=topic))
            body = route.encode(standard=standard)
            if not ordered:
                cache[key] = body
        return request.create_response(_SUCCESS, body=body)

    def get_broker_cluster_info(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO (106): always fastjson's legacy form (frame 991)."""
        return request.create_response(_SUCCESS, body=self.routes.cluster_info().encode())

    def _topic_list(self, source: Callable[[], TopicList]) -> _Sync:
        def handler(channel: Channel, request: RemotingCommand) -> RemotingCommand:
            return request.create_response(_SUCCESS, body=source().encode())
        handler.__name__ = f"topic_list_{source.__name__}"
        return handler

    def get_topics_by_cluster(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPICS_BY_CLUSTER (224)."""
        h = decode_header(GetTopicsByClusterRequestHeader, request)
        return request.create_response(
            _SUCCESS, body=self.routes.topics_by_cluster(h.cluster).encode())

    def delete_topic_in_namesrv(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216): from one cluster's brokers or everywhere."""
        h = decode_header(DeleteTopicFromNamesrvRequestHeader, request)
        self.routes.delete_topic(h.topic, h.cluster_name or None)
        log.info("namesrv.topic_delete", topic=h.topic, cluster=h.cluster_name,
                 peer=channel.remote_addr)
        return request.create_response(_SUCCESS)

    def wipe_write_perm_of_broker(self, channel: Channel,
                                  request: RemotingCommand) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (205): header ``wipeTopicCount``."""
        h = decode_header(WipeWritePermOfBrokerRequestHeader, request)
        count = self.routes.wipe_write_perm(h.broker_name)
        log.info("namesrv.wipe_write_perm", broker_name=h.broker_name, topics=count,
                 peer=channel.remote_addr)
        ext = WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext_fields()
        return request.create_response(_SUCCESS, ext_fields=ext)

    def add_write_perm_of_broker(self, channel: Channel,
                                 request: RemotingCommand) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER (327): header ``addTopicCount``."""
        h = decode_header(AddWritePermOfBrokerRequestHeader, request)
        count = self.routes.add_write_perm(h.broker_name)
        log.info("namesrv.add_write_perm", broker_name=h.broker_name, topics=count,
                 peer=channel.remote_addr)
        ext = AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext_fields()
        return request.create_response(_SUCCESS, ext_fields=ext)

    # -- KV config ------------------------------------------------------------------------

    async def put_kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """PUT_KV_CONFIG (100): answered once the change is on disk."""
        h = decode_header(PutKVConfigRequestHeader, request)
        try:
            await self.kv.put(h.namespace, h.key, h.value)
        except ValueError as exc:
            return request.create_response(_SYSTEM_ERROR, str(exc))
        return request.create_response(_SUCCESS)

    def get_kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG (101): header ``value``, or QUERY_NOT_FOUND."""
        h = decode_header(GetKVConfigRequestHeader, request)
        value = self.kv.get(h.namespace, h.key)
        ext = GetKVConfigResponseHeader(value=value).to_ext_fields()
        if value is not None:
            return request.create_response(_SUCCESS, ext_fields=ext)
        return request.create_response(
            _QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}",
            ext_fields=ext)

    async def delete_kv_config(self, channel: Channel,
                               request: RemotingCommand) -> RemotingCommand:
        """DELETE_KV_CONFIG (102): answered once the change is on disk."""
        h = decode_header(DeleteKVConfigRequestHeader, request)
        await self.kv.delete(h.namespace, h.key)
        return request.create_response(_SUCCESS)

    def get_kv_list_by_namespace(self, channel: Channel,
                                 request: RemotingCommand) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): body KVTable, or QUERY_NOT_FOUND."""
        h = decode_header(GetKVListByNamespaceRequestHeader, request)
        table = self.kv.get_namespace(h.namespace)
        if table is None:
            return request.create_response(_QUERY_NOT_FOUND,
                                           f"No config item, Namespace: {h.namespace}")
        return request.create_response(_SUCCESS, body=KVTable(table=table).encode())

    # -- nameserver config ----------------------------------------------------------------

    def get_namesrv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): Java properties text (frame 1099)."""
        text = properties_to_string(self.config.to_properties())
        return request.create_response(_SUCCESS, body=text.encode("utf-8") if text else None)

    async def update_namesrv_config(self, channel: Channel,
                                    request: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (318): properties text; paths may not change (upstream)."""
        body = request.body
        if body:
            try:
                text = bytes(body).decode("utf-8")
            except UnicodeDecodeError as exc:
                return request.create_response(_SYSTEM_ERROR,
                                               f"UnsupportedEncodingException {exc}")
            props = string_to_properties(text)
            if PATH_KEYS & props.keys():
                return request.create_response(_NO_PERMISSION, "Can not update config path")
            try:
                ignored = self.config.update(props)
            except ConfigError as exc:
                return request.create_response(_SYSTEM_ERROR, str(exc))
            log.info("namesrv.config_updated", peer=channel.remote_addr,
                     keys=sorted(set(props) - set(ignored)), ignored=ignored)
            await self._persist_config()
        return request.create_response(_SUCCESS)

    async def _persist_config(self) -> None:
        # Upstream Configuration.persist: the whole configuration to configStorePath. The
        # paths cannot change at run time (PATH_KEYS), so one writer keeps this file's
        # writes in order, each encoding the configuration as it is when its turn comes.
        path = self.config.config_store_path
        if not path:
            return
        writer = self._config_writer
        if writer is None or writer.path != Path(path):
            writer = self._config_writer = AtomicFileWriter(Path(path))

        def encode() -> bytes:
            return properties_to_string(self.config.to_properties()).encode("utf-8")

        try:
            await writer.write(encode)
        except OSError as exc:
            # As upstream: the update stands in memory; the file is stale until next time.
            log.error("namesrv.config_persist_failed", path=path, error=str(exc))


def _log_refused(channel: Channel, request: RemotingCommand, remark: str) -> None:
    log.warning("namesrv.request_refused", peer=channel.remote_addr, code=request.code,
                opaque=request.opaque, reason=remark[:300])


def _empty_wrapper() -> TopicConfigSerializeWrapper:
    # Upstream: no body -> a wrapper whose DataVersion is counter 0, timestamp 0.
    return TopicConfigSerializeWrapper(data_version=DataVersion(timestamp=0, counter=0))


def _bad_request(channel: Channel, request: RemotingCommand,
                 exc: ProtocolError) -> RemotingCommand:
    log.warning("namesrv.bad_request", peer=channel.remote_addr, code=request.code,
                opaque=request.opaque, oneway=request.is_oneway, reason=str(exc))
    return request.create_response(_SYSTEM_ERROR, str(exc))


def _guard(handler: _Sync) -> Handler:
    """Turn a bad header or body into SYSTEM_ERROR with the reason (decode in one place)."""

    @functools.wraps(handler)
    def guarded(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            return handler(channel, request)
        except ProtocolError as exc:
            return _bad_request(channel, request, exc)

    return guarded


def _guard_async(handler: _Async) -> Handler:
    @functools.wraps(handler)
    async def guarded(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            return await handler(channel, request)
        except ProtocolError as exc:
            return _bad_request(channel, request, exc)

    return guarded
