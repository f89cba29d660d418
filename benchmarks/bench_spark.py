"""Rows per second from Spark into disque-py, beside our own pipelined load.

    python benchmarks/bench_spark.py [--rows N] [--rounds R] [--no-pin]

Two targets, each measured with both loads in the same run, alternating
round by round:

  one node        a single disque-py node (REPLICATE 1, its default alone)
  3-node cluster  three nodes in a mesh, REPLICATE 2; Spark is given node0
                  only and spreads its partitions over the three with HELLO;
                  the yardstick loads node0 (which replicates to the others)

Loads, both with 100-byte bodies in pipelined batches of 1,000 ADDJOBs:

  spark       disque_py.spark.write_jobs from a local[2] SparkSession over a
              cached DataFrame of N rows in 2 partitions (id, 50-char
              payload; the body is the row as JSON plus its row key, about
              100 bytes); the time is write_jobs' own (the Spark job, its
              tasks and every reply), not the session start-up
  yardstick   benchmarks/common.pipelined_fill: the same N ADDJOBs over 2
              asyncio connections (as many as Spark's tasks), 100-byte body

The ratio spark / yardstick is the figure quoted; the goal is >= 0.7.
Servers run on the first CPU when the machine has two or more (the load,
Spark's JVM and its Python workers on the others). Every node is flushed
(DEBUG FLUSHALL) between runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, HOST, DisqueServer, Pinning, command, encode_command,  # noqa: E402
                    median, print_commands, print_header, print_table, ratio,
                    run_async, pipelined_fill, scratch_dir, start_cluster, stop_all)

QUEUE = "spark-bench"
PARTITIONS = 2
BATCH = 1000
PAYLOAD_CHARS = 50


def spark_session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master(f"local[{PARTITIONS}]").appName("bench-spark")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def spark_rate(frame, rows: int, nodes: list[str], replicate: int) -> float:
    from disque_py.spark import write_jobs
    summary = write_jobs(frame, QUEUE, nodes, replicate=replicate, batch_size=BATCH)
    assert summary.added == rows, summary.line()
    return rows / summary.seconds


def yardstick_rate(port: int, rows: int, replicate: int) -> float:
    addjob = encode_command("ADDJOB", QUEUE, BODY, 5000, "REPLICATE", replicate)
    elapsed, errors = run_async(pipelined_fill(port, addjob, rows, connections=PARTITIONS,
                                               batch=BATCH))
    assert errors == 0, f"{errors} ADDJOBs refused"
    return rows / elapsed


def measure(name: str, servers, frame, rows: int, rounds: int, replicate: int) -> list:
    nodes = [f"{HOST}:{servers[0].port}"]
    spark, yardstick = [], []
    for round_index in range(rounds):
        runs = [("spark", lambda: spark_rate(frame, rows, nodes, replicate), spark),
                ("yardstick", lambda: yardstick_rate(servers[0].port, rows, replicate),
                 yardstick)]
        if round_index % 2:
            runs.reverse()
        for _, run, results in runs:
            results.append(run())
            for server in servers:
                command(server.port, "DEBUG", "FLUSHALL")
    return [name, median(spark), median(yardstick), ratio(median(spark), median(yardstick)),
            ", ".join(f"{value:,.0f}" for value in spark)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)
    pinning = Pinning(enabled=not args.no_pin)
    pinning.pin_this_process()            # Spark's JVM and workers inherit it
    print_header("Spark rows -> disque-py jobs, beside pipelined ADDJOB", pinning)
    session = spark_session()
    frame = session.range(args.rows, numPartitions=PARTITIONS).selectExpr(
        "id", f"repeat('x', {PAYLOAD_CHARS}) AS payload").cache()
    frame.count()
    results = []
    single = DisqueServer(scratch_dir("bench-spark-") / "node", pinning).start()
    try:
        results.append(measure("one node", [single], frame, args.rows, args.rounds, 1))
    finally:
        single.stop()
    cluster = start_cluster(pinning, 3, "bench-spark-cluster-")
    try:
        results.append(measure("3-node cluster, REPLICATE 2", cluster, frame, args.rows,
                               args.rounds, 2))
    finally:
        stop_all(cluster)
    session.stop()
    print_table(["target", "spark rows/s", "yardstick ADDJOB/s", "ratio", "spark runs"],
                results, title=f"{args.rows:,} rows, median of {args.rounds} rounds")
    print_commands([
        f"write_jobs(df, {QUEUE!r}, [node0], replicate=1|2, batch_size={BATCH}) "
        f"from local[{PARTITIONS}], df = spark.range(N, {PARTITIONS}) + payload column",
        f"pipelined_fill(node0, ADDJOB {QUEUE} <100 bytes> 5000 REPLICATE 1|2, N, "
        f"connections={PARTITIONS}, batch={BATCH})",
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
