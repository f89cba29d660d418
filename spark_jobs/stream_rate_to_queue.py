"""A streaming copy from Spark's rate source into a Disque queue:

    python spark_jobs/stream_rate_to_queue.py --queue ticks --rows-per-second 1000 \\
        --checkpoint /tmp/ticks-checkpoint --seconds 30

writeStream.format("disque"): every micro-batch's rows become jobs whose
DEDUP keys name the query, the batch and the row, each sent to the node
its key hashes to, so a batch Spark replays after a failure (stop this job
with Ctrl-C and start it again with the same --checkpoint) makes no job
twice. The body is the row as JSON ({"timestamp": ..., "value": ...}).
"""

from __future__ import annotations

import logging
import time

import click

from _session import spark_session

POLL_S = 0.5


@click.command()
@click.option("--queue", required=True, help="Queue the jobs go to.")
@click.option("--nodes", default="127.0.0.1:7711", show_default=True,
              help="Comma-separated host:port list: every node a key may be routed to.")
@click.option("--rows-per-second", default=100, show_default=True)
@click.option("--checkpoint", required=True, help="Spark's checkpoint directory for the query.")
@click.option("--seconds", type=float, default=None,
              help="Stop after this long (default: run until interrupted).")
@click.option("--stop-after-rows", type=int, default=None,
              help="Stop once the query wrote at least this many rows.")
@click.option("--replicate", type=int, default=None, help="ADDJOB REPLICATE.")
@click.option("--master", default=None, help="Spark master (default: local[*]).")
def main(queue, nodes, rows_per_second, checkpoint, seconds, stop_after_rows, replicate,
         master):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    spark = spark_session("disque-stream-rate", master)
    from disque_py.spark import register
    register(spark)
    rows = spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
    writer = (rows.writeStream.format("disque").option("queue", queue).option("nodes", nodes)
              .option("checkpointLocation", checkpoint))
    if replicate is not None:
        writer = writer.option("replicate", str(replicate))
    query = writer.start()
    written = _run(query, seconds, stop_after_rows)
    query.stop()
    click.echo(f"{written} rows written to queue {queue!r}")
    spark.stop()


def _run(query, seconds: float | None, stop_after_rows: int | None) -> int:
    """Let the query run for `seconds` or until it wrote `stop_after_rows`
    rows (whichever comes first); the rows its finished batches wrote."""
    deadline = None if seconds is None else time.monotonic() + seconds
    rows_by_batch: dict[int, int] = {}
    while deadline is None or time.monotonic() < deadline:
        if query.awaitTermination(POLL_S):
            break
        for progress in query.recentProgress:
            rows_by_batch[progress["batchId"]] = progress["numInputRows"]
        if stop_after_rows is not None and sum(rows_by_batch.values()) >= stop_after_rows:
            break
    return sum(rows_by_batch.values())


if __name__ == "__main__":
    main()
