"""Broker-side message filtering (upstream ``org.apache.rocketmq.broker.filter``).

* ``consumer_filter``: ``ConsumerFilterManager`` / ``ConsumerFilterData``, the compiled
  SQL92 subscriptions per (topic, group), kept from heartbeats and persisted in
  ``<storeRoot>/config/consumerFilter.json``.
* ``message_filter``: ``ExpressionMessageFilter`` (and its retry-topic variant), what a pull
  and a parked pull use to select messages: tag codes from the consume queue, SQL92 on the
  stored message's properties.

The SQL92 language itself lives in ``aiorocketmq.protocol.filter``, shared with the client.
"""

from __future__ import annotations

from .consumer_filter import ConsumerFilterData, ConsumerFilterManager
from .message_filter import ExpressionMessageFilter, record_properties

__all__ = ["ConsumerFilterData", "ConsumerFilterManager", "ExpressionMessageFilter", "record_properties"]
