"""Options of the ``rocketmq`` Spark source and sink, validated once into immutable records.

Contract: ``parse_source_options(options, streaming=...)`` and ``parse_sink_options(options)``
take the option map Spark hands a DataSource (keys case-insensitive) and return a frozen
``SourceOptions`` / ``SinkOptions`` that everything downstream reads; anything invalid or
unknown raises ``MQClientError`` (a ``ValueError``) naming the option and the accepted
values, at query start on the driver rather than later in a task.

Option names follow Spark's Kafka source where the concept is the same (startingOffsets,
endingOffsets, startingTimestamp, endingTimestamp, startingOffsetsByTimestamp,
endingOffsetsByTimestamp, startingOffsetsByTimestampStrategy, assign, maxOffsetsPerTrigger,
minOffsetsPerTrigger, maxTriggerDelay, minPartitions, maxRecordsPerPartition,
failOnDataLoss, includeHeaders -> includeProperties). RocketMQ concepts keep RocketMQ's names
(nameServer, subExpression, expressionType, consumerGroup, producerGroup, pullBatchSize), and
so do the connection's: accessKey / secretKey (ACL) and tls, tlsVerify, tlsCaFile,
tlsCertFile, tlsKeyFile, tlsKeyPassword (``ClientConfig``'s use_tls, tls_verify, ...), on the
source and the sink alike. Kafka's subscribe is ``topic``, its subscribePattern
``topicPattern``, and its ``assign`` takes ``{"topic": {"brokerName": [queueId, ...]}}``; the
three are mutually exclusive. Timestamps (``startingTimestamp``, the ``...ByTimestamp`` maps
``{"topic": {"brokerName": {"queueId": ms}}}``) become offsets through the broker's
SEARCH_OFFSET_BY_TIMESTAMP (``source._Planner``); a queue the map does not name takes the
option's default (earliest / latest), as with ``startingOffsets``.
``expressionType`` is ``TAG`` (default: subExpression is ``"TagA || TagB"``) or ``SQL92``
(subExpression is an SQL92 selector over the message properties, checked here and
evaluated by brokers run with ``enablePropertyFilter=true``). ``bodyFormat`` /
``bodySchema`` are ours (``body_format``): bodySchema is required with bodyFormat msgpack or
json on the source and refused with raw; its DDL is parsed by Spark, not here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.protocol.acl import SessionCredentials
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.filter import FilterError, compile_sql92

from .body_format import BODY_FORMATS, BodyFormat
from .offsets import OffsetSpec, QueueKey, offsets_from_json, parse_offset_spec

__all__ = [
    "SourceOptions",
    "SinkOptions",
    "TlsOptions",
    "client_config",
    "parse_size_bytes",
    "parse_source_options",
    "parse_sink_options",
    "parse_duration_ms",
    "DEFAULT_READER_GROUP",
    "DEFAULT_PRODUCER_GROUP",
]

# Pulls need a group name even when no group is joined; the broker auto-creates it
# (docs/PROTOCOL.md 6.3) and nothing is stored under it because read() never commits.
DEFAULT_READER_GROUP = "spark-rocketmq-reader"
DEFAULT_PRODUCER_GROUP = "spark-rocketmq-writer"

_CONNECTION_KEYS = ("accessKey", "secretKey", "tls", "tlsVerify", "tlsCaFile", "tlsCertFile",
                    "tlsKeyFile", "tlsKeyPassword")
_SOURCE_KEYS = _CONNECTION_KEYS + (
    "nameServer", "topic", "topicPattern", "assign", "subExpression", "expressionType",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "endingOffsets", "endingTimestamp",
    "endingOffsetsByTimestamp", "maxOffsetsPerTrigger", "maxBytesPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition",
    "failOnDataLoss", "pullBatchSize", "pullTimeoutMs", "consumerGroup", "assignment",
    "commitOffsetsToGroup", "includeProperties", "bodyFormat", "bodySchema",
)
_SINK_KEYS = _CONNECTION_KEYS + ("nameServer", "topic", "producerGroup", "sendTimeoutMs",
                                 "async", "maxInFlight", "bodyFormat", "shardingKeyColumn")
# Options Spark itself puts in the map (load/save paths, writeStream's checkpoint).
_IGNORED_KEYS = frozenset({"path", "checkpointlocation", "queryname"})

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_DURATION_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|k|kb|m|mb|g|gb)?\s*$", re.IGNORECASE)
_SIZE_UNIT = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30,
              "gb": 1 << 30}


def parse_duration_ms(value: str, option: str) -> int:
    """``"500ms"``, ``"30s"``, ``"15m"``, ``"1h"`` or bare milliseconds -> milliseconds."""
    m = _DURATION.match(value)
    if m is None:
        raise MQClientError(
            f"option {option}={value!r} is not a duration (e.g. '500ms', '30s', '15m', '1h')"
        )
    return int(m.group(1)) * _DURATION_UNIT_MS[(m.group(2) or "ms").lower()]


def parse_size_bytes(value: str, option: str) -> int:
    """``"1048576"``, ``"512k"``, ``"10m"``, ``"1g"`` (binary units, as Spark's byte sizes)
    -> bytes, at least 1."""
    m = _SIZE.match(value)
    if m is None or int(m.group(1)) == 0:
        raise MQClientError(
            f"option {option}={value!r} is not a positive size in bytes (e.g. '1048576', "
            f"'512k', '10m', '1g')")
    return int(m.group(1)) * _SIZE_UNIT[(m.group(2) or "b").lower()]


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """``tls=true`` and its trust options (``ClientConfig``'s ``tls_*``): verify the
    brokers' and nameservers' certificates against ``ca_file`` (or the system store) when
    ``verify``, present ``cert_file`` / ``key_file`` when given. Paths are read where the
    connection is made: on the driver and on every executor."""

    verify: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)


def client_config(name_server: str | None = None, *, credentials: SessionCredentials | None,
                  tls: TlsOptions | None, **settings: Any) -> ClientConfig:
    """The ``ClientConfig`` of the connector's connections: ACL credentials, TLS, and
    ``settings`` (``ClientConfig``'s own keywords)."""
    if name_server is not None:
        settings["namesrv_addr"] = name_server
    if credentials is not None:
        settings.update(access_key=credentials.access_key, secret_key=credentials.secret_key)
    if tls is not None:
        settings.update(use_tls=True, tls_verify=tls.verify, tls_ca_file=tls.ca_file,
                        tls_cert_file=tls.cert_file, tls_key_file=tls.key_file,
                        tls_key_password=tls.key_password)
    return ClientConfig(**settings)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Validated source options; see the module docstring of ``spark_sink`` for each one."""

    name_server: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    sub_expression: str
    starting_offsets: OffsetSpec
    starting_timestamp_ms: int | None
    ending_offsets: OffsetSpec
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    fail_on_data_loss: bool
    pull_batch_size: int
    pull_timeout_ms: int
    consumer_group: str | None
    assignment: Literal["all", "group"]
    commit_offsets_to_group: bool
    include_properties: bool
    body_format: BodyFormat = "raw"
    body_schema: str | None = None  # the bodySchema DDL, as given
    body_fields_json: str | None = None  # bodySchema as Spark parsed it (set by the readers)
    expression_type: str = "TAG"  # of sub_expression: TAG or SQL92
    # accessKey / secretKey: ACL signing (protocol/acl.py); the secret is never in a repr
    credentials: SessionCredentials | None = None
    tls: TlsOptions | None = None  # tls=true and its trust options
    assign: tuple[QueueKey, ...] | None = None  # the queues named by ``assign``, sorted
    # startingOffsetsByTimestamp / endingOffsetsByTimestamp: ms per queue, sorted by queue
    starting_timestamps: tuple[tuple[QueueKey, int], ...] | None = None
    ending_timestamp_ms: int | None = None
    ending_timestamps: tuple[tuple[QueueKey, int], ...] | None = None
    # startingOffsetsByTimestampStrategy: a queue with nothing stored at or after its
    # starting timestamp fails the query (error) or starts at its max offset (latest)
    starting_timestamp_strategy: Literal["error", "latest"] = "error"
    max_records_per_partition: int | None = None
    max_bytes_per_trigger: int | None = None

    @property
    def reader_group(self) -> str:
        """Group name put in PULL_MESSAGE headers."""
        return self.consumer_group or DEFAULT_READER_GROUP

    def client_config(self, **settings: Any) -> ClientConfig:
        """``ClientConfig`` with this query's nameserver, credentials and TLS."""
        return client_config(self.name_server, credentials=self.credentials, tls=self.tls,
                             **settings)


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Validated sink options."""

    name_server: str
    topic: str | None
    producer_group: str
    send_timeout_ms: int
    async_send: bool
    max_in_flight: int
    body_format: BodyFormat = "raw"
    credentials: SessionCredentials | None = None  # accessKey / secretKey
    tls: TlsOptions | None = None
    sharding_key_column: str | None = None  # rows with one value go to one queue, in order

    def client_config(self, **settings: Any) -> ClientConfig:
        """``ClientConfig`` with this sink's credentials and TLS (the producer takes the
        nameserver itself)."""
        return client_config(credentials=self.credentials, tls=self.tls, **settings)


class _Reader:
    """Case-insensitive access to the option map that remembers what was read."""

    __slots__ = ("_values", "_known")

    def __init__(self, options: Mapping[str, str], known: tuple[str, ...]) -> None:
        canonical = {k.lower(): k for k in known}
        self._known = known
        self._values: dict[str, str] = {}
        for key, value in options.items():
            low = key.lower()
            if low in _IGNORED_KEYS:
                continue
            if low not in canonical:
                raise MQClientError(
                    f"unknown option {key!r} for format 'rocketmq'; known options: "
                    f"{', '.join(known)}"
                )
            self._values[canonical[low]] = value

    def get(self, name: str) -> str | None:
        value = self._values.get(name)
        if value is None:
            return None
        value = value.strip()
        return value or None

    def require(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise MQClientError(f"option {name} is required for format 'rocketmq'")
        return value

    def int(self, name: str, default: int | None, *, minimum: int = 0) -> int | None:
        raw = self.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise MQClientError(f"option {name}={raw!r} is not an integer") from None
        if value < minimum:
            raise MQClientError(f"option {name}={value} must be >= {minimum}")
        return value

    def body_format(self) -> BodyFormat:
        raw = (self.get("bodyFormat") or "raw").lower()
        for fmt in BODY_FORMATS:
            if raw == fmt:
                return fmt
        raise MQClientError(f"option bodyFormat={raw!r} must be one of {', '.join(BODY_FORMATS)}")

    def bool(self, name: str, default: bool) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        low = raw.lower()
        if low not in ("true", "false"):
            raise MQClientError(f"option {name}={raw!r} must be 'true' or 'false'")
        return low == "true"


def _credentials(r: _Reader) -> SessionCredentials | None:
    """``accessKey`` and ``secretKey`` (both or neither): every request is then signed."""
    ak, sk = r.get("accessKey"), r.get("secretKey")
    if ak is None and sk is None:
        return None
    if not ak or not sk:
        raise MQClientError("options accessKey and secretKey go together (one is missing)")
    return SessionCredentials(ak, sk)


def _tls(r: _Reader) -> TlsOptions | None:
    """``tls=true`` and the trust options, which need it."""
    use_tls = r.bool("tls", False)
    given = [name for name in ("tlsVerify", "tlsCaFile", "tlsCertFile", "tlsKeyFile",
                               "tlsKeyPassword") if r.get(name) is not None]
    if not use_tls:
        if given:
            raise MQClientError(f"option {given[0]} needs the option tls=true")
        return None
    cert, key = r.get("tlsCertFile"), r.get("tlsKeyFile")
    if (key is not None or r.get("tlsKeyPassword") is not None) and cert is None:
        raise MQClientError("options tlsKeyFile / tlsKeyPassword need the option tlsCertFile")
    return TlsOptions(verify=r.bool("tlsVerify", False), ca_file=r.get("tlsCaFile"),
                      cert_file=cert, key_file=key, key_password=r.get("tlsKeyPassword"))


def _assign(raw: str) -> tuple[QueueKey, ...]:
    """``assign``: ``{"topic": {"brokerName": [queueId, ...]}}`` -> the queues, sorted."""
    usage = 'a JSON object {"topic": {"brokerName": [queueId, ...]}}'
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise MQClientError(f"option assign is not JSON ({exc}); expected {usage}") from None
    if not isinstance(obj, dict) or not obj:
        raise MQClientError(f"option assign={raw!r} names no queue; expected {usage}")
    out: set[QueueKey] = set()
    for topic, brokers in obj.items():
        if not isinstance(brokers, dict) or not brokers:
            raise MQClientError(f"option assign: topic {topic!r} must map broker names to lists "
                                f"of queue ids; expected {usage}")
        for broker, ids in brokers.items():
            if (not isinstance(ids, list) or not ids
                    or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids)):
                raise MQClientError(f"option assign: {topic}/{broker} must be a non-empty list of "
                                    f"queue ids (ints >= 0), not {ids!r}")
            out.update(QueueKey(str(topic), str(broker), i) for i in ids)
    return tuple(sorted(out))


def _timestamps(r: _Reader, option: str) -> tuple[tuple[QueueKey, int], ...] | None:
    """A ``{"topic": {"brokerName": {"queueId": ms}}}`` option, or None."""
    raw = r.get(option)
    if raw is None:
        return None
    stamps = offsets_from_json(raw, f"option {option}")
    if not stamps:
        raise MQClientError(f"option {option} names no queue")
    for key, ms in stamps.items():
        if ms < 0:
            raise MQClientError(f"option {option}: timestamp {ms} of queue {key} must be >= 0 "
                                f"(ms since the epoch)")
    return tuple(sorted(stamps.items()))


def _one_of(r: _Reader, names: tuple[str, ...]) -> None:
    given = [n for n in names if r.get(n) is not None]
    if len(given) > 1:
        raise MQClientError(f"set at most one of the options {', '.join(names)} "
                            f"(got {' and '.join(given)})")


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate the options of ``spark.read(Stream).format("rocketmq")``.

    Args:
        options: Spark's option map (case-insensitive keys).
        streaming: True for readStream; endingOffsets is then refused (as Kafka's source),
            and startingOffsets defaults to ``latest`` (``earliest`` for a batch read).

    Raises:
        MQClientError: a missing, unknown, malformed or contradictory option.
    """
    r = _Reader(options, _SOURCE_KEYS)
    name_server = r.require("nameServer")
    topic = r.get("topic")
    pattern = r.get("topicPattern")
    assign_raw = r.get("assign")
    if sum(v is not None for v in (topic, pattern, assign_raw)) != 1:
        raise MQClientError("exactly one of the options topic, topicPattern and assign must be "
                            "set")
    topics: tuple[str, ...] = ()
    assign = _assign(assign_raw) if assign_raw is not None else None
    if assign is not None:
        topics = tuple(sorted({q.topic for q in assign}))
    if topic is not None:
        topics = tuple(sorted({t.strip() for t in topic.split(",") if t.strip()}))
        if not topics:
            raise MQClientError(f"option topic={topic!r} names no topic")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise MQClientError(f"option topicPattern={pattern!r} is not a regex: {exc}") from None

    _one_of(r, ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp"))
    starting_raw = r.get("startingOffsets")
    timestamp = r.int("startingTimestamp", None)
    starting_timestamps = _timestamps(r, "startingOffsetsByTimestamp")
    strategy = (r.get("startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise MQClientError(f"option startingOffsetsByTimestampStrategy="
                            f"{r.get('startingOffsetsByTimestampStrategy')!r} must be 'error' or "
                            f"'latest'")
    starting = parse_offset_spec(
        starting_raw or ("latest" if streaming else "earliest"), "startingOffsets"
    )
    _one_of(r, ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"))
    ending_raw = r.get("endingOffsets")
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if streaming and r.get(name) is not None:
            raise MQClientError(f"option {name} is for batch queries (spark.read) only")
    ending = parse_offset_spec(ending_raw or "latest", "endingOffsets")
    if ending.kind == "earliest":
        raise MQClientError("option endingOffsets cannot be 'earliest'")
    ending_timestamp = r.int("endingTimestamp", None)
    ending_timestamps = _timestamps(r, "endingOffsetsByTimestamp")
    if timestamp is not None and ending_timestamp is not None and timestamp > ending_timestamp:
        raise MQClientError(f"option startingTimestamp={timestamp} is after "
                            f"endingTimestamp={ending_timestamp}")
    if topic is not None or assign is not None:
        for name, stamps in (("startingOffsetsByTimestamp", starting_timestamps),
                             ("endingOffsetsByTimestamp", ending_timestamps)):
            other = sorted({q.topic for q, _ in stamps or ()} - set(topics))
            if other:
                raise MQClientError(f"option {name} names topic {other[0]}, which the query "
                                    f"does not read")

    max_per_trigger = r.int("maxOffsetsPerTrigger", None, minimum=1)
    max_bytes_raw = r.get("maxBytesPerTrigger")
    max_bytes = (parse_size_bytes(max_bytes_raw, "maxBytesPerTrigger")
                 if max_bytes_raw is not None else None)
    min_per_trigger = r.int("minOffsetsPerTrigger", None, minimum=1)
    if (max_per_trigger is not None and min_per_trigger is not None
            and min_per_trigger > max_per_trigger):
        raise MQClientError(
            f"minOffsetsPerTrigger={min_per_trigger} is above "
            f"maxOffsetsPerTrigger={max_per_trigger}"
        )
    delay_raw = r.get("maxTriggerDelay")
    max_delay_ms = parse_duration_ms(delay_raw, "maxTriggerDelay") if delay_raw else 15 * 60_000

    group = r.get("consumerGroup")
    assignment = (r.get("assignment") or "all").lower()
    if assignment not in ("all", "group"):
        raise MQClientError(f"option assignment={assignment!r} must be 'all' or 'group'")
    if assignment == "group" and group is None:
        raise MQClientError("option assignment=group needs the option consumerGroup")
    if assignment == "group" and not streaming:
        raise MQClientError("option assignment=group is for streaming queries only")
    if assignment == "group" and assign is not None:
        raise MQClientError("option assign names the queues itself; it does not go with "
                            "assignment=group")
    commit_to_group = r.bool("commitOffsetsToGroup", group is not None)
    if commit_to_group and group is None:
        raise MQClientError("option commitOffsetsToGroup=true needs the option consumerGroup")
    body_format = r.body_format()
    body_schema = r.get("bodySchema")
    if body_format != "raw" and body_schema is None:
        raise MQClientError(f"option bodyFormat={body_format} needs the option bodySchema, a "
                            f"Spark DDL string such as 'id long, name string, amount double'")
    if body_format == "raw" and body_schema is not None:
        raise MQClientError("option bodySchema needs the option bodyFormat=msgpack or json")

    sub_expression = r.get("subExpression") or "*"
    expression_type = (r.get("expressionType") or "TAG").upper()
    if expression_type not in ("TAG", "SQL92"):
        raise MQClientError(f"option expressionType={r.get('expressionType')!r} must be 'TAG' or "
                            f"'SQL92'")
    if expression_type == "SQL92":
        if r.get("subExpression") is None:
            raise MQClientError("option expressionType=SQL92 needs the option subExpression, an "
                                "SQL92 selector such as \"a > 5 AND TAGS IN ('TagA')\"")
        try:
            compile_sql92(sub_expression)
        except FilterError as exc:
            raise MQClientError(f"option subExpression={sub_expression!r} is not a valid SQL92 "
                                f"selector: {exc.remark}") from exc

    return SourceOptions(
        credentials=_credentials(r),
        tls=_tls(r),
        assign=assign,
        starting_timestamps=starting_timestamps,
        ending_timestamp_ms=ending_timestamp,
        ending_timestamps=ending_timestamps,
        starting_timestamp_strategy="latest" if strategy == "latest" else "error",
        max_records_per_partition=r.int("maxRecordsPerPartition", None, minimum=1),
        max_bytes_per_trigger=max_bytes,
        name_server=name_server,
        topics=topics,
        topic_pattern=pattern,
        sub_expression=sub_expression,
        expression_type=expression_type,
        starting_offsets=starting,
        starting_timestamp_ms=timestamp,
        ending_offsets=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay_ms,
        min_partitions=r.int("minPartitions", None, minimum=1),
        fail_on_data_loss=r.bool("failOnDataLoss", True),
        pull_batch_size=r.int("pullBatchSize", 32, minimum=1) or 32,
        pull_timeout_ms=r.int("pullTimeoutMs", 10_000, minimum=1) or 10_000,
        consumer_group=group,
        assignment="group" if assignment == "group" else "all",
        commit_offsets_to_group=commit_to_group,
        include_properties=r.bool("includeProperties", False),
        body_format=body_format,
        body_schema=body_schema,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of ``df.write(Stream).format("rocketmq")``.

    Raises:
        MQClientError: a missing, unknown or malformed option.
    """
    r = _Reader(options, _SINK_KEYS)
    return SinkOptions(
        credentials=_credentials(r),
        tls=_tls(r),
        sharding_key_column=r.get("shardingKeyColumn"),
        name_server=r.require("nameServer"),
        topic=r.get("topic"),
        producer_group=r.get("producerGroup") or DEFAULT_PRODUCER_GROUP,
        send_timeout_ms=r.int("sendTimeoutMs", 3000, minimum=1) or 3000,
        async_send=r.bool("async", False),
        max_in_flight=r.int("maxInFlight", 256, minimum=1) or 256,
        body_format=r.body_format(),
    )
