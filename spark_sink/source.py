"""The ``rocketmq`` source: streaming (``readStream``) and batch (``read``) readers.

Contract (PySpark Python Data Source API, ``pyspark.sql.datasource``):

* Driver side, ``RocketMQStreamReader`` plans micro-batches: ``initialOffset`` resolves
  startingOffsets / startingTimestamp / startingOffsetsByTimestamp per queue (times through
  SEARCH_OFFSET_BY_TIMESTAMP; a queue with nothing stored at or after its time fails the
  query, or starts at its max offset with startingOffsetsByTimestampStrategy=latest);
  ``latestOffset(start, limit)`` looks the topics' routes up again (new queues join, a
  vanished broker is reported), reads max offsets, applies the read limit
  (maxOffsetsPerTrigger split by backlog; maxBytesPerTrigger, Spark's ``ReadMaxBytes``,
  with each queue's bytes per offset sampled by one pull at its start; minOffsetsPerTrigger
  + maxTriggerDelay; the AvailableNow target) and returns the end offsets;
  ``partitions(start, end)`` cuts ``[start, end)`` per queue (maxRecordsPerPartition,
  minPartitions). With ``assign`` only the queues it names are read, and a named queue
  missing from the route at the start fails the query.
  With commitOffsetsToGroup the finished offsets go to the consumer group as soon as the
  reader learns of them: in ``latestOffset(start, ...)``, whose ``start`` is the end of the
  last finished batch (Spark calls ``commit(end)`` only when it plans the next batch, so
  the last batch of an AvailableNow run would never be committed), and in ``commit``.
  Queues of a broker that left the route keep their offsets and are reported once
  (failOnDataLoss=false) or fail the query naming the broker; queues of a broker still in
  the route that does not answer (it is stopping, or hung) stay where they are for that
  trigger and the broker is logged once (``spark.broker_unreachable``). With ``assignment=group``
  the driver heartbeats as a CONSUME_ACTIVELY member of consumerGroup and takes only its
  AllocateMessageQueueAveragely share of the queues, so several queries share a topic.
* ``RocketMQBatchReader`` reads startingOffsets (or a starting time) to endingOffsets /
  endingTimestamp / endingOffsetsByTimestamp (a queue with nothing stored at or after its
  ending time is read to its max offset).
  When Spark plans the read with filter pushdown (``spark.sql.python.filterPushdown.enabled``)
  ``RocketMQDataSource.reader`` hands it ``RocketMQPushdownReader``, whose ``pushFilters``
  narrows the queues, offsets and tags pulled (``pushdown``); otherwise the plain reader,
  since PySpark refuses a reader with ``pushFilters`` while the setting is off.
* Executor side, ``read(partition)`` opens its own ``BlockingLink``, pulls exactly the
  partition's ``[start, end)`` (no commits, no group membership: replay is exact) and
  yields one ``pyarrow.RecordBatch`` per range reader chunk (``rows.ARROW_BATCH_ROWS``
  offsets, or 8 MiB of pulled records), decoded straight from the pull bodies
  (``columnar``) while the next chunk is being pulled; with
  bodyFormat msgpack or json their bodies are decoded into bodySchema's columns
  (``body_format``; undecodable rows get nulls and one ``spark.body_undecodable`` line).
* ``schema()`` appends the bodySchema DDL to the source's, so Spark's own parser reads it;
  ``reader`` / ``streamReader`` take the parsed fields from the schema Spark hands them
  and ship them to executors as JSON (no DDL parsing outside Spark).
* Partitions and readers pickle: the driver's link is opened lazily and never pickled.

Offsets are ``offsets.offsets_to_json`` maps. New queues (a topic gained queues, or a
topicPattern matched a new topic) enter the offsets at their starting point in the batch
that discovers them and are read from the next batch on: from the earliest offset with
``assignment=all`` (as Kafka reads new partitions), and with ``assignment=group`` from the
group's committed offset when it is above 0, else per startingOffsets.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.acl import SessionCredentials
from aiorocketmq.protocol.bodies import build_subscription_data
from aiorocketmq.protocol.errors import MQBrokerError, MQClientError, RemotingError

from .body_format import BodyDecoder, BodyFormat, check_body_fields
from .columnar import ColumnarDecoder
from .link import BlockingLink, RangeReader, RocketMQLink, RouteView
from .offsets import (
    EARLIEST,
    LATEST,
    DataLossError,
    Offsets,
    QueueKey,
    offsets_from_json,
    offsets_to_json,
    resolve_spec,
)
from .options import SourceOptions, TlsOptions, parse_sink_options, parse_source_options
from .planning import QueueRange, backlog, byte_limit, plan_ranges, rate_limit, should_wait
from .pullwire import StreamRangeReader
from .pushdown import Pushdown, push_filters
from .rows import source_columns, source_schema, with_body_fields

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["RocketMQDataSource", "RocketMQStreamReader", "RocketMQBatchReader",
           "RocketMQPushdownReader", "QueueRangePartition", "ReadSettings", "read_partition"]

log = get_logger("aiorocketmq.spark")


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What an executor needs to read a partition (pickled with each partition)."""

    name_server: str
    group: str
    sub_expression: str
    pull_batch_size: int
    pull_timeout_ms: int
    fail_on_data_loss: bool
    include_properties: bool
    body_format: BodyFormat = "raw"
    body_fields_json: str | None = None
    expression_type: str = "TAG"
    credentials: SessionCredentials | None = None  # pickled; its repr hides the secret
    tls: TlsOptions | None = None  # likewise the key password

    @classmethod
    def of(cls, opts: SourceOptions) -> ReadSettings:
        return cls(opts.name_server, opts.reader_group, opts.sub_expression,
                   opts.pull_batch_size, opts.pull_timeout_ms, opts.fail_on_data_loss,
                   opts.include_properties, opts.body_format, opts.body_fields_json,
                   opts.expression_type, opts.credentials, opts.tls)


