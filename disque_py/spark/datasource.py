"""The `disque` data source: df.write.format("disque") for batch writes,
writeStream.format("disque") for streaming writes, and
readStream.format("disque") for a streaming source (stream_reader.py).

    from disque_py.spark import DisqueDataSource
    spark.dataSource.register(DisqueDataSource)
    df.write.format("disque").option("queue", "q").option("nodes", "h:7711,h:7712") \\
        .mode("append").save()

Writers run in Spark's Python workers: each task writes its partition
with PartitionWriter (pipelined ADDJOBs, every reply checked, refusals it
can retry retried, anything else fails the task naming rows and reason)
and commits only when every row was answered with a job ID; its commit
message counts the rows. The driver's commit logs the totals per
partition; a failed task fails the Spark job with the task's error.

Keys. Every row has a key: the `key_column`'s value, else one made from
where the row is: "<write>/<partition>-<index>" for a batch write (the
write's id is drawn once on the driver, so a re-run task makes the same
keys), "<query id>/<batch id>/<partition>-<index>" for a streaming write
(the query id survives restarts from the checkpoint; a task reads both
from its local properties). The key goes into the body (row_key) and, for
streaming writes always and for batch writes with `dedup`, out as ADDJOB's
DEDUP key, and each row goes to the node its key hashes to among `nodes`
(and only there: no failover), so a replayed micro-batch or a re-run task
reaches the node that saw the first try and gets that try's job back.
"""

from __future__ import annotations

import logging
import uuid
import zlib
from dataclasses import dataclass, field, replace

from pyspark import TaskContext
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter,
                                    DataSourceStreamArrowWriter, WriterCommitMessage)
from pyspark.sql.types import StructType

from disque_py.spark.partition_writer import PartitionWriter, WriteFailed, WriteOptions
from disque_py.spark.options import (BOOL_OPTIONS, INT_OPTIONS, SPARK_OPTIONS, STRING_OPTIONS,
                                     OptionError, bool_option, int_option, parse_nodes)
from disque_py.spark.rows import body_encoder, dict_rows, map_columns
from disque_py.spark.stream_reader import SOURCE_SCHEMA, DisqueStreamReader

NAME = "disque"
QUERY_ID_PROPERTY = "sql.streaming.queryId"     # set by Spark for a streaming query's tasks
BATCH_ID_PROPERTY = "streaming.sql.batchId"     # ... and the micro-batch's id
log = logging.getLogger("disque_py.spark")


@dataclass
class SinkOptions:
    """The writers' options, checked on the driver before any task runs."""
    write: WriteOptions
    body_column: str | None = None
    key_column: str | None = None
    row_key: bool = True
    routed: list[str] = field(default_factory=list)   # nodes keys hash to (dedup writes)

    @classmethod
    def parse(cls, options, schema: StructType, streaming: bool) -> "SinkOptions":
        unknown = {name.lower() for name in options} - set(INT_OPTIONS) - set(BOOL_OPTIONS) \
            - set(STRING_OPTIONS) - set(SPARK_OPTIONS)
        if unknown:
            raise OptionError(f"disque: unknown option(s) {', '.join(sorted(unknown))}")
        queue = options.get("queue") or options.get("path")
        if not queue:
            raise OptionError("disque: option queue is required")
        numbers = {name: int_option(name, options[name]) for name in INT_OPTIONS if name in options}
        flags = {name: bool_option(name, options[name]) for name in BOOL_OPTIONS if name in options}
        if streaming and flags.get("dedup") is False:
            raise OptionError("disque: a streaming write always uses DEDUP keys")
        dedup = streaming or flags.get("dedup", False)
        nodes = parse_nodes(options.get("nodes"))
        for column in (options.get("body_column"), options.get("key_column")):
            if column is not None and column not in schema.names:
                raise OptionError(f"disque: no column {column!r} in {schema.simpleString()}")
        write = WriteOptions(
            queue=queue, nodes=nodes, replicate=numbers.get("replicate"),
            ttl=numbers.get("ttl"), retry=numbers.get("retry"), delay=numbers.get("delay"),
            maxlen=numbers.get("maxlen"), priority=numbers.get("priority"),
            asynchronous=flags.get("async", False), dedup=dedup, follow_cluster=not dedup,
            timeout_ms=numbers.get("timeout_ms", WriteOptions.timeout_ms),
            batch_size=numbers.get("batch_size", WriteOptions.batch_size),
            max_in_flight=numbers.get("max_in_flight", WriteOptions.max_in_flight),
            password=options.get("password"))
        return cls(write, options.get("body_column"), options.get("key_column"),
                   flags.get("row_key", True), sorted(set(nodes)) if dedup else [])


