"""The source's schema and the conversion of pulled messages into rows and Arrow batches.

Contract:

* ``source_schema(include_properties)`` is the DDL of the DataFrame
  ``spark.read(Stream).format("rocketmq")`` returns:
  ``topic string, brokerName string, queueId int, queueOffset long, msgId string,
  tags string, keys string, body binary, bornTimestamp timestamp, storeTimestamp timestamp,
  bornHost string, reconsumeTimes int`` and, with includeProperties, ``properties
  map<string,string>``; with bodyFormat msgpack or json, bodySchema's fields follow
  (``body_format``: decoded per Arrow batch by ``BodyDecoder``; ``body`` stays).
* ``RowBatchBuilder`` collects ``MessageExt`` objects column by column and hands out one
  ``pyarrow.RecordBatch`` per ``flush()``: one Arrow batch per few thousand messages is
  what makes the Python data source fast (Spark converts it without a Python object per
  cell). The source itself reads pull bodies straight into columns (``columnar``), with
  this class as its fallback and reference. ``message_to_tuple`` is the row-at-a-time
  equivalent, kept for tests and callers that want tuples. ``with_body_fields`` appends
  bodySchema's columns to a batch.
* ``msgId`` is the client-visible id (UNIQ_KEY when the producer set one, else the
  broker's offset message id, docs/PROTOCOL.md 5.4); ``keys`` is the raw ``KEYS`` property
  (space-separated); ``properties`` is every property, system ones included.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiorocketmq.protocol.codes import MessageConst
from aiorocketmq.protocol.message import MessageExt

if TYPE_CHECKING:
    import pyarrow as pa

    from .body_format import BodyDecoder

__all__ = ["SOURCE_COLUMNS", "source_columns", "source_schema", "message_to_tuple",
           "RowBatchBuilder", "arrow_schema", "with_body_fields", "ARROW_BATCH_ROWS"]

SOURCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("topic", "string"),
    ("brokerName", "string"),
    ("queueId", "int"),
    ("queueOffset", "long"),
    ("msgId", "string"),
    ("tags", "string"),
    ("keys", "string"),
    ("body", "binary"),
    ("bornTimestamp", "timestamp"),
    ("storeTimestamp", "timestamp"),
    ("bornHost", "string"),
    ("reconsumeTimes", "int"),
)
_PROPERTIES_COLUMN = ("properties", "map<string,string>")

# Rows per Arrow batch: large enough to amortise the per-batch cost in Spark's worker,
# small enough that a batch of 4 MiB bodies stays a bounded allocation.
ARROW_BATCH_ROWS = 4096

_TAGS = MessageConst.PROPERTY_TAGS
_KEYS = MessageConst.PROPERTY_KEYS


def source_columns(include_properties: bool) -> tuple[str, ...]:
    """The names of the source's own columns (before any bodySchema fields)."""
    cols = SOURCE_COLUMNS + ((_PROPERTIES_COLUMN,) if include_properties else ())
    return tuple(name for name, _ in cols)


def source_schema(include_properties: bool, body_schema: str | None = None) -> str:
    """The DDL string of the source's schema; ``body_schema`` (DDL) is appended as given,
    for Spark's parser to read."""
    cols = SOURCE_COLUMNS + ((_PROPERTIES_COLUMN,) if include_properties else ())
    ddl = ", ".join(f"{name} {kind}" for name, kind in cols)
    return f"{ddl}, {body_schema}" if body_schema else ddl


def _ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def message_to_tuple(msg: MessageExt, broker_name: str, include_properties: bool) -> tuple[Any, ...]:
    """One row, in ``source_schema`` column order."""
    props = msg.properties
    row: tuple[Any, ...] = (
        msg.topic, broker_name, msg.queue_id, msg.queue_offset, msg.msg_id,
        props.get(_TAGS), props.get(_KEYS), bytes(msg.body), _ts(msg.born_timestamp),
        _ts(msg.store_timestamp), msg.born_host, msg.reconsume_times,
    )
    if include_properties:
        row += (dict(props),)
    return row


def arrow_schema(include_properties: bool) -> pa.Schema:
    """The Arrow schema matching ``source_schema`` (timestamps as UTC microseconds)."""
    import pyarrow as pa

    fields = [
        pa.field("topic", pa.string()),
        pa.field("brokerName", pa.string()),
        pa.field("queueId", pa.int32()),
        pa.field("queueOffset", pa.int64()),
        pa.field("msgId", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("bornTimestamp", pa.timestamp("us", tz="UTC")),
        pa.field("storeTimestamp", pa.timestamp("us", tz="UTC")),
        pa.field("bornHost", pa.string()),
        pa.field("reconsumeTimes", pa.int32()),
    ]
    if include_properties:
        fields.append(pa.field("properties", pa.map_(pa.string(), pa.string())))
    return pa.schema(fields)


def with_body_fields(batch: pa.RecordBatch, body: BodyDecoder) -> pa.RecordBatch:
    """``batch`` (``arrow_schema`` columns) with the bodySchema fields decoded from its
    ``body`` column appended."""
    import pyarrow as pa

    arrays = list(batch.columns) + body.columns(batch.column("body").to_pylist())
    return pa.RecordBatch.from_arrays(arrays,
                                      schema=pa.schema(list(batch.schema) + body.arrow_fields()))


class RowBatchBuilder:
    """Column lists for one Arrow batch; ``add`` per message, ``flush`` per batch.

    With a ``BodyDecoder`` the bodies are also decoded into its fields' columns at flush.
    """

    __slots__ = ("_broker_name", "_include_properties", "_schema", "_base", "_cols", "rows",
                 "_body")

    def __init__(self, broker_name: str, include_properties: bool,
                 body: BodyDecoder | None = None) -> None:
        self._broker_name = broker_name
        self._include_properties = include_properties
        base = arrow_schema(include_properties)
        self._base = base
        self._schema = base
        if body is not None:
            import pyarrow as pa

            self._schema = pa.schema(list(base) + body.arrow_fields())
        self._body = body
        self._cols: list[list[Any]] = [[] for _ in base]
        self.rows = 0

    def add(self, msg: MessageExt) -> None:
        cols = self._cols
        props = msg.properties
        cols[0].append(msg.topic)
        cols[2].append(msg.queue_id)
        cols[3].append(msg.queue_offset)
        cols[4].append(msg.msg_id)
        cols[5].append(props.get(_TAGS))
        cols[6].append(props.get(_KEYS))
        cols[7].append(msg.body)
        cols[8].append(msg.born_timestamp * 1000)
        cols[9].append(msg.store_timestamp * 1000)
        cols[10].append(msg.born_host)
        cols[11].append(msg.reconsume_times)
        if self._include_properties:
            cols[12].append(list(props.items()))
        self.rows += 1

    def flush(self) -> pa.RecordBatch:
        """The collected rows as one RecordBatch; the builder is empty afterwards."""
        import pyarrow as pa

        n = self.rows
        cols = self._cols
        cols[1] = [self._broker_name] * n
        arrays = [pa.array(col, type=f.type) for col, f in zip(cols, self._base, strict=True)]
        if self._body is not None:
            arrays += self._body.columns(cols[7])
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._cols = [[] for _ in self._base]
        self.rows = 0
        return batch
