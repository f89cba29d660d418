"""A streaming job that reads Disque queues and writes Parquet:

    python spark_jobs/stream_queue_to_parquet.py --queues ticks /tmp/ticks-parquet \\
        --checkpoint /tmp/ticks-read-checkpoint --seconds 30

readStream.format("disque") takes up to --max-jobs jobs per micro-batch
(GETJOB NOHANG ... WITHCOUNTERS) and acknowledges them once Spark commits
the batch, after the Parquet files are written: a job is in the output at
least once (twice if the job died between the write and the commit; the
"id" column tells repeats apart). Columns: queue, id, body (binary; here
cast to a string), nacks, additional_deliveries.
"""

from __future__ import annotations

import logging

import click

from _session import spark_session


@click.command()
@click.argument("output")
@click.option("--queues", required=True, help="Comma-separated queue names.")
@click.option("--nodes", default="127.0.0.1:7711", show_default=True,
              help="Comma-separated host:port list to take jobs from.")
@click.option("--checkpoint", required=True, help="Spark's checkpoint directory for the query.")
@click.option("--max-jobs", default=1000, show_default=True, help="Jobs per micro-batch, at most.")
@click.option("--seconds", type=float, default=None,
              help="Stop after this long (default: run until interrupted).")
@click.option("--master", default=None, help="Spark master (default: local[*]).")
def main(output, queues, nodes, checkpoint, max_jobs, seconds, master):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    spark = spark_session("disque-stream-to-parquet", master)
    from disque_py.spark import register
    register(spark)
    jobs = (spark.readStream.format("disque").option("queues", queues).option("nodes", nodes)
            .option("max_jobs_per_batch", str(max_jobs)).load()
            .selectExpr("queue", "id", "CAST(body AS STRING) AS body", "nacks",
                        "additional_deliveries"))
    query = (jobs.writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination(seconds)
    query.stop()
    click.echo(f"wrote jobs to {output}")
    spark.stop()


if __name__ == "__main__":
    main()
