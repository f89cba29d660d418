"""Push every row of a CSV, JSON or Parquet dataset into a Disque queue:

    python spark_jobs/push_rows.py /tmp/rows --queue signups --nodes 127.0.0.1:7711
    spark-submit spark_jobs/push_rows.py /tmp/rows --queue signups \\
        --nodes 127.0.0.1:7711,127.0.0.1:7712,127.0.0.1:7713 --replicate 2

It writes with the `disque` data source (df.write.format("disque")). Each
job's body is the row as JSON with a "_disque_key" field (or the value of
--body-column); the run fails, naming rows and reasons, if any row could
not be added. Exit status 0 means every row is in the queue at least once
(exactly once with --dedup: a re-run task's rows are answered, not added).
"""

from __future__ import annotations

import logging
import sys

import click

from _session import spark_session

READERS = ("csv", "json", "parquet")


def _read(spark, path: str, file_format: str | None):
    if file_format is None:
        file_format = next((f for f in READERS if path.rstrip("/").endswith("." + f)), "parquet")
    reader = spark.read
    if file_format == "csv":
        reader = reader.option("header", True).option("inferSchema", True)
    return getattr(reader, file_format)(path)


@click.command()
@click.argument("path")
@click.option("--queue", required=True, help="Queue the jobs go to.")
@click.option("--nodes", default="127.0.0.1:7711", show_default=True,
              help="Comma-separated host:port list (without --dedup, the rest are found "
                   "with HELLO).")
@click.option("--format", "file_format", type=click.Choice(READERS), default=None,
              help="Input format (default: from the extension, else parquet).")
@click.option("--replicate", type=int, default=None, help="ADDJOB REPLICATE.")
@click.option("--ttl", type=int, default=None, help="ADDJOB TTL, seconds.")
@click.option("--retry", type=int, default=None, help="ADDJOB RETRY, seconds (0: at most once).")
@click.option("--delay", type=int, default=None, help="ADDJOB DELAY, seconds.")
@click.option("--async", "asynchronous", is_flag=True, help="ADDJOB ASYNC.")
@click.option("--priority", type=int, default=None, help="ADDJOB PRIORITY (0-9).")
@click.option("--dedup", is_flag=True,
              help="Send each row key as ADDJOB's DEDUP key (rows go to the node their key "
                   "hashes to among --nodes).")
@click.option("--body-column", default=None, help="Use this column as the body.")
@click.option("--key-column", default=None,
              help="Row key from this column (default: partition and row index).")
@click.option("--batch-size", default=1000, show_default=True, help="ADDJOBs per pipelined batch.")
@click.option("--max-in-flight", default=4, show_default=True,
              help="Batches sent before their replies are read.")
@click.option("--partitions", type=int, default=None, help="Repartition the input first.")
@click.option("--password", envvar="DISQUE_PASSWORD", default=None,
              help="AUTH password (or DISQUE_PASSWORD).")
@click.option("--master", default=None, help="Spark master (default: local[*]).")
def main(path, queue, nodes, file_format, replicate, ttl, retry, delay, asynchronous, priority,
         dedup, body_column, key_column, batch_size, max_in_flight, partitions, password, master):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    spark = spark_session("disque-push-rows", master)
    from disque_py.spark import WriteFailed, register
    register(spark)
    frame = _read(spark, path, file_format)
    if partitions:
        frame = frame.repartition(partitions)
    given = {"replicate": replicate, "ttl": ttl, "retry": retry, "delay": delay,
             "priority": priority, "body_column": body_column, "key_column": key_column,
             "password": password}
    options = {name: str(value) for name, value in given.items() if value is not None}
    try:
        (frame.write.format("disque").option("queue", queue).option("nodes", nodes)
         .option("async", str(asynchronous)).option("dedup", str(dedup))
         .option("batch_size", str(batch_size)).option("max_in_flight", str(max_in_flight))
         .options(**options).mode("append").save())
    except Exception as error:      # Spark wraps the task's WriteFailed in its own error
        click.echo(f"push failed: {_reason(error, WriteFailed)}", err=True)
        spark.stop()
        sys.exit(1)
    click.echo(f"every row of {path} is in queue {queue!r}")
    spark.stop()


def _reason(error: Exception, failure: type) -> str:
    """The WriteFailed line out of Spark's wrapped task error, if it is there."""
    text = str(error)
    marker = failure.__module__ + "." + failure.__name__ + ": "
    if marker in text:
        return text[text.index(marker) + len(marker):].splitlines()[0]
    return text.splitlines()[0] if text else repr(error)


if __name__ == "__main__":
    main()
