"""The ``rocketmq`` sink: ``df.write(Stream).format("rocketmq")`` sends each row as a message.

Contract:

* The DataFrame's columns are validated on the driver (``sink_mapping.SinkColumns``; with
  bodyFormat msgpack or json also ``body_format.SinkPacker``, which packs the non-reserved
  columns of each row into the body).
* Each Spark task (``write``) starts one ``client.producer.Producer`` on a private
  ``client.sync.LoopThread``, sends its rows, waits until the broker acknowledged every one
  of them, shuts the producer down and returns a ``SinkCommitMessage`` with the count. A
  failed send fails the task; Spark retries it, so delivery is **at least once**. Every
  message carries ``spark.queryId`` / ``spark.batchId`` / ``spark.partitionId`` /
  ``spark.rowIndex`` (``sink_mapping``), which name the row exactly across re-runs: a
  consumer that needs exactly-once deduplicates on them.
* With bodyFormat raw the writers are PySpark's Arrow writers (``RocketMQBatchArrowWriter``,
  ``RocketMQStreamArrowWriter``): each Arrow batch's rows are read as plain dicts, so no
  ``Row`` is built per message; msgpack / json keep the Row writers (``SinkPacker`` packs
  Row values). Rows become messages ``_SEND_CHUNK`` at a time, the next chunk built while
  the one before it is sent, and handed over only once that one is acknowledged.
* Consecutive rows for the same topic and queue go out as one SEND_BATCH_MESSAGE (``batches``:
  up to ``BATCH_ROWS`` rows, ``BATCH_BYTES`` of bodies), which the broker stores and
  acknowledges as a whole, each row still its own message with its own properties. A row
  a batch would change goes alone, as before: a delay level, a delivery time, a transaction flag, a retry
  topic, or a body the producer would compress. ``async=false`` (default) sends one
  request at a time, in row order; ``async=true`` keeps up to ``maxInFlight`` requests
  in flight per task and still waits for all of them before the task reports success.
* ``queueId`` picks ``mqs[queueId % len(mqs)]`` among the topic's write queues in route
  order (upstream ``send(msg, selector, arg)`` with an index selector). With the option
  ``shardingKeyColumn`` the hint is the key's Java hash instead (``sink_mapping``), which
  gives ``SelectMessageQueueByHash``'s queue: rows with one key go to one queue, and the
  task sends each queue's rows in row order, ``async=true`` included (one request in
  flight per queue; the queues in parallel). Across tasks there is no order, as in
  Kafka's sink, so rows of one key belong in one partition (``repartition`` by the key,
  ``sortWithinPartitions`` by what orders them).
* ``delayLevel`` (a column) is the broker's delay level (``messageDelayLevel``, 1 = 1 s
  by default); ``deliverTime`` (a timestamp, or epoch ms) makes the row a timer message
  delivered at that time (``TIMER_DELIVER_MS``; the broker's timing wheel, within its
  ``timerMaxDelaySec``); either row is sent alone.

The batch id comes from the task's local property ``streaming.sql.batchId``, which Spark's
MicroBatchExecution sets for every micro-batch (``-1`` for a batch write).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from aiorocketmq.client.producer import Producer
from aiorocketmq.client.sync import LoopThread
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import MessageConst, MixAll
from aiorocketmq.protocol.message import Message

from .body_format import SinkPacker
from .link import _new_loop as new_loop
from .options import SinkOptions
from .sink_mapping import (
    PROP_BATCH_ID,
    PROP_PARTITION_ID,
    PROP_QUERY_ID,
    SinkColumns,
    row_to_message,
)

if TYPE_CHECKING:
    import concurrent.futures

    import pyarrow as pa
    from pyspark.sql import Row
    from pyspark.sql.types import StructType

__all__ = ["RocketMQBatchWriter", "RocketMQStreamWriter", "RocketMQBatchArrowWriter",
           "RocketMQStreamArrowWriter", "SinkCommitMessage", "write_partition",
           "write_arrow_partition", "select_by_index", "batches"]

log = get_logger("aiorocketmq.spark")

_SEND_CHUNK = 512  # rows handed to the loop thread per hop
BATCH_ROWS = 128  # rows per SEND_BATCH_MESSAGE
BATCH_BYTES = 512 * 1024  # bodies per SEND_BATCH_MESSAGE (the broker's limit is 4 MiB)
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # MicroBatchExecution.BATCH_ID_KEY
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY


@dataclass(frozen=True, slots=True)
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote."""

    partition_id: int
    batch_id: int
    messages: int


