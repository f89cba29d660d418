"""write_jobs: push a Spark DataFrame's rows into a Disque queue as jobs,
from the driver (the function form; the `disque` data source,
datasource.py, is the DataFrameWriter form).

    from disque_py.spark import write_jobs
    summary = write_jobs(df, queue="emails", nodes=["10.0.0.1:7711", "10.0.0.2:7711"],
                         replicate=2, ttl=3600)

or, once this module is imported, df.to_disque(queue=..., nodes=[...]).

Each partition writes over one connection (partition_writer.PartitionWriter:
pipelined ADDJOB batches, every reply checked, NOREPL / LEAVING / lost
connections retried elsewhere, everything else fails the task with the
rows and the reason). The job body is, by default, the row as a JSON
object; `body` may name a column or be a function of the row. Every job
carries a row key (field "_disque_key"): the partition id and the row's
index in it, or the value of the `key` column. Spark may re-run a failed
task, so a row can reach the queue more than once: delivery into the queue
is at least once, and consumers that must not act twice use the key.

pyspark is imported here, never by the server.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.types import ArrayType, MapType, StructType

from disque_py.spark.partition_writer import PartitionWriter, WriteOptions
from disque_py.spark.rows import body_encoder

log = logging.getLogger("disque_py.spark")


def driver_log() -> logging.Logger:
    """The summary line must reach the driver log even when the application
    configured no logging: then (only then) it goes to stderr."""
    if not log.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log

@dataclass
class WriteSummary:
    queue: str
    rows: int
    added: int
    retried: int
    failed: int
    seconds: float

    def line(self) -> str:
        rate = self.added / self.seconds if self.seconds else 0.0
        return (f"disque write to queue {self.queue!r}: {self.added} jobs added, "
                f"{self.retried} retried, {self.failed} failed, in {self.seconds:.1f} s "
                f"({rate:,.0f} rows/s)")


def write_jobs(df: DataFrame, queue: str, nodes: list[str], body=None, key: str | None = None,
               row_key: bool = True, replicate: int | None = None, ttl: int | None = None,
               retry: int | None = None, delay: int | None = None, maxlen: int | None = None,
               asynchronous: bool = False,
               batch_size: int = 1000, max_in_flight: int = 4, timeout_ms: int = 5000,
               password: str | None = None) -> WriteSummary:
    """Add every row of `df` to `queue` as a job; raise if any cannot be added."""
    if not nodes:
        raise ValueError("nodes: give at least one host:port")
    options = WriteOptions(queue=queue, nodes=list(nodes), replicate=replicate, ttl=ttl,
                           retry=retry, delay=delay, maxlen=maxlen, asynchronous=asynchronous,
                           timeout_ms=timeout_ms, batch_size=batch_size,
                           max_in_flight=max_in_flight, password=password)
    context = df.sparkSession.sparkContext
    added, retried, failed = (context.accumulator(0) for _ in range(3))
    context.setJobDescription(f"disque: rows of a DataFrame -> queue {queue!r}")
    encode = _keyed_encoder(df.schema, body, key, row_key)
    run = _partition_runner(options, encode, (added, retried, failed))
    started = time.monotonic()
    try:
        rows = sum(df.rdd.mapPartitionsWithIndex(run).collect())
    except Exception:
        driver_log().error("disque write to queue %r failed after %.1f s; jobs added by partitions "
                  "that finished: %d (see the task error for the rows and why)",
                  queue, time.monotonic() - started, added.value)
        raise
    finally:
        context.setJobDescription(None)
    summary = WriteSummary(queue, rows, added.value, retried.value, failed.value,
                           time.monotonic() - started)
    driver_log().info("%s", summary.line())
    return summary


def _partition_runner(options: WriteOptions, encode, counters):
    added, retried, failed = counters

    def run(partition_id: int, rows):
        writer = PartitionWriter(options, partition_id)
        count = 0

        def encoded():
            nonlocal count
            for count, row in enumerate(rows, 1):
                yield encode(partition_id, count - 1, row)
        try:
            writer.write(encoded())
        finally:
            added.add(writer.stats.added)
            retried.add(writer.stats.retried)
            failed.add(writer.stats.failed)
        yield count
    return run


def _flat(schema: StructType) -> bool:
    """True when no column nests rows, arrays or maps (dict(zip()) suffices)."""
    return not any(isinstance(f.dataType, (StructType, ArrayType, MapType)) for f in schema)


def _keyed_encoder(schema: StructType, body, key: str | None, row_key: bool):
    """A function (partition, index, Row) -> (row key, job body bytes)."""
    fields = schema.names
    as_dict = (lambda row: dict(zip(fields, row))) if _flat(schema) else \
        (lambda row: row.asDict(recursive=True))
    encode_body = body_encoder(as_dict, body, row_key)

    def encode(partition_id: int, index: int, row) -> tuple[str, bytes]:
        row_id = f"{partition_id}-{index}" if key is None else str(row[key])
        return row_id, encode_body(row, row_id)
    return encode


def _to_disque(self: DataFrame, queue: str, nodes: list[str], **options) -> WriteSummary:
    return write_jobs(self, queue, nodes, **options)


DataFrame.to_disque = _to_disque
