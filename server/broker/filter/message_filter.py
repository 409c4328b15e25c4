"""What a pull selects (upstream 4.9.7 ``ExpressionMessageFilter``, ``ExpressionForRetryMessageFilter``).

Contract, for one pull's subscription and its ``ConsumerFilterData``:

* ``is_matched_by_consume_queue(tags_code)``: TAG expressions by tags code (no subscription,
  ``*`` or a unit without a code match; a hash collision passes, the client filters again
  by tag); every non-TAG expression passes here (upstream would consult its bloom-filter bit
  map, which we do not keep).
* ``is_matched_by_commit_log(properties)``: TAG expressions pass; SQL92 evaluates the
  compiled expression on the stored message's properties (no filter data or no compiled
  expression: pass; null, non-boolean or a throwing evaluation: no match).
* With ``filterSupportRetry`` (the retry variant) a message pulled from ``%RETRY%<group>``
  is judged by the group's filter for its original topic (property ``RETRY_TOPIC``).
* ``needs_properties``: whether ``is_matched_by_commit_log`` can say no, so the store only
  decodes properties for pulls that filter on them; ``match_record(view)`` decodes a stored
  record's properties (``record_properties``) and judges them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiorocketmq.protocol.codes import MessageConst, MessageSysFlag, MixAll
from aiorocketmq.protocol.filter import ExpressionType
from aiorocketmq.protocol.message import MESSAGE_MAGIC_CODE, decode_properties

if TYPE_CHECKING:
    from aiorocketmq.protocol.bodies import SubscriptionData

    from .consumer_filter import ConsumerFilterData, ConsumerFilterManager

__all__ = ["ExpressionMessageFilter", "record_properties"]

_INT = struct.Struct(">i").unpack_from
_SHORT = struct.Struct(">h").unpack_from
_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_RETRY_PREFIX = MixAll.RETRY_GROUP_TOPIC_PREFIX
_RETRY_TOPIC = MessageConst.PROPERTY_RETRY_TOPIC


def record_properties(buf: Any) -> dict[str, str]:
    """The properties of the stored record at the start of ``buf`` (``MessageDecoder.decodeProperties``).

    ``buf`` is a whole record as the store hands it out (bytes or memoryview); the
    record was validated when it was written, so only its layout is walked here.
    """
    sys_flag = _INT(buf, 36)[0]
    p = 48 + (20 if sys_flag & _BORN_V6 else 8) + 8 + (20 if sys_flag & _STORE_V6 else 8) + 12
    p += 4 + _INT(buf, p)[0]
    if _INT(buf, 4)[0] == MESSAGE_MAGIC_CODE:
        p += 1 + buf[p]
    else:
        p += 2 + _SHORT(buf, p)[0]
    length = _SHORT(buf, p)[0]
    if length <= 0:
        return {}
    p += 2
    return decode_properties(str(buf[p:p + length], "utf-8", "replace"))


class ExpressionMessageFilter:
    """One pull's filter; see the module docstring."""

    __slots__ = ("subscription", "filter_data", "code_set", "needs_properties", "_tag_type",
                 "_retry_group", "_manager")

    def __init__(self, subscription: SubscriptionData | None,
                 filter_data: ConsumerFilterData | None = None,
                 manager: ConsumerFilterManager | None = None, *,
                 support_retry: bool = False) -> None:
        self.subscription = subscription
        self.filter_data = filter_data
        self._manager = manager
        self._retry_group: str | None = None
        self.code_set: frozenset[int] | None = None
        if subscription is None or subscription.class_filter_mode:
            self._tag_type = True
            self.needs_properties = False
            return
        self._tag_type = ExpressionType.is_tag_type(subscription.expression_type)
        if self._tag_type and subscription.sub_string != subscription.SUB_ALL:
            self.code_set = frozenset(subscription.code_set)
        if support_retry and manager is not None and subscription.topic.startswith(_RETRY_PREFIX):
            self._retry_group = subscription.topic[len(_RETRY_PREFIX):]
        self.needs_properties = self._retry_group is not None or (
            not self._tag_type and filter_data is not None and filter_data.compiled is not None)

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if not self._tag_type:
            return True
        code_set = self.code_set
        if code_set is None or tags_code is None:
            return True
        low = tags_code & 0xFFFFFFFF  # Java tagsCode.intValue()
        return (low - 0x100000000 if low >= 0x80000000 else low) in code_set

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        if not self.needs_properties:
            return True
        data = self.filter_data
        if self._retry_group is not None:
            assert self._manager is not None
            real_topic = properties.get(_RETRY_TOPIC) if properties is not None else None
            data = self._manager.get(real_topic, self._retry_group)
        if data is None or data.compiled is None:
            return True
        return data.compiled.matches(properties)

    def match_record(self, record: Any) -> bool:
        """``is_matched_by_commit_log`` on a stored record's properties."""
        return self.is_matched_by_commit_log(record_properties(record))
