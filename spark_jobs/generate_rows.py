"""Write a sample dataset of N rows (CSV, JSON or Parquet) for push_rows.py,
so the example runs offline:

    python spark_jobs/generate_rows.py --rows 100000 --format parquet /tmp/rows

Columns: id (unique), email, name, amount, country, created_at.
"""

from __future__ import annotations

import click

from _session import spark_session

FORMATS = ("csv", "json", "parquet")


@click.command()
@click.argument("output")
@click.option("--rows", default=100_000, show_default=True, help="How many rows.")
@click.option("--format", "file_format", type=click.Choice(FORMATS), default="parquet",
              show_default=True)
@click.option("--partitions", default=4, show_default=True, help="Files written.")
@click.option("--master", default=None, help="Spark master (default: local[*]).")
def main(output: str, rows: int, file_format: str, partitions: int, master: str | None) -> None:
    spark = spark_session("disque-generate-rows", master)
    frame = spark.range(rows, numPartitions=partitions).selectExpr(
        "id",
        "concat('user', id, '@example.com') AS email",
        "concat('User ', id) AS name",
        "round((id * 7919 % 100000) / 100.0, 2) AS amount",
        "element_at(array('FR', 'DE', 'IT', 'ES', 'US'), cast(id % 5 + 1 AS int)) AS country",
        "timestamp_seconds(1700000000 + id) AS created_at",
    )
    writer = frame.write.mode("overwrite")
    if file_format == "csv":
        writer = writer.option("header", True)
    getattr(writer, file_format)(output)
    click.echo(f"wrote {rows} rows as {file_format} to {output}")
    spark.stop()


if __name__ == "__main__":
    main()
