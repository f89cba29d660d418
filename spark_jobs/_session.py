"""The SparkSession the example jobs share: spark-submit's settings when run
under it, a local one (every core, loopback only) when run with python."""

from __future__ import annotations

import os
import sys


def spark_session(app_name: str, master: str | None):
    # Plain `python job.py`: the executors' Python must be this one (it has
    # disque_py), and a laptop's Spark should not bind a public interface.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app_name)
    if master:          # else spark-submit's --master, or local[*] when there is none
        builder = builder.master(master)
    return builder.getOrCreate()
