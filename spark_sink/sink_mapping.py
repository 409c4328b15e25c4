"""Sink side: which DataFrame columns become which parts of a RocketMQ message.

Contract:

* ``SinkColumns.from_schema(fields)`` validates the DataFrame once, on the driver:
  ``body`` (binary or string; ``value`` is accepted instead, as in Spark's Kafka sink) is
  required; ``topic``, ``tags``, ``keys`` (strings), ``properties`` (map<string,string>) and
  ``queueId`` (int) are optional; any other column is refused, so a typo is not dropped
  silently. Without a ``topic`` column the ``topic`` option is required. With
  ``packed=True`` (bodyFormat msgpack or json) there is no body column (a body or value
  column is refused) and the other columns are the body's data (``body_format.SinkPacker``).
* ``row_to_message(row, ...)`` maps one row (a ``dict``) to ``(Message, queue_id | None)``;
  with a packer the body is the packed row and ``contentType`` says which codec.
  A null body, null topic, or a user property that is a RocketMQ system key raises
  ``MQClientError`` naming the row.
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
from typing import Any

from aiorocketmq.protocol.body_codec import CONTENT_TYPE_PROPERTY
from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.message import Message

from .body_format import SinkPacker

__all__ = [
    "SinkColumns",
    "row_to_message",
    "dedup_key",
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
_ALLOWED = frozenset({"body", "value", "topic", "tags", "keys", "properties", "queueId"})
_INT_TYPES = frozenset({"int", "integer", "bigint", "long", "smallint", "short", "tinyint", "byte"})
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

    @classmethod
    def from_schema(cls, fields: Iterable[tuple[str, str]], *, topic_option: str | None,
                    packed: bool = False) -> SinkColumns:
        """Validate ``(name, simpleString type)`` pairs of the DataFrame to write.

        ``packed``: bodyFormat msgpack or json; columns that are not reserved are data.

        Raises:
            MQClientError: no body/value column, both, a column of the wrong type, an
                unknown column, or neither a topic column nor the topic option; packed, a
                body or value column.
        """
        types = {name: kind.lower() for name, kind in fields}
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
                    f"(string), properties (map<string,string>), queueId (int); or set "
                    f"bodyFormat=msgpack|json to pack columns into the body"
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
        if "queueId" in types and types["queueId"] not in _INT_TYPES:
            raise MQClientError(f"column queueId must be an integer, not {types['queueId']}")
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
    """One row -> the message to send and the queue id it asks for (None: any queue).

    Raises:
        MQClientError: null body or topic, a system key among the row's properties, or
            (packed) a value the codec cannot represent.
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
    queue_id = row["queueId"] if columns.queue_id else None
    return msg, (int(queue_id) if queue_id is not None else None)


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
