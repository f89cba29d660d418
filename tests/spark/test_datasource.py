"""format("disque") from a local[2] SparkSession against real nodes: batch
writes land every row once and fail loudly with the server's reason;
streaming writes replayed after a failure make no job twice; the streaming
source delivers every job and acknowledges it once its batch is committed,
and again after a query died before its commit."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from disque_py.spark import register
from tests.spark.drain import KEY_FIELD, full_node, row_keys, take_all
from tests.support import HOST, wait_for

ROWS = 100_000


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    register(spark)


def nodes(*procs) -> str:
    return ",".join(f"{HOST}:{proc.port}" for proc in procs)


def frame(spark, rows: int, partitions: int = 4):
    return spark.range(rows, numPartitions=partitions).selectExpr(
        "id", "concat('user', id, '@example.com') AS email")


def disque_writer(df, queue: str, *procs, **options):
    writer = df.write.format("disque").option("queue", queue).option("nodes", nodes(*procs))
    return writer.options(**{name: str(value) for name, value in options.items()}) \
        .mode("append")


def registered_jobs(proc) -> int:
    return proc.client().info("jobs")["registered_jobs"]


# ------------------------------------------------------------ batch writes

def test_batch_write_lands_every_row_once(spark, server):
    disque_writer(frame(spark, ROWS), "batch", server, key_column="id").save()
    keys = row_keys(take_all(server.client(), "batch"))
    assert set(keys) == {str(i) for i in range(ROWS)} and max(keys.values()) == 1


def test_batch_options_reach_addjob(spark, server):
    disque_writer(frame(spark, 3, 1), "opts", server, ttl=600, retry=7, priority=8,
                  body_column="email", row_key="false").save()
    client = server.client()
    job_ids = client.execute_command("JSCAN", "QUEUE", "opts", "COUNT", 100)[1]
    assert len(job_ids) == 3
    fields = dict(zip(*[iter(client.execute_command("SHOW", job_ids[0]))] * 2))
    assert (fields[b"retry"], fields[b"priority"]) == (7, 8)
    assert fields[b"body"].startswith(b"user")


def test_batch_dedup_keys_make_a_rerun_add_nothing(spark, server):
    df = frame(spark, 1000, 2)
    disque_writer(df, "twice", server, dedup="true", key_column="id").save()
    disque_writer(df, "twice", server, dedup="true", key_column="id").save()
    assert server.client().execute_command("QLEN", "twice") == 1000
    assert server.client().info("stats")["total_dedup_hits"] >= 1000


def test_a_full_node_fails_the_write_with_oom(spark, server):
    with full_node(server.client()), pytest.raises(Exception) as failure:
        disque_writer(frame(spark, 20, 1), "full", server, key_column="id").save()
    assert "20 rows could not be added to queue 'full'" in str(failure.value)
    assert "OOM command not allowed when used memory > 'maxmemory'" in str(failure.value)


def test_a_paused_queue_fails_the_write_with_paused(spark, server):
    client = server.client()
    client.execute_command("PAUSE", "closed", "in")
    with pytest.raises(Exception) as failure:
        disque_writer(frame(spark, 5, 1), "closed", server, key_column="id").save()
    assert "rows could not be added to queue 'closed'" in str(failure.value)
    assert "PAUSED Queue paused in input, try later" in str(failure.value)


@pytest.mark.parametrize("mode, options, message", [
    ("overwrite", {}, "use mode('append')"),
    ("append", {"priority": "high"}, "option priority must be an integer"),
    ("append", {"dedup": "maybe"}, "option dedup must be true or false"),
    ("append", {"key_column": "nope"}, "no column 'nope'"),
    ("append", {"colour": "red"}, "unknown option(s) colour"),
])
def test_bad_options_are_refused_before_any_row(spark, server, mode, options, message):
    writer = disque_writer(frame(spark, 5, 1), "refused", server, **options).mode(mode)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        writer.save()
    assert server.client().execute_command("QLEN", "refused") == 0


# -------------------------------------------------------- streaming writes

def _failing_once(marker, fail_at: int, ports: list[int], queued: int):
    """A column that raises the first time row `fail_at` is computed, once
    the nodes queued `queued` jobs (so the failed batch added some rows)."""
    from pyspark.sql.functions import udf

    def passing(value):
        if value == fail_at and not marker.exists():
            import redis

            from tests.support import HOST, wait_for
            clients = [redis.Redis(host=HOST, port=port) for port in ports]
            wait_for(lambda: sum(c.execute_command("QLEN", "replayed") for c in clients)
                     >= queued, timeout=60, message="rows added before the failure")
            marker.write_text("failed once")
            raise RuntimeError("planned failure")
        return value
    # Row at a time: an Arrow UDF needs pandas, which the writer never does.
    return udf(passing, "long", useArrow=False)


def test_a_replayed_micro_batch_adds_each_row_once(spark, make_cluster, tmp_path):
    cluster = make_cluster(3)
    source = tmp_path / "input"
    frame(spark, 4000, 2).write.parquet(str(source))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    fail = _failing_once(tmp_path / "failed", 3999, [proc.port for proc in cluster], 1000)
    try:
        def run_query():
            stream = spark.readStream.schema("id long, email string").parquet(str(source))
            query = (stream.withColumn("id", fail("id")).writeStream.format("disque")
                     .option("queue", "replayed").option("nodes", nodes(*cluster))
                     .option("batch_size", "100").option("replicate", "2")
                     .option("checkpointLocation", str(tmp_path / "checkpoint"))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
        with pytest.raises(Exception, match="planned failure"):
            run_query()
        added_before = sum(proc.client().execute_command("QLEN", "replayed")
                           for proc in cluster)
        run_query()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert 0 < added_before < 4000, "the failure came before any row, or after all"
    jobs = _jobs_by_key(cluster, "replayed")     # every copy, queued or not
    assert len(jobs) == 4000
    assert all(len(ids) == 1 for ids in jobs.values()), "a row made two jobs"
    assert sum(proc.client().info("stats")["total_dedup_hits"] for proc in cluster) > 0
    assert all(proc.client().execute_command("QLEN", "replayed") for proc in cluster), \
        "keys did not spread over the nodes"


def _jobs_by_key(procs, queue: str) -> dict[str, set[bytes]]:
    """Row key -> the IDs of the jobs carrying it, over every copy on `procs`."""
    found: dict[str, set[bytes]] = {}
    for proc in procs:
        cursor = b"0"
        while True:
            cursor, jobs = proc.client().execute_command(
                "JSCAN", cursor, "QUEUE", queue, "COUNT", 1000, "REPLY", "all")
            for job in jobs:
                fields = dict(zip(job[::2], job[1::2]))
                key = json.loads(fields[b"body"])[KEY_FIELD]
                found.setdefault(key, set()).add(fields[b"id"])
            if cursor == b"0":
                break
    return found


# --------------------------------------------------------- streaming source

def _fill(client, queue: str, count: int, retry: int) -> set[bytes]:
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        pipe.execute_command("ADDJOB", queue, json.dumps({"n": i}), 0, "RETRY", retry)
    return set(pipe.execute())


def _read_stream(spark, queue: str, *procs):
    return (spark.readStream.format("disque").option("queues", queue)
            .option("nodes", nodes(*procs)).option("max_jobs_per_batch", "700").load())


def test_the_source_delivers_and_acknowledges_every_job_once(spark, server):
    ids = _fill(server.client(), "source", 3000, retry=300)
    query = _read_stream(spark, "source", server).writeStream.format("memory") \
        .queryName("delivered").start()
    try:
        wait_for(lambda: registered_jobs(server) == 0, timeout=120,
                 message="every job delivered and acknowledged")
    finally:
        query.stop()
    rows = spark.sql("SELECT id, queue, nacks FROM delivered").collect()
    assert Counter(row.id.encode() for row in rows) == Counter(ids)
    assert {row.queue for row in rows} == {"source"}


def test_a_query_killed_before_its_commit_gets_the_jobs_again(spark, server, tmp_path):
    ids = _fill(server.client(), "again", 500, retry=1)
    seen: list[str] = []
    state = {"failed": False}

    def sink(batch, batch_id):
        if not state["failed"]:
            state["failed"] = True
            raise RuntimeError("sink down")
        seen.extend(row.id for row in batch.select("id").collect())

    def start():
        return _read_stream(spark, "again", server).writeStream.foreachBatch(sink) \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    first = start()
    with pytest.raises(Exception, match="sink down"):
        first.awaitTermination(timeout=120)
    assert registered_jobs(server) == 500, "a job was acknowledged before its commit"
    second = start()
    try:
        wait_for(lambda: registered_jobs(server) == 0, timeout=120,
                 message="the jobs came back after RETRY and were acknowledged")
    finally:
        second.stop()
    assert {job_id.encode() for job_id in seen} == ids
