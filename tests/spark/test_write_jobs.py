"""write_jobs from a local[2] SparkSession into real nodes: every row
arrives (row keys compared, none missing, none extra), a node killed in the
middle of a write does not lose rows, and refusals fail the Spark job with
the server's error and the rows it concerns."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

from disque_py.spark import write_jobs
from tests.spark.drain import drain_until, full_node, held_keys, row_keys, take_all
from tests.support import HOST, wait_for

ROWS = 100_000
PARTITIONS = 4


def address(proc) -> str:
    return f"{HOST}:{proc.port}"


def frame(spark, rows: int = ROWS, partitions: int = PARTITIONS):
    return spark.range(rows, numPartitions=partitions).selectExpr(
        "id", "concat('user', id, '@example.com') AS email", "id * 1.5 AS amount")


def test_every_row_reaches_one_node_once(spark, server):
    summary = write_jobs(frame(spark), "rows", [address(server)], key="id")
    assert (summary.rows, summary.added, summary.failed) == (ROWS, ROWS, 0)
    bodies = take_all(server.client(), "rows")
    keys = row_keys(bodies)
    assert set(keys) == {str(i) for i in range(ROWS)}
    assert max(keys.values()) == 1 and len(bodies) == ROWS
    sample = json.loads(bodies[0])
    assert set(sample) == {"id", "email", "amount", "_disque_key"}
    assert sample["email"] == f"user{sample['id']}@example.com"


def test_default_row_keys_are_partition_and_index(spark, server):
    write_jobs(frame(spark, 1000, 2), "keys", [address(server)])
    keys = row_keys(take_all(server.client(), "keys"))
    assert set(keys) == {f"{p}-{i}" for p in range(2) for i in range(500)}


def test_body_column_and_function(spark, server):
    df = frame(spark, 10, 1)
    write_jobs(df, "raw", [address(server)], body="email", row_key=False)
    assert sorted(take_all(server.client(), "raw")) == \
        sorted(f"user{i}@example.com".encode() for i in range(10))
    write_jobs(df, "wrapped", [address(server)], body=lambda row: {"to": row.email}, key="id")
    bodies = [json.loads(b) for b in take_all(server.client(), "wrapped")]
    assert sorted((b["_disque_key"], b["to"]) for b in bodies) == \
        sorted((str(i), f"user{i}@example.com") for i in range(10))


def test_job_options_reach_addjob(spark, server):
    write_jobs(frame(spark, 3, 1), "opts", [address(server)], ttl=600, retry=0, delay=100)
    client = server.client()
    job_ids = client.execute_command("JSCAN", "QUEUE", "opts", "COUNT", 100)[1]
    assert len(job_ids) == 3
    show = client.execute_command("SHOW", job_ids[0])
    fields = dict(zip(show[::2], show[1::2]))
    assert (fields[b"state"], fields[b"retry"], fields[b"delay"]) == (b"active", 0, 100)
    assert 590 <= fields[b"ttl"] <= 600
    assert job_ids[0].endswith(b"a") or int(job_ids[0][-4:], 16) % 2 == 0   # at most once


def test_replicated_write_to_three_nodes_spreads_and_arrives(spark, make_cluster):
    cluster = make_cluster(3)
    summary = write_jobs(frame(spark), "spread", [address(cluster[0])], key="id", replicate=2)
    assert (summary.added, summary.failed) == (ROWS, 0)
    queued = [proc.client().execute_command("QLEN", "spread") for proc in cluster]
    assert all(count > 0 for count in queued), f"HELLO did not spread partitions: {queued}"
    seen = drain_until([proc.client() for proc in cluster], "spread",
                       {str(i) for i in range(ROWS)}, timeout=30)
    assert set(seen) == {str(i) for i in range(ROWS)}
    if summary.retried == 0:           # nothing sent twice, so nothing queued twice
        assert sum(seen.values()) == ROWS


def test_node_killed_mid_write_loses_no_rows(spark, fresh_cluster):
    cluster = fresh_cluster(3)
    victim = cluster[1]
    outcome: dict = {}

    def write():
        try:
            outcome["summary"] = write_jobs(
                frame(spark), "survive", [address(proc) for proc in cluster],
                key="id", replicate=2, timeout_ms=2000)
        except Exception as error:     # the test reports it below
            outcome["error"] = error
    writer = threading.Thread(target=write)
    writer.start()
    wait_for(lambda: victim.client().execute_command("QLEN", "survive") > 3000
             or not writer.is_alive(), timeout=60, message="the victim took some rows")
    assert writer.is_alive(), "the write finished before the node could be killed"
    taken = victim.client().execute_command("QLEN", "survive")
    victim.kill()
    writer.join(timeout=120)
    assert not writer.is_alive()
    assert "error" not in outcome, f"write failed: {outcome.get('error')}"
    if taken < ROWS // PARTITIONS:      # a partition was writing to it: it moved
        assert outcome["summary"].retried > 0
    survivors = [proc for proc in cluster if proc is not victim]
    # Every row the victim took has its second copy on a survivor; the rows
    # it had not answered were sent again. Together: every row, nothing else.
    held = sum((held_keys(proc.client(), "survive") for proc in survivors), Counter())
    expected = {str(i) for i in range(ROWS)}
    assert expected - set(held) == set(), "rows lost"
    assert set(held) - expected == set()


def test_maxlen_refusal_fails_the_job_naming_rows(spark, server):
    with pytest.raises(Exception) as failure:
        write_jobs(frame(spark, 50, 1), "short", [address(server)], key="id", maxlen=10)
    text = str(failure.value)
    assert "rows could not be added to queue 'short'" in text
    assert "MAXLEN Queue is already longer than the specified MAXLEN count" in text
    assert server.client().execute_command("QLEN", "short") == 10


def test_oom_refusal_fails_the_job_with_oom(spark, server):
    client = server.client()
    with full_node(client), pytest.raises(Exception) as failure:
        write_jobs(frame(spark, 20, 1), "full", [address(server)], key="id")
    text = str(failure.value)
    assert "20 rows could not be added to queue 'full'" in text
    assert "OOM command not allowed when used memory > 'maxmemory'" in text
    assert client.execute_command("QLEN", "full") == 0


def test_unreachable_nodes_fail_loudly(spark):
    with pytest.raises(Exception) as failure:
        write_jobs(frame(spark, 5, 1), "nowhere", [f"{HOST}:1"])
    assert "no node reachable" in str(failure.value)
