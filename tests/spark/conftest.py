"""A local[2] SparkSession shared by the Spark tests (real nodes come from
the fixtures of tests/conftest.py).

Spark runs its Python workers with this interpreter (it has disque_py) and
binds loopback only. Starting the JVM takes seconds, so there is one
session for the whole run; a missing pyspark or Java is a failure, never a
skip.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("disque-py-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "4")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
