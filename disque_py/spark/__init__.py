"""disque-py for PySpark: DataFrame rows as jobs, and jobs as a stream.

    from disque_py.spark import register
    register(spark)                                   # format("disque")
    df.write.format("disque").option("queue", "q").option("nodes", "h:7711").save()

  * datasource.py: DisqueDataSource, the `disque` data source (batch and
    streaming writes; the streaming source lives in stream_reader.py);
  * frame.py: write_jobs(df, ...), the same writer as a function call;
  * partition_writer.py: one partition's pipelined ADDJOBs (no Spark
    needed), rows.py: rows as job bodies.

pyspark is imported here, never by the server.
"""

from disque_py.spark.datasource import DisqueDataSource, PartitionWritten
from disque_py.spark.frame import WriteSummary, write_jobs
from disque_py.spark.partition_writer import WriteFailed

__all__ = ["DisqueDataSource", "PartitionWritten", "WriteFailed", "WriteSummary", "register",
           "write_jobs"]


def register(spark) -> None:
    """Make format("disque") known to this SparkSession."""
    spark.dataSource.register(DisqueDataSource)