def select_by_index(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Queue ``arg`` (an int) of the topic's write queues, modulo their number."""
    return mqs[int(arg) % len(mqs)]


class _ProducerThread(LoopThread):
    """One task's producer on a private loop (``client.sync.LoopThread``)."""

    close_timeout = 30.0
    loop_factory = staticmethod(new_loop)  # uvloop's, as the source's link: less CPU per send

    def __init__(self, opts: SinkOptions) -> None:
        super().__init__("rocketmq-spark-sink")
        self._opts = opts
        self.producer: Producer | None = None

    async def _aopen(self) -> None:
        producer = Producer(self._opts.producer_group, self._opts.name_server,
                            config=self._opts.client_config(),
                            send_msg_timeout_ms=self._opts.send_timeout_ms)
        await producer.start()
        self.producer = producer

    async def _aclose(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            await producer.shutdown()

    async def send_all(self, items: list[tuple[Message, int | None]]) -> None:
        producer = self.producer
        assert producer is not None
        groups = batches(_by_queue(producer, items), producer.compress_msg_body_over_howmuch)
        if not self._opts.async_send:
            for msgs, qid in groups:
                await _send_one(producer, msgs, qid)
            return
        limit = asyncio.Semaphore(self._opts.max_in_flight)

        async def one(msgs: Message | list[Message], qid: int | None) -> None:
            async with limit:
                await _send_one(producer, msgs, qid)

        if self._opts.sharding_key_column is None:
            # Every send is awaited before returning: a failure fails the task.
            await asyncio.gather(*(one(m, q) for m, q in groups))
            return
        # Ordered: each queue's sends one after another, the queues side by side.
        chains: dict[tuple[str, int] | int, list[tuple[Message | list[Message], int | None]]] = {}
        for i, (msgs, qid) in enumerate(groups):
            topic = (msgs[0] if isinstance(msgs, list) else msgs).topic
            chains.setdefault((topic, qid) if qid is not None else i, []).append((msgs, qid))

        async def chain(sends: list[tuple[Message | list[Message], int | None]]) -> None:
            for msgs, qid in sends:
                await one(msgs, qid)

        await asyncio.gather(*(chain(c) for c in chains.values()))


def _by_queue(producer: Producer, items: list[tuple[Message, int | None]]
              ) -> list[tuple[Message, int | None]]:
    """``items`` with each queue hint reduced modulo its topic's write queues where the
    producer knows the route already (the queue is ``mqs[hint % len(mqs)]`` either way), so
    that rows for one queue batch together and chain as one."""
    counts: dict[str, int] = {}
    out: list[tuple[Message, int | None]] = []
    for msg, hint in items:
        if hint is not None:
            n = counts.get(msg.topic)
            if n is None:
                info = producer.topic_publish_info_table.get(msg.topic)
                n = counts[msg.topic] = (len(info.message_queue_list)
                                         if info is not None and info.ok() else 0)
            if n:
                hint %= n
        out.append((msg, hint))
    return out


def _batchable(msg: Message, compress_over: int) -> bool:
    """Whether ``msg`` is stored the same inside a batch as sent alone."""
    props = msg.properties
    return (len(msg.body) < compress_over
            and MessageConst.PROPERTY_DELAY_TIME_LEVEL not in props
            and MessageConst.PROPERTY_TIMER_DELIVER_MS not in props
            and MessageConst.PROPERTY_TRANSACTION_PREPARED not in props
            and not msg.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX))


def batches(items: Sequence[tuple[Message, int | None]], compress_over: int
            ) -> list[tuple[Message | list[Message], int | None]]:
    """``items`` in order as sends: runs of batchable messages with the same topic, queue
    id and WAIT as lists (at most ``BATCH_ROWS`` messages, ``BATCH_BYTES`` of bodies), any
    other message alone."""
    out: list[tuple[Message | list[Message], int | None]] = []
    run: list[Message] = []
    run_key: tuple[str, int | None, bool] | None = None
    size = 0

    def close() -> None:
        if run:
            out.append((run[0] if len(run) == 1 else list(run), run_key[1] if run_key else None))
            run.clear()

    for msg, qid in items:
        if not _batchable(msg, compress_over):
            close()
            run_key = None
            out.append((msg, qid))
            continue
        key = (msg.topic, qid, msg.wait_store_msg_ok)
        if key != run_key or len(run) >= BATCH_ROWS or size + len(msg.body) > BATCH_BYTES:
            close()
            run_key = key
            size = 0
        run.append(msg)
        size += len(msg.body)
    close()
    return out


async def _send_one(producer: Producer, msg: Message | list[Message], qid: int | None) -> None:
    if qid is None:
        await producer.send(msg)
    else:
        await producer.send(msg, selector=select_by_index, arg=qid)


def _task_lineage() -> tuple[dict[str, str], int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition_id = ctx.partitionId() if ctx is not None else 0
    batch_raw = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch_id = int(batch_raw) if batch_raw else -1
    lineage = {PROP_BATCH_ID: str(batch_id), PROP_PARTITION_ID: str(partition_id)}
    if query_id:
        lineage[PROP_QUERY_ID] = query_id
    return lineage, partition_id, batch_id


def write_partition(opts: SinkOptions, columns: SinkColumns, rows: Iterator[Row],
                    packer: SinkPacker | None = None) -> SinkCommitMessage:
    """Send every row of one task and wait for all acknowledgements (executor side)."""
    return _send_rows(opts, columns, (row.asDict() for row in rows), packer)


def write_arrow_partition(opts: SinkOptions, columns: SinkColumns,
                          batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """``write_partition`` for Arrow batches (bodyFormat raw): each row is read from the
    batch's columns as a plain dict, with no ``Row`` built and no per-cell converter.
    Timestamps come as zone-aware datetimes and maps as lists of pairs, which
    ``row_to_message`` takes as they are."""
    return _send_rows(opts, columns, (row for batch in batches for row in batch.to_pylist()),
                      None)


def _send_rows(opts: SinkOptions, columns: SinkColumns, rows: Iterator[dict[str, Any]],
               packer: SinkPacker | None) -> SinkCommitMessage:
    """Map rows to messages ``_SEND_CHUNK`` at a time; while one chunk is being sent and
    acknowledged the next is built, and it is handed over only once the one before it is
    acknowledged, so rows still go out in row order (``async=false``, shardingKeyColumn)."""
    lineage, partition_id, batch_id = _task_lineage()
    count = 0
    with _ProducerThread(opts) as sender:
        in_flight: concurrent.futures.Future[None] | None = None
        chunk: list[tuple[Message, int | None]] = []
        try:
            for index, row in enumerate(rows):
                chunk.append(row_to_message(row, columns, default_topic=opts.topic,
                                            lineage=lineage, row_index=index, packer=packer))
                if len(chunk) >= _SEND_CHUNK:
                    if in_flight is not None:
                        in_flight.result()
                    in_flight = sender.submit(sender.send_all(chunk))
                    count += len(chunk)
                    chunk = []
            if in_flight is not None:
                in_flight.result()
                in_flight = None
            if chunk:
                sender.run(sender.send_all(chunk))
                count += len(chunk)
        finally:
            if in_flight is not None and not in_flight.done():
                in_flight.cancel()
    return SinkCommitMessage(partition_id, batch_id, count)


def _columns(schema: StructType, opts: SinkOptions) -> tuple[SinkColumns, SinkPacker | None]:
    packed = opts.body_format != "raw"
    columns = SinkColumns.from_schema(
        ((f.name, f.dataType.simpleString()) for f in schema.fields), topic_option=opts.topic,
        packed=packed, sharding_key=opts.sharding_key_column)
    return columns, (SinkPacker(schema, opts.body_format) if packed else None)


class RocketMQBatchWriter(DataSourceWriter):
    """``df.write.format("rocketmq")``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self._opts = opts
        self._columns, self._packer = _columns(schema, opts)

    def write(self, iterator: Iterator[Row]) -> SinkCommitMessage:
        return write_partition(self._opts, self._columns, iterator, self._packer)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("spark.sink_committed", messages=total)


class RocketMQBatchArrowWriter(DataSourceArrowWriter):
    """``df.write.format("rocketmq")`` with bodyFormat raw: Arrow batches in, no ``Row``
    per message (``write_arrow_partition``)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self._opts = opts
        self._columns, _ = _columns(schema, opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_arrow_partition(self._opts, self._columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("spark.sink_committed", messages=total)


class RocketMQStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("rocketmq")``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self._opts = opts
        self._columns, self._packer = _columns(schema, opts)

    def write(self, iterator: Iterator[Row]) -> SinkCommitMessage:
        return write_partition(self._opts, self._columns, iterator, self._packer)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("spark.sink_committed", batch_id=batchId, messages=total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Messages already sent stay sent (at least once); the re-run carries the same
        # lineage properties, so consumers can drop the duplicates.
        log.warning("spark.sink_aborted", batch_id=batchId)


class RocketMQStreamArrowWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("rocketmq")`` with bodyFormat raw (Arrow batches in)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self._opts = opts
        self._columns, _ = _columns(schema, opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_arrow_partition(self._opts, self._columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("spark.sink_committed", batch_id=batchId, messages=total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("spark.sink_aborted", batch_id=batchId)
