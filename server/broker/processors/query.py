"""Offset and message lookups (upstream ``QueryMessageProcessor`` + the offset part of ``AdminBrokerProcessor``).

docs/PROTOCOL.md 4.5, 4.10:

* GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP answer header ``offset``;
  GET_EARLIEST_MSG_STORETIME answers header ``timestamp``; all SUCCESS.
* QUERY_MESSAGE looks up ``topic#key`` in the index (``_UNIQUE_KEY_QUERY=true`` replaces
  ``maxNum`` by the store's ``defaultQueryMaxNum``); the header carries the index's last
  update time and offset; records found -> SUCCESS with them concatenated, none ->
  QUERY_NOT_FOUND "can not find message, maybe time range not correct".
* VIEW_MESSAGE_BY_ID returns the record at a commit-log offset, or SYSTEM_ERROR
  "can not find message by the offset, <offset>".

All handlers are plain functions (store reads are synchronous).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    ViewMessageRequestHeader,
    decode_header,
)

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["QueryProcessor"]


class QueryProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
        }

    def get_max_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetMaxOffsetRequestHeader, request)
        offset = self._b.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return request.create_response(
            ResponseCode.SUCCESS, ext_fields=GetMaxOffsetResponseHeader(offset=offset).to_ext_fields())

    def get_min_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetMinOffsetRequestHeader, request)
        offset = self._b.store.get_min_offset_in_queue(h.topic, h.queue_id)
        return request.create_response(
            ResponseCode.SUCCESS, ext_fields=GetMinOffsetResponseHeader(offset=offset).to_ext_fields())

    def search_offset_by_timestamp(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(SearchOffsetRequestHeader, request)
        offset = self._b.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return request.create_response(
            ResponseCode.SUCCESS, ext_fields=SearchOffsetResponseHeader(offset=offset).to_ext_fields())

    def get_earliest_msg_storetime(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetEarliestMsgStoretimeRequestHeader, request)
        ts = self._b.store.get_earliest_message_time(h.topic, h.queue_id)
        return request.create_response(
            ResponseCode.SUCCESS,
            ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext_fields())

    def query_message(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(QueryMessageRequestHeader, request)
        max_num = h.max_num
        if h.unique_key_query:
            max_num = self._b.store_config.default_query_max_num
        result = self._b.store.query_message(h.topic, h.key, max_num, h.begin_timestamp,
                                             h.end_timestamp)
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset).to_ext_fields()
        body = result.body()
        if body:
            return request.create_response(ResponseCode.SUCCESS, ext_fields=ext, body=body)
        return request.create_response(ResponseCode.QUERY_NOT_FOUND,
                                       "can not find message, maybe time range not correct",
                                       ext_fields=ext)

    def view_message_by_id(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ViewMessageRequestHeader, request)
        record = self._b.store.select_one_message_by_offset(h.offset)
        if record is None:
            return request.create_response(ResponseCode.SYSTEM_ERROR,
                                           f"can not find message by the offset, {h.offset}")
        return request.create_response(ResponseCode.SUCCESS, body=bytes(record))