class QueueRangePartition(InputPartition):
    """Offsets ``[start, end)`` of one queue, and the broker address planned for it."""

    def __init__(self, queue: QueueKey, broker_addr: str, start: int, end: int,
                 settings: ReadSettings) -> None:
        self.queue = queue
        self.broker_addr = broker_addr
        self.start = start
        self.end = end
        self.settings = settings


def read_partition(partition: QueueRangePartition) -> Iterator[pa.RecordBatch]:
    """Pull the partition's range and yield it as Arrow batches (executor side).

    The bodies go straight into Arrow columns (``columnar``); the next chunk is being
    pulled while this one is decoded and handed to Spark.
    """
    s = partition.settings
    key = partition.queue
    with BlockingLink(s.name_server, timeout_ms=s.pull_timeout_ms,
                      credentials=s.credentials, tls=s.tls) as blocking:
        reader = blocking.run(blocking.link.range_reader(
            partition.broker_addr, key, partition.start, partition.end, group=s.group,
            sub_expression=s.sub_expression, batch=s.pull_batch_size,
            fail_on_data_loss=s.fail_on_data_loss, expression_type=s.expression_type))
        tags = build_subscription_data(key.topic, s.sub_expression, s.expression_type).tags_set
        columnar = ColumnarDecoder(key.broker_name, s.include_properties,
                                   frozenset(tags) if tags else None)
        decoder = (BodyDecoder(s.body_format, s.body_fields_json)
                   if s.body_format != "raw" and s.body_fields_json else None)
        pending = blocking.submit(reader.next())
        try:
            while (windows := pending.result()) is not None:
                pending = blocking.submit(reader.next())
                batch = columnar.decode(windows)
                if batch is not None:
                    yield batch if decoder is None else with_body_fields(batch, decoder)
        finally:
            pending.cancel()
            blocking.run(_close_reader(reader))
        if decoder is not None and decoder.undecodable:
            log.warning("spark.body_undecodable", queue=str(key), start=partition.start,
                        end=partition.end, rows=decoder.undecodable, format=s.body_format,
                        first_reason=decoder.first_reason)


