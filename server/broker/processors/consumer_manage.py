"""QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, GET_CONSUMER_LIST_BY_GROUP (upstream ``ConsumerManageProcessor``).

docs/PROTOCOL.md 4.5, 4.6:

* QUERY_CONSUMER_OFFSET answers the stored offset; a group without one gets ``offset=0``
  SUCCESS when the queue is young (min offset <= 0 and message 0 still in memory, which
  includes an empty queue), else QUERY_NOT_FOUND "Not found, V3_0_6_SNAPSHOT maybe this
  group consumer boot first".
* UPDATE_CONSUMER_OFFSET (two-way or oneway) stores ``commitOffset``; SUCCESS with an
  empty header.
* GET_CONSUMER_LIST_BY_GROUP answers ``{"consumerIdList":[...]}`` or SYSTEM_ERROR
  "no consumer for this group, <group>".

All handlers are plain functions.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import ConsumerListBody
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    decode_header,
)
from aiorocketmq.server.store.config import MessageStoreConfig

if TYPE_CHECKING:
    from ..controller import BrokerController

__all__ = ["ConsumerManageProcessor"]

log = get_logger("aiorocketmq.broker.consumer_manage")


class ConsumerManageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self._b = broker

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
        }

    def get_consumer_list_by_group(self, channel: Channel,
                                   request: RemotingCommand) -> RemotingCommand:
        header = decode_header(GetConsumerListByGroupRequestHeader, request)
        group = header.consumer_group
        info = self._b.consumers.get(group)
        if info is not None:
            ids = info.all_client_ids()
            if ids:
                return request.create_response(
                    ResponseCode.SUCCESS, ext_fields={},
                    body=ConsumerListBody(ids).encode())
            log.warning("broker.consumer_group_empty", group=group, peer=channel.remote_addr)
        else:
            log.warning("broker.consumer_group_unknown", group=group, peer=channel.remote_addr)
        return request.create_response(ResponseCode.SYSTEM_ERROR,
                                       f"no consumer for this group, {group}", ext_fields={})

    def update_consumer_offset(self, channel: Channel,
                               request: RemotingCommand) -> RemotingCommand:
        h = decode_header(UpdateConsumerOffsetRequestHeader, request)
        self._b.offsets.commit_offset(channel.remote_addr, h.consumer_group, h.topic, h.queue_id,
                                      h.commit_offset)
        return request.create_response(ResponseCode.SUCCESS, ext_fields={})

    def query_consumer_offset(self, channel: Channel,
                              request: RemotingCommand) -> RemotingCommand:
        h = decode_header(QueryConsumerOffsetRequestHeader, request)
        offset = self._b.offsets.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset < 0:
            min_offset = self._b.store.get_min_offset_in_queue(h.topic, h.queue_id)
            if min_offset <= 0 and not self._in_disk(h.topic, h.queue_id, 0):
                offset = 0
            else:
                return request.create_response(
                    ResponseCode.QUERY_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                    ext_fields={})
        return request.create_response(
            ResponseCode.SUCCESS,
            ext_fields=QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields())

    def _in_disk(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """``DefaultMessageStore.checkInDiskByConsumeOffset``: the message at ``consume_offset``
        lies beyond the in-memory window (``accessMessageInMemoryMaxRatio`` of RAM) behind
        the commit log's end; a missing unit is not "in disk"."""
        store = self._b.store
        check = getattr(store, "check_in_disk_by_consume_offset", None)
        if check is not None:
            return bool(check(topic, queue_id, consume_offset))
        if store.get_max_offset_in_queue(topic, queue_id) <= consume_offset:
            return False
        phy = store.get_commit_log_offset_in_queue(topic, queue_id, consume_offset)
        return store.get_max_phy_offset() - phy > _in_memory_window(self._b.store_config)


def _in_memory_window(cfg: MessageStoreConfig) -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024 * 1024 * 1024
    return total * cfg.access_message_in_memory_max_ratio // 100
