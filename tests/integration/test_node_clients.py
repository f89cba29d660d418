"""Node.js Disque clients from npm, driven unchanged against real servers.

The libraries are pinned in tests/clients/node/package.json and
package-lock.json; `make test` installs them there with `npm ci`. Each script
uses a library as its README shows, checks every reply itself and prints one
JSON report; these tests run it with a deadline, then check the outcome on
the servers with our own commands (SHOW, QLEN, HELLO, CLUSTER NODES).

- thunk-disque 0.5.13 is cluster-aware: it sends a bare HELLO on every
  connection and keeps reply[1], the node ID, and its first 8 characters;
  SHOW, WORKING, NACK, ACKJOB, FASTACK, DELJOB, ENQUEUE and DEQUEUE go to the
  node whose 8 characters are characters 2..10 of the job ID, other commands
  to its first connected node. It does not read the node list of HELLO (it
  talks only to the addresses it was given); with autoMeet it sends CLUSTER
  MEET <ip> <port> itself.
- disqueue-node 2.0.2 connects through node_redis 2.8, whose ready check
  parses INFO, and maps GETJOB WITHCOUNTERS by its "nacks" and
  "additional-deliveries" labels and INFO by its "# Section" headers.

Every expectation in the scripts was first checked against the original
Disque 1.0-rc1 binary with the same scripts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, call, hello, poll, qlen, show, states
from tests.support import HOST

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"
SCRIPT_TIMEOUT_S = 90          # a 2-core machine running benchmarks is slow

pytestmark = pytest.mark.timeout(240)


def run_node(script: str, *args) -> dict:
    """Run a client script; its report when every check passed, else fail."""
    node = shutil.which("node")
    assert node, "node is not installed (make test installs Node.js and npm)"
    for package in ("thunk-disque", "disqueue-node"):
        assert (NODE_DIR / "node_modules" / package / "package.json").is_file(), (
            f"{package} is not installed in {NODE_DIR}: run `make node-deps` "
            f"(npm ci there)")
    env = dict(os.environ, NODE_CLIENT_DEADLINE_MS=str((SCRIPT_TIMEOUT_S - 15) * 1000))
    proc = subprocess.run([node, script, *map(str, args)], cwd=NODE_DIR, env=env,
                          capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing (exit {proc.returncode}):\n{proc.stderr}"
    result = json.loads(lines[-1])
    assert proc.returncode == 0 and not result["failures"], (
        f"{script} {' '.join(map(str, args))} exited {proc.returncode}; failures:\n"
        + json.dumps(result["failures"], indent=1, ensure_ascii=False)
        + f"\nstderr:\n{proc.stderr}")
    return result["report"]


def node_id(proc) -> str:
    return call(proc, "HELLO")[1].decode()


# ------------------------------------------------------------------ thunk-disque

def test_thunk_disque_on_one_node(server):
    report = run_node("thunk_disque.js", "single", server.port)
    me = node_id(server)
    assert report["connection"] == {"address": f"[{HOST}]:{server.port}", "nid": me,
                                    "sid": me[:8]}
    assert report["hello"][:2] == [1, me]
    ids = report["ids"]
    assert all(job_id.startswith(f"D-{me[:8]}-") for job_id in ids.values())
    assert ids["once"].endswith("-05a0") and ids["b"].endswith("-0001")
    # Acked, fast-acked and deleted through the library: gone here too.
    assert all(show(server, job_id) is None for job_id in ids.values())
    assert qlen(server, "tq") == 0
    assert (qlen(server, "s1"), qlen(server, "s2")) == (1, 1)
    assert report["qstat"]["jobs-in"] == 2 and report["errors"] == []
    assert call(server, "QSTAT", "s1")[-1] == b"none"      # unpaused by the library


def test_thunk_disque_routes_by_job_id_in_a_cluster(fresh_cluster):
    cluster = fresh_cluster(3)
    ports = [proc.port for proc in cluster]
    report = run_node("thunk_disque.js", "cluster", *ports)

    # The client learned each node's ID from HELLO, on the right connection.
    learned = {conn["address"]: conn["nid"] for conn in report["connections"]}
    assert learned == {f"[{HOST}]:{proc.port}": node_id(proc) for proc in cluster}
    _, _, listed = hello(cluster[0])
    assert sorted(entry[0] for entry in report["hello"][2:]) == sorted(listed)

    # A job placed on node i (REPLICATE 1) was shown, worked, nacked and
    # finished through the cluster client, which sent it to node i.
    for entry in report["routed"]:
        index, job_id = entry["node"], entry["id"]
        assert job_id[2:10] == cluster.ids[index][:8]
        assert entry["show"][1:] == ["queued", 1, f"job on node {index}"]
        assert entry["finished"] == {"value": 1}, entry
        assert states(cluster, job_id) == {}

    # Replicated to all three, acked through the client: the ack reaches
    # every node and the job is garbage collected everywhere.
    for job_id in (report["replicated"], report["fallbackJob"]):
        poll(lambda: states(cluster, job_id) == {}, 20,
             f"job {job_id} forgotten by every node after ACKJOB")
    assert report["errors"] == []


def test_thunk_disque_auto_meet_joins_lone_nodes(tmp_path):
    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start()
        assert all(len(hello(proc)[2]) == 1 for proc in cluster)
        report = run_node("thunk_disque.js", "meet", *(proc.port for proc in cluster))
        assert sorted(conn["nid"] for conn in report["connections"]) == sorted(cluster.ids)
        cluster.wait_full_mesh(timeout=30)
        assert report["errors"] == []
    finally:
        cluster.stop()


# ------------------------------------------------------------------ disqueue-node

def test_disqueue_node_on_one_node(server):
    report = run_node("disqueue_node.js", server.port)
    me = node_id(server)
    assert report["readyCheck"] == {"loading": "0", "tcp_port": str(server.port)}
    assert (report["hello"]["version"], report["hello"]["nodeId"]) == (1, me)
    assert report["info"]["server"]["tcp_port"] == str(server.port)
    ids = report["ids"]
    assert all(show(server, job_id) is None for job_id in ids.values())
    got = report["getjob"]
    assert got == [{"queue": "dq", "jobId": ids["a"], "body": "héllo\r\nwörld", "nacks": 0,
                    "additionalDeliveries": 0}]
    assert [qlen(server, name) for name in ("dq", "s1", "s2", "s3")] == [0, 1, 2, 3]
    assert report["errors"] == []