async def _close_reader(reader: RangeReader | StreamRangeReader) -> None:
    reader.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Planner:
    """Driver-side RocketMQ lookups shared by the batch and streaming readers."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.view: RouteView | None = None
        self._blocking: BlockingLink | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles readers to its Python workers: the link stays on this side.
        return {"opts": self.opts, "view": self.view, "_blocking": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def blocking(self) -> BlockingLink:
        if self._blocking is None:
            self._blocking = BlockingLink(self.opts.name_server,
                                          timeout_ms=self.opts.pull_timeout_ms,
                                          credentials=self.opts.credentials,
                                          tls=self.opts.tls).open()
        return self._blocking

    def close(self) -> None:
        blocking, self._blocking = self._blocking, None
        if blocking is not None:
            blocking.close()

    def topics(self) -> list[str]:
        if self.opts.topic_pattern is None:
            return list(self.opts.topics)
        pattern = re.compile(self.opts.topic_pattern)
        listed = self.blocking.call(lambda link: link.topic_list())
        return [t for t in listed if pattern.fullmatch(t)]

    def refresh(self) -> RouteView:
        topics = self.topics()
        view = self.blocking.call(lambda link: link.routes(topics)) if topics else RouteView(
            (), {}, ())
        if self.opts.assign is not None:
            assigned = set(self.opts.assign)
            view = replace(view, queues=tuple(q for q in view.queues if q in assigned))
        if view.missing_brokers:
            log.warning("spark.broker_missing", brokers=list(view.missing_brokers),
                        topics=topics)
        self.view = view
        return view

    def ensure_view(self) -> RouteView:
        return self.view if self.view is not None else self.refresh()

    def min_max(self, view: RouteView, queues: Sequence[QueueKey]
                ) -> tuple[dict[QueueKey, int], dict[QueueKey, int]]:
        async def both(link: RocketMQLink) -> tuple[dict[QueueKey, int], dict[QueueKey, int]]:
            return await link.min_offsets(view, queues), await link.max_offsets(view, queues)

        return self.blocking.call(both)

    def check_named(self, view: RouteView) -> None:
        """Every queue that assign, startingOffsetsByTimestamp or endingOffsetsByTimestamp
        names is in the route (at the start of a query)."""
        present = set(view.queues)
        for option, named in (("assign", self.opts.assign or ()),
                              ("startingOffsetsByTimestamp",
                               [q for q, _ in self.opts.starting_timestamps or ()]),
                              ("endingOffsetsByTimestamp",
                               [q for q, _ in self.opts.ending_timestamps or ()])):
            missing = sorted(set(named) - present)
            if missing:
                has = sorted(str(q) for q in present if q.topic == missing[0].topic)
                raise MQClientError(
                    f"option {option}: queue {missing[0]} is not in the topic route (readable "
                    f"queues of {missing[0].topic}: {', '.join(has) or 'none'})")

    def _stamps(self, queues: Sequence[QueueKey], global_ms: int | None,
                per_queue: tuple[tuple[QueueKey, int], ...] | None) -> dict[QueueKey, int]:
        if global_ms is not None:
            return dict.fromkeys(queues, global_ms)
        wanted = set(queues)
        return {q: ms for q, ms in per_queue or () if q in wanted}

    def search(self, view: RouteView, stamps: dict[QueueKey, int]) -> dict[QueueKey, int]:
        """SEARCH_OFFSET_BY_TIMESTAMP per queue (``link.offsets_for_timestamps``)."""
        return self.blocking.call(lambda link: link.offsets_for_timestamps(view, stamps))

    def offsets_by_keys(self, view: RouteView, topics: Sequence[str], keys: frozenset[str],
                        begin_ms: int | None, end_ms: int | None
                        ) -> list[tuple[QueueKey, int]] | None:
        """The messages whose KEYS hold one of ``keys`` (QUERY_MESSAGE per key, topic and
        broker); None when a broker may have more than it answered, or refused."""
        found: set[tuple[QueueKey, int]] = set()
        for key in sorted(keys):
            try:
                got = self.blocking.run(self.blocking.link.offsets_by_key(
                    view, topics, key, begin_ms=begin_ms or 0, end_ms=end_ms))
            except MQBrokerError as exc:
                log.info("spark.key_lookup_refused", key=key, error=str(exc))
                return None
            if got is None:
                return None
            found.update(got)
        return sorted(found)

    def starting(self, view: RouteView, queues: Sequence[QueueKey], *, default: int,
                 strict: bool = True) -> Offsets:
        """startingTimestamp / startingOffsetsByTimestamp / startingOffsets resolved for
        ``queues``. ``strict=False`` (queues a running query takes on) treats the error
        strategy as latest: the strategy is for the query's start, as Kafka's.

        Raises:
            MQClientError: a queue has nothing stored at or after its starting time and
                startingOffsetsByTimestampStrategy is ``error``.
        """
        if not queues:
            return {}
        stamps = self._stamps(queues, self.opts.starting_timestamp_ms,
                              self.opts.starting_timestamps)
        # Searched before the max offsets are read: an answer at or past them means that
        # nothing was stored at or after the time (our broker answers the max offset then).
        found = self.search(view, stamps) if stamps else {}
        mins, maxs = self.min_max(view, queues)
        rest = [q for q in queues if q not in stamps]
        out = resolve_spec(self.opts.starting_offsets, rest, mins, maxs, default=default)
        for q, offset in sorted(found.items()):
            if offset >= maxs[q]:
                if strict and self.opts.starting_timestamp_strategy == "error":
                    option = ("startingTimestamp" if self.opts.starting_timestamp_ms is not None
                              else "startingOffsetsByTimestamp")
                    raise MQClientError(
                        f"{option}: queue {q} holds no message stored at or after "
                        f"{stamps[q]} (ms); set startingOffsetsByTimestampStrategy=latest to "
                        f"start such queues at their latest offset")
                offset = maxs[q]
            out[q] = offset
        return out

    def ending(self, view: RouteView, queues: Sequence[QueueKey], mins: Offsets,
               maxs: Offsets) -> Offsets:
        """endingTimestamp / endingOffsetsByTimestamp / endingOffsets resolved for
        ``queues``: the first offset stored at or after the time (exclusive), or the max
        offset when there is none (Kafka's rule for ending times)."""
        stamps = self._stamps(queues, self.opts.ending_timestamp_ms, self.opts.ending_timestamps)
        rest = [q for q in queues if q not in stamps]
        out = resolve_spec(self.opts.ending_offsets, rest, mins, maxs, default=LATEST)
        for q, offset in (self.search(view, stamps) if stamps else {}).items():
            out[q] = min(offset, maxs[q])
        return out

    def partitions(self, start: Offsets, end: Offsets,
                   settings: ReadSettings | None = None) -> list[QueueRangePartition]:
        return self.partitions_of(plan_ranges(start, end, self.opts.min_partitions,
                                              self.opts.max_records_per_partition), settings)

    def partitions_of(self, ranges: Sequence[QueueRange],
                      settings: ReadSettings | None = None) -> list[QueueRangePartition]:
        if not ranges:
            return []
        view = self.ensure_view()
        if any(r.queue.broker_name not in view.broker_addrs for r in ranges):
            view = self.refresh()
        settings = settings or ReadSettings.of(self.opts)
        out = []
        for r in ranges:
            addr = view.broker_addrs.get(r.queue.broker_name)
            if addr is None:
                _report_missing_broker(r.queue, r.start, r.end, self.opts.fail_on_data_loss)
                continue
            out.append(QueueRangePartition(r.queue, addr, r.start, r.end, settings))
        return out


def _report_missing_broker(key: QueueKey, start: int, end: int | None, fail: bool) -> None:
    """``end`` None: the query is at ``start`` and cannot see what the broker holds after it."""
    what = f"offsets [{start}, {end})" if end is not None else f"messages from offset {start} on"
    msg = (f"queue {key}: broker {key.broker_name} is not in the topic route any more; "
           f"{what} cannot be read")
    if fail:
        raise DataLossError(msg + " (set failOnDataLoss=false to skip them)")
    log.warning("spark.broker_gone", queue=str(key), start=start, end=end)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch planning on the driver, exact range reads on executors."""

    def __init__(self, opts: SourceOptions) -> None:
        self._opts = opts
        self._planner = _Planner(opts)
        self._settings = ReadSettings.of(opts)
        self._target: Offsets | None = None
        self._latest: Offsets | None = None
        self._last_batch_ms: int | None = None
        self._heartbeating = False
        self._initial: Offsets | None = None
        self._committed: Offsets | None = None
        self._gone: set[QueueKey] = set()  # queues reported as on a vanished broker
        self._unreachable: set[str] = set()  # brokers in the route that did not answer

    # -- queues -----------------------------------------------------------------------------

    def _queues(self) -> tuple[RouteView, list[QueueKey]]:
        view = self._planner.refresh()
        if self._opts.assignment != "group":
            return view, list(view.queues)
        group = self._opts.consumer_group
        assert group is not None
        topics = sorted({q.topic for q in view.queues})
        blocking = self._planner.blocking
        sub = self._opts.sub_expression
        kind = self._opts.expression_type
        blocking.call(lambda link: link.heartbeat(view, group, topics, sub, kind))
        if not self._heartbeating:
            self._heartbeating = True

            async def beat(link: RocketMQLink) -> None:
                current = self._planner.view or view
                await link.heartbeat(current, group, sorted({q.topic for q in current.queues}), sub,
                                     kind)

            blocking.start_routine(beat)
        return view, blocking.call(lambda link: link.allocate(view, group))

    def _new_queue_starts(self, view: RouteView, queues: list[QueueKey], *,
                          strict: bool = False) -> Offsets:
        if not queues:
            return {}
        if self._opts.assignment != "group":
            mins, _ = self._planner.min_max(view, queues)
            return mins
        group = self._opts.consumer_group
        assert group is not None
        out: Offsets = {}
        rest: list[QueueKey] = []
        for q in queues:
            committed = self._planner.blocking.run(
                self._planner.blocking.link.committed_offset(view, group, q))
            if committed is not None and committed > 0:
                out[q] = committed
            else:
                rest.append(q)
        out.update(self._planner.starting(view, rest, default=LATEST, strict=strict))
        return out

    # -- DataSourceStreamReader ---------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        view, queues = self._queues()
        self._planner.check_named(view)
        if self._opts.assignment == "group":
            offsets = self._new_queue_starts(view, queues, strict=True)
        else:
            offsets = self._planner.starting(view, queues, default=LATEST)
        self._last_batch_ms = _now_ms()
        self._initial = offsets
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        # One limit goes to Spark; _limit applies the options' other limits too.
        if self._opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._opts.max_offsets_per_trigger)
        if self._opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self._opts.max_bytes_per_trigger)
        if self._opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self._opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        view, queues = self._queues()
        _, maxs = self._planner.min_max(view, queues)
        self._target = maxs

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start, "start offset")
        view, queues = self._queues()
        if begin != self._initial:
            # ``start`` is where the last finished batch ended. Spark calls commit() for a
            # batch only once it plans the next one, so the last batch of an AvailableNow
            # run (or before a quiet spell) would reach the group late or never.
            self._commit_to_group(view, begin)
        known = [q for q in queues if q in begin]
        new = [q for q in queues if q not in begin]
        maxs, unreachable = self._planner.blocking.call(
            lambda link: link.max_offsets_reachable(view, known))
        self._report_unreachable(unreachable)
        latest: Offsets = {}
        for q in known:
            if q not in maxs:
                latest[q] = begin[q]  # its broker did not answer: no progress this trigger
                continue
            if maxs[q] < begin[q]:
                _report_max_below(q, begin[q], maxs[q], self._opts.fail_on_data_loss)
            latest[q] = maxs[q]
        latest.update(self._new_queue_starts(view, new))
        if self._opts.assignment != "group":
            # Queues whose broker vanished keep their offsets (reported once, not dropped).
            for q, off in begin.items():
                if q not in latest:
                    if q.broker_name not in view.broker_addrs and q not in self._gone:
                        _report_missing_broker(q, off, None, self._opts.fail_on_data_loss)
                        self._gone.add(q)
                    latest[q] = off
            self._gone.intersection_update(q for q in begin if q not in queues)
        if self._target is not None:
            latest = {q: max(begin.get(q, v), min(v, self._target.get(q, begin.get(q, v))))
                      for q, v in latest.items()}
        self._latest = latest
        end = self._limit(begin, latest, limit)
        if end != begin:
            self._last_batch_ms = _now_ms()
        return offsets_to_json(end)

    def _report_unreachable(self, unreachable: dict[str, str]) -> None:
        """Log each broker once per spell of not answering."""
        for broker in sorted(unreachable.keys() - self._unreachable):
            log.warning("spark.broker_unreachable", broker=broker, error=unreachable[broker])
        self._unreachable = set(unreachable)

    def _limit(self, begin: Offsets, latest: Offsets, limit: ReadLimit) -> Offsets:
        if isinstance(limit, ReadAllAvailable):
            return latest
        max_rows = self._opts.max_offsets_per_trigger
        max_bytes = self._opts.max_bytes_per_trigger
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        if isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        available = backlog(begin, latest)
        if should_wait(available, self._opts.min_offsets_per_trigger, self._last_batch_ms,
                       _now_ms(), self._opts.max_trigger_delay_ms):
            return dict(begin)
        end = rate_limit(begin, latest, max_rows) if max_rows is not None else latest
        if max_bytes is not None and backlog(begin, end):
            view = self._planner.ensure_view()
            subscription = build_subscription_data("", self._opts.sub_expression,
                                                   self._opts.expression_type)
            sizes = self._planner.blocking.call(lambda link: link.bytes_per_offset(
                view, begin, end, group=self._opts.reader_group, subscription=subscription,
                batch=self._opts.pull_batch_size))
            end = byte_limit(begin, end, sizes, max_bytes)
        return end

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._planner.partitions(offsets_from_json(start, "start offset"),
                                        offsets_from_json(end, "end offset"))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRangePartition)
        return read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_to_group(self._planner.ensure_view(), offsets_from_json(end, "end offset"))

    def _commit_to_group(self, view: RouteView, offsets: Offsets) -> None:
        if not self._opts.commit_offsets_to_group or offsets == self._committed:
            return
        group = self._opts.consumer_group
        assert group is not None
        try:
            self._planner.blocking.call(lambda link: link.commit_offsets(view, group, offsets))
        except RemotingError as exc:
            # The group's offsets are for monitoring; the checkpoint is what the query
            # restarts from. The next batch commits again (upstream persistConsumerOffset).
            log.warning("spark.commit_failed", group=group, error=str(exc))
            return
        self._committed = dict(offsets)

    def stop(self) -> None:
        try:
            if self._heartbeating and self._planner.view is not None:
                group = self._opts.consumer_group
                assert group is not None
                view = self._planner.view
                self._planner.blocking.call(lambda link: link.unregister(view, group))
        finally:
            self._planner.close()


def _report_max_below(key: QueueKey, start: int, max_offset: int, fail: bool) -> None:
    msg = (f"queue {key}: max offset {max_offset} is below the offset {start} the query "
           f"has already read to (the broker lost messages or the queue was recreated)")
    if fail:
        raise DataLossError(msg + "; set failOnDataLoss=false to continue")
    log.warning("spark.queue_reset", queue=str(key), start=start, max_offset=max_offset)


class RocketMQBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``: startingOffsets to endingOffsets, once."""

    def __init__(self, opts: SourceOptions) -> None:
        self._opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        planner = _Planner(self._opts)
        try:
            return self._partitions(planner)
        finally:
            planner.close()

    def _partitions(self, planner: _Planner) -> list[QueueRangePartition]:
        view = planner.refresh()
        planner.check_named(view)
        queues = list(view.queues)
        if not queues:
            return []
        start = planner.starting(view, queues, default=EARLIEST)
        mins, maxs = planner.min_max(view, queues)
        end = planner.ending(view, queues, mins, maxs)
        return planner.partitions(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRangePartition):
            # Nothing to read: for an empty partitions() list pyspark still runs one task,
            # with a bare InputPartition(None) (plan_data_source_read).
            return iter(())
        return read_partition(partition)


class RocketMQPushdownReader(RocketMQBatchReader):
    """The batch reader with ``pushFilters`` (``pushdown``): what Spark's filters exclude
    is not pulled. Only used when Spark plans the read with filter pushdown on
    (``spark.sql.python.filterPushdown.enabled``); see ``RocketMQDataSource.reader``."""

    def __init__(self, opts: SourceOptions) -> None:
        super().__init__(opts)
        self._pushdown = Pushdown()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self._pushdown, rest = push_filters(filters, self._opts.expression_type)
        if self._pushdown != Pushdown():
            log.info("spark.filters_pushed", pushdown=repr(self._pushdown))
        return rest

    def _partitions(self, planner: _Planner) -> list[QueueRangePartition]:
        p = self._pushdown
        sub_expression = p.tag_expression(self._opts.sub_expression)
        if p.empty or sub_expression is None:
            return []
        view = planner.refresh()
        planner.check_named(view)
        queues = [q for q in view.queues if p.admits(q)]
        if not queues:
            return []
        start = planner.starting(view, queues, default=EARLIEST)
        mins, maxs = planner.min_max(view, queues)
        end = planner.ending(view, queues, mins, maxs)
        if p.from_ms is not None:
            found = planner.search(view, dict.fromkeys(queues, p.from_ms))
            start = {q: max(start[q], found[q]) for q in queues}
        if p.until_ms is not None:
            found = planner.search(view, dict.fromkeys(queues, p.until_ms))
            end = {q: min(end[q], found[q]) for q in queues}
        settings = replace(ReadSettings.of(self._opts), sub_expression=sub_expression)
        if p.keys is not None:
            hits = planner.offsets_by_keys(view, sorted({q.topic for q in queues}), p.keys,
                                           p.from_ms, p.until_ms)
            if hits is not None:
                return planner.partitions_of(_single_offsets(
                    (q, o) for q, o in hits if q in start and start[q] <= o < end[q]), settings)
        return planner.partitions(start, end, settings)


def _single_offsets(hits: Iterable[tuple[QueueKey, int]]) -> list[QueueRange]:
    """One range per run of consecutive offsets of a queue."""
    out: list[QueueRange] = []
    for q, o in sorted(hits):
        if out and out[-1].queue == q and out[-1].end == o:
            out[-1] = QueueRange(q, out[-1].start, o + 1)
        else:
            out.append(QueueRange(q, o, o + 1))
    return out


def _pushdown_planning() -> bool:
    """Whether Spark is planning this read with filter pushdown: PySpark calls
    ``DataSource.reader`` from its filter-pushdown worker then, and refuses a reader that
    implements ``pushFilters`` anywhere else while ``spark.sql.python.filterPushdown.enabled``
    is off (``DATA_SOURCE_PUSHDOWN_DISABLED``), without telling the data source which."""
    frame = sys._getframe(1)
    for _ in range(6):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == _PUSHDOWN_WORKER or frame.f_code.co_filename.endswith(
                _PUSHDOWN_WORKER.rsplit(".", 1)[1] + ".py"):
            return True
    return False


_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def _with_body_fields(opts: SourceOptions, schema: StructType) -> SourceOptions:
    """``opts`` with bodySchema's fields as Spark parsed them (JSON, for the executors)."""
    if opts.body_format == "raw":
        return opts
    fields = check_body_fields(schema, source_columns(opts.include_properties))
    return replace(opts, body_fields_json=fields.json())


class RocketMQDataSource(DataSource):
    """``format("rocketmq")``: source and sink (see ``spark_sink`` for the options)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        # A DDL string: Spark parses it (this runs in a Python worker without a SparkContext,
        # where pyspark's own DDL parser is unavailable), bodySchema included.
        options = {k.lower(): v for k, v in self.options.items()}
        raw = options.get("includeproperties", "false")
        body_schema = (options.get("bodyschema") or "").strip() or None
        return source_schema(str(raw).strip().lower() == "true", body_schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = _with_body_fields(parse_source_options(self.options, streaming=False), schema)
        if _pushdown_planning():
            return RocketMQPushdownReader(opts)
        return RocketMQBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = _with_body_fields(parse_source_options(self.options, streaming=True), schema)
        return RocketMQStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import RocketMQBatchArrowWriter, RocketMQBatchWriter

        opts = parse_sink_options(self.options)
        # bodyFormat raw takes Arrow batches (no Row per message); msgpack / json pack each
        # row's values as Spark's Rows hold them.
        if opts.body_format == "raw":
            return RocketMQBatchArrowWriter(opts, schema)
        return RocketMQBatchWriter(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import RocketMQStreamArrowWriter, RocketMQStreamWriter

        opts = parse_sink_options(self.options)
        if opts.body_format == "raw":
            return RocketMQStreamArrowWriter(opts, schema)
        return RocketMQStreamWriter(opts, schema)