class DisqueDataSource(DataSource):
    """format("disque"): batch and streaming writes, a streaming source."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self):
        return SOURCE_SCHEMA

    def writer(self, schema: StructType, overwrite: bool) -> "DisqueBatchWriter":
        if overwrite:
            raise OptionError("disque: jobs are only ever added: use mode('append')")
        return DisqueBatchWriter(SinkOptions.parse(self.options, schema, False), schema,
                                 uuid.uuid4().hex[:12])

    def streamWriter(self, schema: StructType, overwrite: bool) -> "DisqueStreamWriter":
        return DisqueStreamWriter(SinkOptions.parse(self.options, schema, True), schema)

    def simpleStreamReader(self, schema: StructType):
        return DisqueStreamReader(self.options)


@dataclass
class PartitionWritten(WriterCommitMessage):
    """What one task wrote: its commit message."""
    partition: int
    rows: int
    added: int
    retried: int
    nodes: list[str]


def _as_is(row: dict) -> dict:
    return row                   # Arrow rows are dicts already


class _RowsWriter:
    """The task side both writers share: rows in, one PartitionWriter per
    node out, a commit message when every row was answered."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.maps = map_columns(schema.fields)
        self.encode_body = body_encoder(_as_is, options.body_column, options.row_key)

    def write_partition(self, batches, key_prefix: str) -> PartitionWritten:
        partition = TaskContext.get().partitionId()
        writers: dict[str, PartitionWriter] = {}
        pending: dict[str, list] = {}
        routed, key_column = self.options.routed, self.options.key_column
        size = self.options.write.batch_size
        index = 0
        try:
            for batch in batches:
                for row in dict_rows(batch, self.maps):
                    key = f"{key_prefix}{partition}-{index}" if key_column is None \
                        else str(row[key_column])
                    index += 1
                    node = routed[zlib.crc32(key.encode()) % len(routed)] if routed else ""
                    rows = pending.setdefault(node, [])
                    rows.append((key, self.encode_body(row, key)))
                    if len(rows) >= size:
                        self._writer(writers, node, partition).send(rows)
                        pending[node] = []
            for node, rows in pending.items():
                self._writer(writers, node, partition).send(rows)
            stats = [writer.finish() for writer in writers.values()]
        finally:
            for writer in writers.values():
                writer.close()
        message = PartitionWritten(partition, index, sum(s.added for s in stats),
                                   sum(s.retried for s in stats),
                                   sorted(set().union(*(s.nodes_used for s in stats))))
        log.info("disque: partition %d wrote %d rows to queue %r (%d sent again) via %s",
                 partition, index, self.options.write.queue, message.retried,
                 ", ".join(message.nodes) or "no node")
        return message

    def _writer(self, writers: dict, node: str, partition: int) -> PartitionWriter:
        writer = writers.get(node)
        if writer is None:
            options = self.options.write
            if node:
                options = replace(options, nodes=[node])
            writer = writers[node] = PartitionWriter(options, partition)
        return writer


def _summarise(queue: str, messages, what: str) -> None:
    written = [m for m in messages if isinstance(m, PartitionWritten)]
    log.info("disque: %s wrote %d rows to queue %r: %s", what, sum(m.rows for m in written),
             queue, ", ".join(f"partition {m.partition}: {m.rows}" for m in written))


class DisqueBatchWriter(DataSourceArrowWriter):
    """df.write.format("disque"): Arrow batches in, jobs out."""

    def __init__(self, options: SinkOptions, schema: StructType, write_id: str) -> None:
        self.rows = _RowsWriter(options, schema)
        self.write_id = write_id

    def write(self, iterator) -> PartitionWritten:
        return self.rows.write_partition(iterator, f"{self.write_id}/")

    def commit(self, messages) -> None:
        _summarise(self.rows.options.write.queue, messages, f"write {self.write_id}")

    def abort(self, messages) -> None:
        written = sum(m.rows for m in messages if isinstance(m, PartitionWritten))
        log.error("disque: write %s to queue %r failed; partitions that finished added %d "
                  "rows (they stay queued: jobs cannot be taken back)", self.write_id,
                  self.rows.options.write.queue, written)


class DisqueStreamWriter(DataSourceStreamArrowWriter):
    """writeStream.format("disque"): each micro-batch as a batch write whose
    keys name the query and the batch, so a replay makes no new jobs."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.rows = _RowsWriter(options, schema)

    def write(self, iterator) -> PartitionWritten:
        context = TaskContext.get()
        query, batch = (context.getLocalProperty(name)
                        for name in (QUERY_ID_PROPERTY, BATCH_ID_PROPERTY))
        if query is None or batch is None:
            raise WriteFailed("disque: the task has no streaming query or batch id "
                              f"({QUERY_ID_PROPERTY}, {BATCH_ID_PROPERTY})")
        return self.rows.write_partition(iterator, f"{query}/{batch}/")

    def commit(self, messages, batchId: int) -> None:
        _summarise(self.rows.options.write.queue, messages, f"micro-batch {batchId}")

    def abort(self, messages, batchId: int) -> None:
        log.error("disque: micro-batch %d to queue %r failed; its replay makes no new jobs "
                  "for the rows already added", batchId, self.rows.options.write.queue)
