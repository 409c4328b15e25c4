"""``bodyFormat``: rows packed into msgpack / JSON bodies (sink), bodies decoded into typed
columns (source).

Contract:

* ``bodyFormat`` is ``raw`` (default: the ``body`` column is the message body, as before),
  ``msgpack`` or ``json`` (``protocol.body_codec``; the sink sets the ``contentType``
  property, so ``Message.decode()`` reads what it wrote).
* Sink: with msgpack / json every column except the reserved ones (``RESERVED``: body,
  value, topic, tags, keys, properties, queueId, delayLevel, deliverTime) goes into the body as one map, column name
  -> value. ``SinkPacker`` is built from the DataFrame's schema (on the driver, which refuses
  types it cannot carry) and converts each value by its Spark type: struct -> map, array ->
  array, map -> map, binary -> bin (msgpack) / base64 string (JSON, as Spark's ``to_json``),
  timestamp -> msgpack Timestamp extension / ISO-8601 UTC string (JSON), timestamp_ntz ->
  ISO string without offset, date -> ISO date string, decimal -> its exact decimal string;
  null stays null.
* Source: with msgpack / json, ``bodySchema`` (a Spark DDL string, e.g.
  ``"id long, name string, amount double"``) is appended to the source's columns; Spark's
  own parser reads it when ``DataSource.schema()`` returns the DDL, and the readers get the
  parsed fields (``body_fields_json``) so executors never parse DDL. ``BodyDecoder`` turns a
  batch of bodies into one Arrow array per field: each body is decoded once (msgpack's and
  json's C decoders), the values that need it are converted back (ISO strings to
  timestamps and dates, decimal strings, base64 for JSON binary), and Arrow converts and
  checks each column in one call. Missing keys give null; extra keys are ignored.
* A row whose body does not decode, is not a map, or has a value that does not fit its
  field's type gets **null in every bodySchema column** (Spark's ``from_json`` PERMISSIVE
  mode); the ``body`` column keeps the bytes, so such rows stay findable. Each read task
  logs ``spark.body_undecodable`` once (count and first reason). This is not data loss, so
  ``failOnDataLoss`` does not apply.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal

from aiorocketmq.protocol import body_codec
from aiorocketmq.protocol.errors import MQClientError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructType

__all__ = ["BODY_FORMATS", "BodyFormat", "RESERVED", "SinkPacker", "BodyDecoder",
           "check_body_fields"]

BodyFormat = Literal["raw", "msgpack", "json"]
BODY_FORMATS: tuple[BodyFormat, ...] = ("raw", "msgpack", "json")
RESERVED = frozenset({"body", "value", "topic", "tags", "keys", "properties", "queueId",
                      "delayLevel", "deliverTime"})

Convert = Callable[[Any], Any]


class _Bad(Exception):
    """A value that does not fit its field (internal: the row's body columns become null)."""


# --- sink: Spark values -> codec values ---------------------------------------------------


def _sink_converter(dt: DataType, fmt: str, path: str) -> Convert | None:
    """How one Spark value becomes a codec value; None when it passes as it is."""
    from pyspark.sql import types as T

    if isinstance(dt, T.StructType):
        fields = [(f.name, _sink_converter(f.dataType, fmt, f"{path}.{f.name}"))
                  for f in dt.fields]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            get = v.asDict().get if hasattr(v, "asDict") else v.get
            return {n: (c(get(n)) if c else get(n)) for n, c in fields}
        return struct
    if isinstance(dt, T.ArrayType):
        elem = _sink_converter(dt.elementType, fmt, f"{path}[]")
        if elem is None:
            return lambda v: None if v is None else list(v)
        return lambda v: None if v is None else [elem(e) for e in v]
    if isinstance(dt, T.MapType):
        kc = _sink_converter(dt.keyType, fmt, f"{path}.key")
        vc = _sink_converter(dt.valueType, fmt, f"{path}.value")
        if kc is None and vc is None:
            return lambda v: None if v is None else dict(v)
        k_ = kc or (lambda x: x)
        v_ = vc or (lambda x: x)
        return lambda v: None if v is None else {k_(k): v_(x) for k, x in v.items()}
    if isinstance(dt, T.BinaryType):
        if fmt == "json":
            return lambda v: None if v is None else base64.b64encode(bytes(v)).decode("ascii")
        return lambda v: None if v is None else bytes(v)
    if isinstance(dt, T.TimestampNTZType):
        return lambda v: None if v is None else v.isoformat()
    if isinstance(dt, T.TimestampType):
        # PySpark hands TimestampType values over as naive local-time datetimes.
        if fmt == "json":
            return lambda v: None if v is None else v.astimezone(UTC).isoformat()
        return lambda v: None if v is None else v.astimezone(UTC)
    if isinstance(dt, T.DateType):
        return lambda v: None if v is None else v.isoformat()
    if isinstance(dt, T.DecimalType):
        return lambda v: None if v is None else str(v)
    if isinstance(dt, (T.StringType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType,
                       T.LongType, T.FloatType, T.DoubleType, T.NullType)):
        return None
    raise MQClientError(
        f"column {path} of type {dt.simpleString()} cannot be written with bodyFormat={fmt}; "
        f"supported: numbers, string, boolean, binary, date, timestamp, timestamp_ntz, "
        f"decimal, and arrays, maps and structs of them")


class SinkPacker:
    """The non-reserved columns of a row as one msgpack / JSON map (the message body).

    Built on the driver from the DataFrame's schema (refusing types it cannot carry) and
    pickled to the tasks.
    """

    def __init__(self, schema: StructType, fmt: BodyFormat) -> None:
        from pyspark.sql import types as T

        if fmt == "raw":
            raise ValueError("SinkPacker is for bodyFormat msgpack or json")
        self.format = fmt
        self.columns: tuple[str, ...] = tuple(f.name for f in schema.fields
                                              if f.name not in RESERVED)
        if not self.columns:
            raise MQClientError(
                f"bodyFormat={fmt} packs the columns other than "
                f"{', '.join(sorted(RESERVED))} into the body, and the DataFrame has none")
        data = T.StructType([f for f in schema.fields if f.name not in RESERVED])
        self._convert: Convert | None = _sink_converter(data, fmt, "row")  # checks the types
        self._data_json = data.json()

    def __getstate__(self) -> dict[str, Any]:
        # Converters are closures: each task rebuilds them once from the schema.
        return {"format": self.format, "columns": self.columns, "_data_json": self._data_json}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from pyspark.sql.types import StructType

        self.__dict__.update(state)
        data = StructType.fromJson(_json_loads(self._data_json))
        self._convert = _sink_converter(data, self.format, "row")

    def pack(self, row: Mapping[str, Any]) -> bytes:
        """The body for ``row`` (a dict of column -> value).

        Raises:
            MQClientError: a value the codec cannot represent (e.g. a NaN in JSON).
        """
        values: Any = {name: row[name] for name in self.columns}
        convert = self._convert
        if convert is not None:
            values = convert(values)
        return body_codec.encode_body(values, self.format)[0]

    @property
    def content_type(self) -> str:
        return body_codec.codec_for(self.format).content_type


# --- source: codec values -> Arrow columns -------------------------------------------------


def _to_datetime(v: Any) -> datetime:
    if isinstance(v, datetime):
        return v
    if isinstance(v, str):
        try:
            return datetime.fromisoformat(v)
        except ValueError:
            raise _Bad(f"{v!r} is not an ISO-8601 timestamp") from None
    raise _Bad(f"{type(v).__name__} is not a timestamp")


def _source_converter(dt: DataType, key: bool = False) -> Convert | None:
    """How one decoded value becomes what Arrow takes for ``dt``; None when Arrow takes it
    as decoded. Raises ``_Bad`` for a value that cannot fit."""
    from pyspark.sql import types as T

    if isinstance(dt, T.StructType):
        fields = [(f.name, _source_converter(f.dataType)) for f in dt.fields]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise _Bad(f"{type(v).__name__} where a map (struct) was expected")
            return {n: (c(v.get(n)) if c else v.get(n)) for n, c in fields}
        return struct
    if isinstance(dt, T.ArrayType):
        elem = _source_converter(dt.elementType)

        def array(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, list):
                raise _Bad(f"{type(v).__name__} where an array was expected")
            return v if elem is None else [elem(e) for e in v]
        return array
    if isinstance(dt, T.MapType):
        kc = _source_converter(dt.keyType, key=True)
        vc = _source_converter(dt.valueType)

        def map_(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise _Bad(f"{type(v).__name__} where a map was expected")
            if kc is None and vc is None:
                return v
            return [((kc(k) if kc else k), (vc(x) if vc else x)) for k, x in v.items()]
        return map_
    if isinstance(dt, T.BinaryType):
        def binary(v: Any) -> Any:
            if v is None or isinstance(v, bytes):
                return v
            if isinstance(v, str):  # JSON carries binary as base64 (Spark's to_json)
                try:
                    return base64.b64decode(v, validate=True)
                except binascii.Error:
                    raise _Bad("string is not base64") from None
            raise _Bad(f"{type(v).__name__} is not binary")
        return binary
    if isinstance(dt, T.TimestampNTZType):
        def ntz(v: Any) -> Any:
            if v is None:
                return None
            d = _to_datetime(v)
            return d.astimezone(UTC).replace(tzinfo=None) if d.tzinfo else d
        return ntz
    if isinstance(dt, T.TimestampType):
        def ts(v: Any) -> Any:
            if v is None:
                return None
            d = _to_datetime(v)
            return d if d.tzinfo else d.replace(tzinfo=UTC)
        return ts
    if isinstance(dt, T.DateType):
        def date_(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, datetime):
                return v.date()
            if isinstance(v, date):
                return v
            if isinstance(v, str):
                try:
                    return date.fromisoformat(v)
                except ValueError:
                    raise _Bad(f"{v!r} is not an ISO-8601 date") from None
            raise _Bad(f"{type(v).__name__} is not a date")
        return date_
    if isinstance(dt, T.DecimalType):
        def dec(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (str, int, float, Decimal)):
                raise _Bad(f"{type(v).__name__} is not a decimal")
            try:
                return Decimal(str(v))
            except InvalidOperation:
                raise _Bad(f"{v!r} is not a decimal") from None
        return dec
    if key and isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        def int_key(v: Any) -> Any:  # JSON object keys are strings
            if isinstance(v, str):
                try:
                    return int(v)
                except ValueError:
                    raise _Bad(f"map key {v!r} is not an integer") from None
            return v
        return int_key
    return None


def check_body_fields(schema: StructType, base_names: Sequence[str]) -> StructType:
    """The bodySchema fields of the source's full ``schema`` (after ``base_names``).

    Raises:
        MQClientError: the schema does not start with the source's columns, or a
            bodySchema field repeats a column name (Spark compares names case-insensitively).
    """
    from pyspark.sql import types as T

    names = [f.name for f in schema.fields]
    if [n.lower() for n in names[:len(base_names)]] != [n.lower() for n in base_names]:
        raise MQClientError(f"the schema of format 'rocketmq' must start with its columns "
                            f"{', '.join(base_names)}, got {', '.join(names)}")
    seen = {n.lower() for n in base_names}
    body = schema.fields[len(base_names):]
    if not body:
        raise MQClientError("option bodySchema names no field")
    for f in body:
        if f.name.lower() in seen:
            raise MQClientError(f"bodySchema field {f.name!r} repeats a column name of "
                                f"format 'rocketmq'; rename it (columns: {', '.join(names)})")
        seen.add(f.name.lower())
    return T.StructType(list(body))


class BodyDecoder:
    """Bodies -> one Arrow array per bodySchema field (see the module docstring)."""

    def __init__(self, fmt: BodyFormat, fields_json: str) -> None:
        from pyspark.sql.pandas.types import to_arrow_type
        from pyspark.sql.types import StructType

        struct = StructType.fromJson(_json_loads(fields_json))
        self.format = fmt
        self.names = [f.name for f in struct.fields]
        self.converters = [_source_converter(f.dataType) for f in struct.fields]
        self.types: list[pa.DataType] = [to_arrow_type(f.dataType, timezone="UTC")
                                         for f in struct.fields]
        self.undecodable = 0
        self.first_reason: str | None = None

    def arrow_fields(self) -> list[pa.Field]:
        import pyarrow as pa

        return [pa.field(n, t) for n, t in zip(self.names, self.types, strict=True)]

    def _bad(self, reason: str) -> None:
        if self.first_reason is None:
            self.first_reason = reason

    def columns(self, bodies: Sequence[bytes]) -> list[pa.Array]:
        """One array per field for ``bodies``; undecodable rows are null in all of them."""
        import pyarrow as pa

        names, converters, fmt = self.names, self.converters, self.format
        decode = body_codec.decode_body
        n = len(bodies)
        cols: list[list[Any]] = [[None] * n for _ in names]
        bad = [False] * n
        for i, body in enumerate(bodies):
            try:
                obj = decode(body, fmt)
            except body_codec.BodyDecodeError as exc:
                bad[i] = True
                self._bad(str(exc))
                continue
            if not isinstance(obj, dict):
                bad[i] = True
                self._bad(f"a {type(obj).__name__}, not a map")
                continue
            try:
                for j, name in enumerate(names):
                    value = obj.get(name)
                    conv = converters[j]
                    cols[j][i] = conv(value) if conv is not None and value is not None else value
            except _Bad as exc:
                bad[i] = True
                self._bad(f"field {names[j]}: {exc}")
                for col in cols:
                    col[i] = None
        arrays: list[pa.Array | None] = [None] * len(names)
        for j, (col, typ) in enumerate(zip(cols, self.types, strict=True)):
            try:
                arrays[j] = pa.array(col, type=typ)
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                # Only on this path: find the rows whose value Arrow refuses.
                for i, value in enumerate(col):
                    if value is None or bad[i]:
                        continue
                    try:
                        pa.array([value], type=typ)
                    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                        bad[i] = True
                        self._bad(f"field {names[j]}: {exc}")
        if any(bad):
            self.undecodable += sum(bad)
            for j, col in enumerate(cols):
                for i in range(n):
                    if bad[i]:
                        col[i] = None
                arrays[j] = pa.array(col, type=self.types[j])
        return [a for a in arrays if a is not None]


def _json_loads(text: str) -> Any:
    import json

    return json.loads(text)
