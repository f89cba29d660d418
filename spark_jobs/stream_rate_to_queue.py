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

import click

from _session import spark_session


@click.command()
@click.option("--queue", required=True, help="Queue the jobs go to.")
@click.option("--nodes", default="127.0.0.1:7711", show_default=True,
              help="Comma-separated host:port list: every node a key may be routed to.")
@click.option("--rows-per-second", default=100, show_default=True)
@click.option("--checkpoint", required=True, help="Spark's checkpoint directory for the query.")
@click.option("--seconds", type=float, default=None,
              help="Stop after this long (default: run until interrupted).")
@click.option("--replicate", type=int, default=None, help="ADDJOB REPLICATE.")
@click.option("--master", default=None, help="Spark master (default: local[*]).")
def main(queue, nodes, rows_per_second, checkpoint, seconds, replicate, master):
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
    query.awaitTermination(seconds)
    query.stop()
    progress = query.lastProgress or {}
    click.echo(f"stopped after batch {progress.get('batchId', '-')}: "
               f"{progress.get('numInputRows', 0)} rows in the last batch")
    spark.stop()


if __name__ == "__main__":
    main()
