"""Rows per second from Spark into disque-py and back, beside redis-benchmark.

    python benchmarks/bench_spark.py [--rows N] [--rounds R] [--no-pin]

Two targets, every load measured in the same run, alternating round by round:

  one node        a single disque-py node (REPLICATE 1, its default alone)
  3-node cluster  three nodes in a mesh, REPLICATE 2; Spark is given the three
                  nodes, redis-benchmark loads node0 (which replicates)

Loads, all with ~100-byte bodies:

  data source  df.write.format("disque") from a local[2] SparkSession over a
               cached DataFrame of N rows in 2 partitions (id, 50-char
               payload; the body is the row as JSON plus its row key, about
               100 bytes); the time is save()'s own (the Spark job, its
               tasks and every reply), not the session start-up nor the
               warm-up (one untimed write of each Spark load first)
  write_jobs   the same writer called as a function (disque_py.spark.write_jobs)
  yardstick    redis-benchmark -c 50 -P 16 ADDJOB <100 bytes> against node0,
               N requests
  source read  readStream.format("disque") into Spark's noop sink, from N jobs
               queued on the node(s) (max_jobs_per_batch 50,000): rows/s from
               the query's start until every job was delivered and acknowledged

The ratios against the yardstick are the figures quoted; the goal for the
data source into one node is >= 0.7. Servers run on the first CPU when the
machine has two or more (the load, Spark's JVM and its Python workers on the
others). Every node is flushed (DEBUG FLUSHALL) between runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (BODY, HOST, DisqueServer, Pinning, command, info,  # noqa: E402
                    median, pipelined_fill, print_commands, print_header, print_table, ratio,
                    redis_benchmark_command, run_async, run_redis_benchmark, scratch_dir,
                    start_cluster, stop_all, encode_command)

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


READ_BATCH = 50_000
READ_TIMEOUT_S = 600


def datasource_rate(frame, rows: int, nodes: list[str], replicate: int) -> float:
    started = time.perf_counter()
    (frame.write.format("disque").option("queue", QUEUE).option("nodes", ",".join(nodes))
     .option("replicate", str(replicate)).option("batch_size", str(BATCH))
     .mode("append").save())
    return rows / (time.perf_counter() - started)


def write_jobs_rate(frame, rows: int, nodes: list[str], replicate: int) -> float:
    from disque_py.spark import write_jobs
    summary = write_jobs(frame, QUEUE, nodes, replicate=replicate, batch_size=BATCH)
    assert summary.added == rows, summary.line()
    return rows / summary.seconds


def yardstick_rate(server, rows: int, replicate: int) -> float:
    cmd = redis_benchmark_command(server.port, rows, clients=50, pipeline=16, command_args=(
        "ADDJOB", QUEUE, BODY.decode(), "5000", "REPLICATE", str(replicate)))
    rate, _, _ = run_redis_benchmark(cmd, server.pid)
    return rate


def read_rate(session, servers, rows: int, replicate: int) -> float:
    """Queue `rows` jobs, then read them all with the source."""
    addjob = encode_command("ADDJOB", QUEUE, BODY, 5000, "REPLICATE", replicate, "RETRY", 600)
    run_async(pipelined_fill(servers[0].port, addjob, rows, connections=PARTITIONS, batch=BATCH))
    nodes = ",".join(f"{HOST}:{server.port}" for server in servers)
    started = time.perf_counter()
    query = (session.readStream.format("disque").option("queues", QUEUE).option("nodes", nodes)
             .option("max_jobs_per_batch", str(READ_BATCH)).load()
             .writeStream.format("noop").start())
    try:
        while any(_registered(server) for server in servers):
            if time.perf_counter() - started > READ_TIMEOUT_S:
                raise RuntimeError("the source did not drain the queue")
            time.sleep(0.05)
        return rows / (time.perf_counter() - started)
    finally:
        query.stop()


def _registered(server) -> int:
    return int(info(server.port, "jobs")["registered_jobs"])


def measure(name: str, session, servers, frame, rows: int, rounds: int,
            replicate: int) -> list:
    nodes = [f"{HOST}:{server.port}" for server in servers]
    loads = {"data source": lambda: datasource_rate(frame, rows, nodes, replicate),
             "write_jobs": lambda: write_jobs_rate(frame, rows, nodes[:1], replicate),
             "yardstick": lambda: yardstick_rate(servers[0], rows, replicate),
             "source read": lambda: read_rate(session, servers, rows, replicate)}
    results: dict[str, list[float]] = {label: [] for label in loads}
    # Spark's start-up is not the writer's rate: the JVM's JIT and the Python
    # workers warm up on one untimed write of each kind first.
    for label in ("data source", "write_jobs"):
        loads[label]()
        for server in servers:
            command(server.port, "DEBUG", "FLUSHALL")
    for round_index in range(rounds):
        order = list(loads)
        if round_index % 2:
            order.reverse()
        for label in order:
            results[label].append(loads[label]())
            for server in servers:
                command(server.port, "DEBUG", "FLUSHALL")
    medians = {label: median(found) for label, found in results.items()}
    return [[name, label, medians[label], ratio(medians[label], medians["yardstick"]),
             ", ".join(f"{value:,.0f}" for value in results[label])] for label in loads]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--only", choices=("one", "cluster"), help="one target only")
    args = parser.parse_args(argv)
    pinning = Pinning(enabled=not args.no_pin)
    pinning.pin_this_process()            # Spark's JVM and workers inherit it
    print_header("Spark rows -> disque-py jobs, beside pipelined ADDJOB", pinning)
    session = spark_session()
    frame = session.range(args.rows, numPartitions=PARTITIONS).selectExpr(
        "id", f"repeat('x', {PAYLOAD_CHARS}) AS payload").cache()
    frame.count()
    results = []
    from disque_py.spark import register
    register(session)
    if args.only != "cluster":
        single = DisqueServer(scratch_dir("bench-spark-") / "node", pinning).start()
        try:
            results += measure("one node", session, [single], frame, args.rows, args.rounds, 1)
        finally:
            single.stop()
    if args.only != "one":
        cluster = start_cluster(pinning, 3, "bench-spark-cluster-")
        try:
            results += measure("3-node cluster, REPLICATE 2", session, cluster, frame,
                               args.rows, args.rounds, 2)
        finally:
            stop_all(cluster)
    session.stop()
    print_table(["target", "load", "rows/s (median)", "/ yardstick", "runs"],
                results, title=f"{args.rows:,} rows, median of {args.rounds} rounds")
    print_commands([
        f'df.write.format("disque").option("queue", {QUEUE!r}).option("nodes", <nodes>)'
        f'.option("replicate", 1|2).option("batch_size", {BATCH}).save() from local[{PARTITIONS}],'
        f" df = spark.range(N, {PARTITIONS}) + payload column",
        f"write_jobs(df, {QUEUE!r}, [node0], replicate=1|2, batch_size={BATCH})",
        redis_benchmark_command(0, args.rows, 50, 16, command_args=(
            "ADDJOB", QUEUE, "<100 bytes>", "5000", "REPLICATE", "1|2")),
        f'spark.readStream.format("disque").option("queues", {QUEUE!r})'
        f'.option("max_jobs_per_batch", {READ_BATCH}).load().writeStream.format("noop")',
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
