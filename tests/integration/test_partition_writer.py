"""The Spark writer's connection logic without Spark: PartitionWriter
against real nodes (node choice from HELLO, leaving nodes skipped, retries
that give up loudly, exact server errors)."""

from __future__ import annotations

import pytest

from disque_py.spark.partition_writer import PartitionWriter, WriteFailed, WriteOptions
from tests.cluster.harness import call, poll
from tests.support import HOST, free_port

ROWS = 2000


def rows(count: int = ROWS):
    return ((str(i), b"row %d" % i) for i in range(count))


def address(proc) -> str:
    return f"{HOST}:{proc.port}"


def test_rows_arrive_in_pipelined_batches(server):
    writer = PartitionWriter(WriteOptions("w", [address(server)], batch_size=128,
                                          max_in_flight=3), 0)
    stats = writer.write(rows())
    assert (stats.added, stats.retried, stats.failed) == (ROWS, 0, 0)
    assert server.client().execute_command("QLEN", "w") == ROWS


def test_an_unreachable_node_is_skipped(server):
    dead = f"{HOST}:{free_port()}"
    stats = PartitionWriter(WriteOptions("w", [dead, address(server)]), 0).write(rows(10))
    assert stats.added == 10 and stats.nodes_used == {address(server)}


def test_a_leaving_node_is_skipped_for_one_hello_lists(fresh_cluster):
    cluster = fresh_cluster(2)
    assert call(cluster[0], "CLUSTER", "LEAVING", "yes") == b"OK"
    poll(lambda: b"leaving" in call(cluster[1], "CLUSTER", "NODES"), 10,
         "node 1 sees node 0 leaving")
    stats = PartitionWriter(WriteOptions("w", [address(cluster[0])], replicate=1), 0) \
        .write(rows())
    assert stats.added == ROWS and stats.nodes_used == {address(cluster[1])}
    assert call(cluster[1], "QLEN", "w") == ROWS
    assert call(cluster[0], "QLEN", "w") == 0


def test_norepl_is_retried_then_fails_naming_rows_and_reason(server):
    options = WriteOptions("w", [address(server)], replicate=2, max_attempts=2)
    with pytest.raises(WriteFailed) as failure:
        PartitionWriter(options, 7).write(rows(5))
    text = str(failure.value)
    assert text.startswith("5 rows could not be added to queue 'w' (partition 7): 0: ")
    assert "NOREPL Not enough reachable nodes for the requested replication level" in text


def test_refusals_fail_at_once_with_the_servers_words(server):
    server.client().execute_command("ADDJOB", "w", "first", 0)
    options = WriteOptions("w", [address(server)], maxlen=1)
    writer = PartitionWriter(options, 0)
    with pytest.raises(WriteFailed) as failure:
        writer.write(rows(3))
    assert "MAXLEN Queue is already longer than the specified MAXLEN count" in str(failure.value)
    assert writer.stats.retried == 0 and writer.stats.failed == 3
