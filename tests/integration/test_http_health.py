"""/healthz and /readyz of real nodes, through kills, restarts, loads and disk faults.

/healthz answers while the loop turns; /readyz is 503 with one line per
reason while the AOF loads, while the AOF cannot be written (DEBUG
AOF-FAULT, the suite's disk fault tool), and while the node reaches less
than half its cluster; 200 "ok" otherwise. Every wait is a poll with a
deadline.
"""

from __future__ import annotations

import pytest
import redis

from tests.cluster.harness import fail_deadline_s
from disque_py.tools.large_aof import write_large_aof
from tests.support import wait_for
from tests.web_support import http_cluster, http_get, http_server

OK = b"ok\n"
AOF_NAME = "disque.aof"
LOADING_JOBS = 300_000         # an AOF whose load lasts long enough to be seen
LOAD_DEADLINE_S = 120
RECOVERY_S = 15                # the AOF writer retries once a second


def status(port: int, path: str) -> tuple[int, bytes]:
    code, _, body = http_get(port, path)
    return code, body


def refused(port: int) -> bool:
    try:
        http_get(port, "/healthz", timeout=2)
    except OSError:
        return True
    return False


@pytest.fixture
def aof_node(tmp_path):
    proc, http_port = http_server(tmp_path / "node", "--appendonly", "yes",
                                  "--appendfsync", "always")
    proc.start()
    proc.http_port = http_port
    yield proc
    proc.stop()


def test_a_started_node_is_live_and_ready(aof_node):
    assert status(aof_node.http_port, "/healthz") == (200, OK)
    assert status(aof_node.http_port, "/readyz") == (200, OK)


@pytest.mark.parametrize("fault", ["enospc", "eio"])
def test_not_ready_while_the_aof_cannot_be_written_ready_again_after(aof_node, fault):
    client = aof_node.client()
    client.execute_command("DEBUG", "AOF-FAULT", fault, 1000)
    # Closed without a reply (appendfsync always), then -MISCONF to redis-py's retry.
    with pytest.raises(redis.ResponseError, match="MISCONF"):
        client.execute_command("ADDJOB", "q", "doomed", 0)
    code, body = status(aof_node.http_port, "/readyz")
    assert code == 503 and body.startswith(b"aof: write commands are refused: "), body
    assert status(aof_node.http_port, "/healthz") == (200, OK)   # restarting mends no disk
    aof_node.client().execute_command("DEBUG", "AOF-FAULT", "none")
    wait_for(lambda: status(aof_node.http_port, "/readyz") == (200, OK), RECOVERY_S,
             message="readiness once the disk works again")


def test_kill_and_restart_ends_and_brings_back_both_answers(aof_node):
    aof_node.client().execute_command("ADDJOB", "q", "kept", 0)
    aof_node.kill()
    assert refused(aof_node.http_port)
    aof_node.start()
    assert status(aof_node.http_port, "/healthz") == (200, OK)
    wait_for(lambda: status(aof_node.http_port, "/readyz") == (200, OK), 10)
    assert aof_node.client().info("jobs")["registered_jobs"] == 1     # loaded from the AOF


def test_shutdown_closes_the_http_port(aof_node):
    aof_node.stop()
    assert refused(aof_node.http_port)


def test_not_ready_while_the_aof_loads_live_meanwhile(tmp_path):
    directory = tmp_path / "node"
    directory.mkdir()
    write_large_aof(directory / AOF_NAME, LOADING_JOBS)
    proc, http_port = http_server(directory, "--appendonly", "yes")
    proc.start(wait=False)
    try:
        seen = wait_for(lambda: _loading_answer(http_port), LOAD_DEADLINE_S,
                        message="a /readyz answer during the load")
        assert seen[0] == 503 and seen[1].startswith(b"loading: the AOF is being loaded ("), \
            f"the load was over before /readyz saw it ({seen}): make the AOF larger"
        assert status(http_port, "/healthz") == (200, OK)
        wait_for(lambda: status(http_port, "/readyz") == (200, OK), LOAD_DEADLINE_S,
                 message="readiness once loaded")
    finally:
        proc.stop(timeout=60)


def _loading_answer(http_port: int):
    try:
        return status(http_port, "/readyz")
    except OSError:
        return None                  # not listening yet


def test_ready_with_half_the_cluster_not_with_less(tmp_path):
    cluster, http_ports = http_cluster(tmp_path, 3)
    try:
        cluster.start()
        cluster.meet_chain()
        assert all(status(port, "/readyz") == (200, OK) for port in http_ports)
        cluster[2].kill()
        wait_for(lambda: {"fail?", "fail"} & cluster.flags_seen(cluster[0], cluster.ids[2]),
                 fail_deadline_s(), message="node 2 seen failing")
        assert status(http_ports[0], "/readyz") == (200, OK)          # 2 of 3
        cluster[1].kill()
        wait_for(lambda: status(http_ports[0], "/readyz")[0] == 503, fail_deadline_s(),
                 message="node 0 alone with two failing peers")
        assert status(http_ports[0], "/readyz")[1] == \
            b"cluster: 1 of 3 nodes reachable (at least half are needed)\n"
        assert status(http_ports[0], "/healthz") == (200, OK)
        cluster[1].start()
        cluster[2].start()
        wait_for(lambda: all(status(port, "/readyz") == (200, OK) for port in http_ports),
                 fail_deadline_s() + 10, message="every node ready after the restarts")
    finally:
        cluster.stop()
