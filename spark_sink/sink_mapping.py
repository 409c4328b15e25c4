"""Sink side: which DataFrame columns become which parts of a RocketMQ message.

Contract:

* ``SinkColumns.from_schema(fields)`` validates the DataFrame once, on the driver:
  ``body`` (binary or string; ``value`` is accepted instead, as in Spark's Kafka sink) is
  required; ``topic``, ``tags``, ``keys`` (strings), ``properties`` (map<string,string>),
  ``queueId`` (int), ``delayLevel`` (int: the broker's delay level, 0 or null for none) and
  ``deliverTime`` (a timestamp, or a bigint of epoch ms: a timer message, ``TIMER_DELIVER_MS``;
  null for none) are optional; any other column is refused, so a typo is not dropped silently. Without a
  ``topic`` column the ``topic`` option is required. With ``packed=True`` (bodyFormat
  msgpack or json) there is no body column (a body or value column is refused) and the
  other columns are the body's data (``body_format.SinkPacker``).
* ``sharding_key`` (the option shardingKeyColumn) names a string or integer column: rows
  with the same value go to the same queue, ``SelectMessageQueueByHash``'s (Java's
  ``hashCode`` of the value, as a String, an Integer or, for a bigint column, a Long,
  modulo the topic's write queues), so Java producers sending the same keys pick the same
  queues. The column may be one the sink would otherwise refuse: it is then used for
  routing only (packed, it stays in the body too). It does not go with ``queueId``.
* ``row_to_message(row, ...)`` maps one row (a ``dict``) to ``(Message, queue_hint |
  None)``: the sink sends to ``mqs[queue_hint % len(mqs)]`` (the queueId, or the sharding
  key's hash); with a packer the body is the packed row and ``contentType`` says which
  codec. A null body, null topic, a negative delay level, a deliverTime at or before the
  epoch, or a user property that is a
  RocketMQ system key raises ``MQClientError`` naming the row.
* Every message carries the lineage properties below, so a consumer can drop the
  duplicates an at-least-once re-run of a batch produces (``dedup_key``):

  ===================  ==========================================================
  ``spark.queryId``    streaming query id (absent for batch writes)
  ``spark.batchId``    micro-batch id (``-1`` for batch writes)
  ``spark.partitionId`` Spark partition of the written DataFrame
  ``spark.rowIndex``   0-based index of the row inside that partition
  ===================  ==========================================================

  A re-run of a batch from the same checkpoint replays the same input rows in the same
  partitions and order, so (queryId, batchId, partitionId, rowIndex) names a row exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiorocketmq.protocol.body_codec import CONTENT_TYPE_PROPERTY
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.javautil import java_string_hash
from aiorocketmq.protocol.message import Message

from .body_format import SinkPacker

__all__ = [
    "SinkColumns",
    "row_to_message",
    "dedup_key",
    "sharding_hint",
    "PROP_QUERY_ID",
    "PROP_BATCH_ID",
    "PROP_PARTITION_ID",
    "PROP_ROW_INDEX",
    "LINEAGE_PROPERTIES",
]

PROP_QUERY_ID = "spark.queryId"
PROP_BATCH_ID = "spark.batchId"
PROP_PARTITION_ID = "spark.partitionId"
PROP_ROW_INDEX = "spark.rowIndex"
LINEAGE_PROPERTIES = (PROP_QUERY_ID, PROP_BATCH_ID, PROP_PARTITION_ID, PROP_ROW_INDEX)

_STRING_COLUMNS = frozenset({"topic", "tags", "keys"})
_ALLOWED = frozenset({"body", "value", "topic", "tags", "keys", "properties", "queueId",
                      "delayLevel", "deliverTime"})
_INT_TYPES = frozenset({"int", "integer", "bigint", "long", "smallint", "short", "tinyint", "byte"})
_LONG_TYPES = frozenset({"bigint", "long"})


def sharding_hint(value: str | int, long: bool = False) -> int:
    """``abs(hashCode)`` of a sharding key as Java hashes it (``String``; ``Integer``, or
    ``Long`` when ``long``): ``mqs[hint % len(mqs)]`` is ``SelectMessageQueueByHash``'s
    queue."""
    if isinstance(value, str):
        h = java_string_hash(value)
    elif long:
        v = value & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        h = h - (1 << 32) if h >= (1 << 31) else h
    else:
        h = value  # Integer.hashCode
    return abs(h)
_SYSTEM_KEYS = MessageConst.SYSTEM_KEYS


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Which optional columns the DataFrame has, and the name of its body column."""

    body: str
    body_is_string: bool
    topic: bool
    tags: bool
    keys: bool
    properties: bool
    queue_id: bool
    delay_level: bool = False
    deliver_time: bool = False  # a deliverTime column (timestamp or epoch ms)
    sharding_key: str | None = None  # the shardingKeyColumn
    sharding_long: bool = False  # hashed as a Java Long (a bigint column)

    @classmethod
    def from_schema(cls, fields: Iterable[tuple[str, str]], *, topic_option: str | None,
                    packed: bool = False, sharding_key: str | None = None) -> SinkColumns:
        """Validate ``(name, simpleString type)`` pairs of the DataFrame to write.

        ``packed``: bodyFormat msgpack or json; columns that are not reserved are data.
        ``sharding_key``: the option shardingKeyColumn.

        Raises:
            MQClientError: no body/value column, both, a column of the wrong type, an
                unknown column, or neither a topic column nor the topic option; packed, a
                body or value column; a sharding key column that is missing, not a string
                or integer, or beside a queueId column.
        """
        all_types = {name: kind.lower() for name, kind in fields}
        if sharding_key is not None:
            kind = all_types.get(sharding_key)
            if kind is None:
                raise MQClientError(f"option shardingKeyColumn={sharding_key!r} names no column "
                                    f"of the DataFrame ({', '.join(all_types)})")
            if kind != "string" and kind not in _INT_TYPES:
                raise MQClientError(f"option shardingKeyColumn: column {sharding_key} must be a "
                                    f"string or an integer, not {kind}")
            if "queueId" in all_types:
                raise MQClientError("option shardingKeyColumn and a queueId column both pick the "
                                    "queue; drop one of them")
        types = {n: k for n, k in all_types.items() if n != sharding_key or n in _ALLOWED}
        if packed:
            given = sorted({"body", "value"} & types.keys())
            if given:
                raise MQClientError(
                    f"with bodyFormat msgpack or json the body is built from the other "
                    f"columns; drop the column(s) {', '.join(given)} or use bodyFormat=raw")
            types = {n: k for n, k in types.items() if n in _ALLOWED}
            body = ""
        else:
            unknown = sorted(set(types) - _ALLOWED)
            if unknown:
                raise MQClientError(
                    f"format 'rocketmq' cannot write column(s) {', '.join(unknown)}; "
                    f"columns: body|value (binary or string, required), topic, tags, keys "
                    f"(string), properties (map<string,string>), queueId, delayLevel (int), "
                    f"deliverTime (timestamp or epoch ms); "
                    f"or set bodyFormat=msgpack|json to pack columns into the body"
                )
            if ("body" in types) == ("value" in types):
                raise MQClientError("the DataFrame needs exactly one of the columns body and value")
            body = "body" if "body" in types else "value"
            if types[body] not in ("binary", "string"):
                raise MQClientError(f"column {body} must be binary or string, not {types[body]}")
        for name in _STRING_COLUMNS & types.keys():
            if types[name] != "string":
                raise MQClientError(f"column {name} must be string, not {types[name]}")
        if "properties" in types and types["properties"] != "map<string,string>":
            raise MQClientError(
                f"column properties must be map<string,string>, not {types['properties']}"
            )
        for name in ("queueId", "delayLevel"):
            if name in types and types[name] not in _INT_TYPES:
                raise MQClientError(f"column {name} must be an integer, not {types[name]}")
        if "deliverTime" in types and types["deliverTime"] not in _LONG_TYPES | {"timestamp"}:
            raise MQClientError(f"column deliverTime must be a timestamp or a bigint (epoch ms), "
                                f"not {types['deliverTime']}")
        if "topic" not in types and not topic_option:
            raise MQClientError("set the option topic or give the DataFrame a topic column")
        return cls(
            body=body,
            body_is_string=bool(body) and types[body] == "string",
            topic="topic" in types,
            tags="tags" in types,
            keys="keys" in types,
            properties="properties" in types,
            queue_id="queueId" in types,
            delay_level="delayLevel" in types,
            deliver_time="deliverTime" in types,
            sharding_key=sharding_key,
            sharding_long=sharding_key is not None and all_types[sharding_key] in _LONG_TYPES,
        )


