"""RocketMQ source and sink for Spark Structured Streaming (PySpark Python Data Source API).

Usage::

    from aiorocketmq.spark_sink import register
    register(spark)   # format "rocketmq" for read, readStream, write and writeStream

Source options (Spark Kafka source names where the concept is the same):

==========================  ============================================================
``nameServer``              required, ``host:port[;host:port]``
``topic`` / ``topicPattern`` comma-separated topics, or a regex matched (whole name) against
                            the nameserver's topic list; exactly one of these and ``assign``
``assign``                  ``{"topic": {"brokerName": [queueId, ...]}}``: read only these
                            queues (Kafka's assign); a queue not in the route at the start
                            fails the query
``subExpression``           tag expression (``"TagA || TagB"``), default ``*``; applied by
                            the broker and re-checked on the client; or, with
                            ``expressionType=SQL92``, an SQL92 selector over the message
                            properties (``"a > 5 AND TAGS IN ('TagA')"``), applied by brokers
                            run with ``enablePropertyFilter=true``
``expressionType``          ``TAG`` (default) or ``SQL92``: how ``subExpression`` selects
``startingOffsets``         ``earliest`` | ``latest`` | ``{"topic":{"broker":{"queueId":n}}}``
                            (-2 earliest, -1 latest); default latest (stream), earliest (batch)
``startingTimestamp``       ms since the epoch; SEARCH_OFFSET_BY_TIMESTAMP per queue: the
                            first offset stored at or after it
``startingOffsetsByTimestamp``  ``{"topic":{"broker":{"queueId":ms}}}``, per queue; queues
                            not named start as startingOffsets' default
``startingOffsetsByTimestampStrategy``  a queue with nothing stored at or after its time
                            when the query starts: ``error`` (default: the query fails
                            naming it) or ``latest`` (it starts at its max offset); queues
                            a running query takes on start at their end
``endingOffsets``           batch only: ``latest`` (default) or a JSON map as above
``endingTimestamp``         batch only: read what was stored before it (the first offset
                            stored at or after it is the end; a queue with none is read
                            to its max offset); ``endingOffsetsByTimestamp`` per queue
``maxOffsetsPerTrigger``    cap per micro-batch, split across queues by backlog
``maxBytesPerTrigger``      stored bytes per micro-batch (``"10m"``; at least one message),
                            Spark's ``ReadMaxBytes``; each queue's bytes per offset are
                            sampled by one pull at its start per trigger
``minOffsetsPerTrigger``    wait for this many messages, at most ``maxTriggerDelay`` (15m)
``minPartitions``           split large queue ranges into more Spark partitions
``maxRecordsPerPartition``  no Spark partition reads more offsets of a queue than this
``failOnDataLoss``          default true: offsets gone from the broker fail the query with
                            the queue named; false: skip them and log ``spark.data_loss``
``pullBatchSize``           messages per pull request (default 32); a broker answers at most
                            its ``maxTransferCountOnMessageInMemory`` (32 by default) per
                            pull: raising both (say 1024) roughly halves the CPU per row
``pullTimeoutMs``           budget of each RocketMQ call (default 10000)
``consumerGroup``           group name used in pulls; with ``assignment=group`` the driver
                            joins it and reads only its share of the queues
``assignment``              ``all`` (default: every queue) | ``group``
``commitOffsetsToGroup``    default true when consumerGroup is set: finished offsets are
                            written with UPDATE_CONSUMER_OFFSET (``mqadmin consumerProgress``)
``includeProperties``       add a ``properties map<string,string>`` column
``bodyFormat``              ``raw`` (default: ``body`` as stored) | ``msgpack`` | ``json``:
                            decode each body (a map) into the ``bodySchema`` columns
``bodySchema``              with msgpack / json, required: a Spark DDL string, e.g.
                            ``"id long, name string, amount double"`` (structs, arrays,
                            maps, decimal, date, timestamp, binary too), appended to the
                            schema below and parsed by Spark. Missing keys are null; a
                            body that does not decode or a value that does not fit gets
                            null in every bodySchema column (``body`` keeps the bytes) and
                            one ``spark.body_undecodable`` warning per task
``accessKey`` / ``secretKey``  ACL credentials (source and sink): every request is signed
``tls``                     ``true``: connect with TLS (source and sink); ``tlsVerify``
                            checks the servers' certificates against ``tlsCaFile`` (else
                            the system store); ``tlsCertFile`` / ``tlsKeyFile`` /
                            ``tlsKeyPassword`` present a client certificate (``ClientConfig``'s
                            ``tls_*``; paths as the executors see them)
==========================  ============================================================

Schema: ``topic string, brokerName string, queueId int, queueOffset long, msgId string,
tags string, keys string, body binary, bornTimestamp timestamp, storeTimestamp timestamp,
bornHost string, reconsumeTimes int`` [``, properties map<string,string>``].

Batch reads with ``spark.sql.python.filterPushdown.enabled=true`` push filters
(``pushdown``): ``topic`` / ``brokerName`` / ``queueId`` ``=`` or ``IN`` plan only those
queues, ``tags`` ``=`` or ``IN`` subscribe to those tags (TAG subExpressions), ``storeTimestamp``
comparisons cut each queue's range by SEARCH_OFFSET_BY_TIMESTAMP, and ``keys`` ``=`` or
``IN`` read only what QUERY_MESSAGE finds in the broker's key index.

Sink: columns ``body`` (or ``value``; binary or string, required), ``topic``, ``tags``,
``keys``, ``properties`` (map), ``queueId``, ``delayLevel`` (int, the broker's delay level;
0 or null: none), ``deliverTime`` (timestamp or bigint epoch ms: a timer message delivered
then, ``TIMER_DELIVER_MS``; null: at once); options ``nameServer``, ``topic``, ``producerGroup``, ``sendTimeoutMs``,
``async``, ``maxInFlight``, ``bodyFormat``, ``shardingKeyColumn`` (a string or integer
column: rows with one value go to one queue, ``SelectMessageQueueByHash``'s, in row order
within a task, ``async=true`` included), and the connection's ``accessKey`` / ``secretKey``
/ ``tls...`` as on the source. With
``bodyFormat=msgpack|json`` there is no body column: every column other than ``body``,
``value``, ``topic``, ``tags``, ``keys``, ``properties``, ``queueId``, ``delayLevel`` and
``deliverTime`` is
packed into the body
as one map (binary as base64 and timestamps as ISO-8601 strings in JSON; decimals as exact
strings; dates as ISO strings) and ``contentType`` names the codec, so ``Message.decode()``
and the source with the same ``bodySchema`` read it back. Consecutive rows of one topic
and queue go out as one SEND_BATCH_MESSAGE (up to 128 rows; each row its own message),
rows with a delay level, a delivery time, a transaction flag or a body the producer compresses alone
(``spark_sink.sink.batches``); ``async=true`` keeps up to ``maxInFlight`` requests in
flight per task, ``async=false`` sends them one at a time in row order. Delivery is at least once;
each message carries ``spark.queryId``, ``spark.batchId``, ``spark.partitionId`` and
``spark.rowIndex`` for deduplication downstream (``spark_sink.sink_mapping.dedup_key``).
"""

from __future__ import annotations

if __name__ != "aiorocketmq.spark_sink":  # one name per module: docs/ARCHITECTURE.md
    raise ImportError(f"import aiorocketmq.spark_sink, not {__name__}: the top-level spark_sink/ is "
                      "the aiorocketmq package's part, and a second name would load a second "
                      "copy of each of its modules and classes")

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register", "FORMAT"]

FORMAT = "rocketmq"


def register(spark: SparkSession) -> None:
    """Register the ``rocketmq`` data source (source and sink) with ``spark``.

    On a local master its workers run this interpreter unless ``PYSPARK_PYTHON`` names
    another, which must then import aiorocketmq (``spark_sink.workers``).

    Raises:
        spark_sink.workers.WorkerPythonError: ``PYSPARK_PYTHON`` cannot import aiorocketmq.
    """
    from .source import RocketMQDataSource
    from .workers import worker_python

    with worker_python(spark):
        spark.dataSource.register(RocketMQDataSource)