def row_to_message(
    row: Mapping[str, Any],
    columns: SinkColumns,
    *,
    default_topic: str | None,
    lineage: Mapping[str, str],
    row_index: int,
    packer: SinkPacker | None = None,
) -> tuple[Message, int | None]:
    """One row -> the message to send and its queue hint (None: any queue; see the module
    docstring).

    Raises:
        MQClientError: null body or topic, a negative delay level, a system key among the
            row's properties, or (packed) a value the codec cannot represent.
    """
    if packer is not None:
        try:
            body = packer.pack(row)
        except MQClientError as exc:
            raise MQClientError(f"row {row_index}: {exc}") from exc
    else:
        body = row[columns.body]
        if body is None:
            raise MQClientError(f"row {row_index}: column {columns.body} is null")
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif not isinstance(body, bytes):
            body = bytes(body)
    topic = row["topic"] if columns.topic else None
    topic = topic or default_topic
    if not topic:
        raise MQClientError(f"row {row_index}: topic is null and the option topic is not set")
    props: dict[str, str] = {}
    if columns.properties:
        user = row["properties"]
        if user:
            items = user.items() if isinstance(user, Mapping) else user
            for name, value in items:
                if value is None:
                    continue
                if name in _SYSTEM_KEYS:
                    raise MQClientError(
                        f"row {row_index}: property {name!r} is a RocketMQ system key; "
                        f"use the tags / keys columns"
                    )
                props[name] = value
    props.update(lineage)
    props[PROP_ROW_INDEX] = str(row_index)
    if packer is not None:
        props[CONTENT_TYPE_PROPERTY] = packer.content_type
    msg = Message(
        topic,
        body,
        tags=row["tags"] if columns.tags else None,
        keys=row["keys"] if columns.keys else None,
        properties=props,
    )
    if columns.delay_level:
        level = row["delayLevel"]
        if level is not None:
            if level < 0:
                raise MQClientError(f"row {row_index}: delayLevel {level} must be >= 0 (0: none)")
            if level:
                msg.delay_time_level = int(level)
    if columns.deliver_time:
        when = row["deliverTime"]
        if when is not None:
            msg.deliver_time_ms = _epoch_ms(when, row_index)
    if columns.sharding_key is not None:
        key = row[columns.sharding_key]
        return msg, (sharding_hint(key, columns.sharding_long) if key is not None else None)
    queue_id = row["queueId"] if columns.queue_id else None
    return msg, (int(queue_id) if queue_id is not None else None)


def _epoch_ms(when: Any, row_index: int) -> int:
    """A deliverTime value (a ``datetime`` from a timestamp column, or epoch ms) in epoch ms."""
    if isinstance(when, datetime):
        # PySpark hands a timestamp over as a naive time in the worker's local zone
        # (TimestampType.fromInternal); .timestamp() reads it back in that zone.
        ms = round(when.timestamp() * 1000)
    elif isinstance(when, int) and not isinstance(when, bool):
        ms = when
    else:
        raise MQClientError(f"row {row_index}: deliverTime {when!r} is neither a timestamp nor "
                            f"epoch ms")
    if ms <= 0:
        raise MQClientError(f"row {row_index}: deliverTime {when!r} must be after the epoch "
                            f"(epoch ms > 0; null: deliver at once)")
    return ms


def dedup_key(properties: Mapping[str, str]) -> tuple[str, int, int, int] | None:
    """(queryId, batchId, partitionId, rowIndex) of a message the sink wrote, else None."""
    try:
        return (
            properties.get(PROP_QUERY_ID, ""),
            int(properties[PROP_BATCH_ID]),
            int(properties[PROP_PARTITION_ID]),
            int(properties[PROP_ROW_INDEX]),
        )
    except (KeyError, ValueError):
        return None
