"""`disque-py cluster create | status | meet` against real server processes.

The console script installed next to the interpreter is run as a
subprocess, as an operator (or docker-compose) runs it; a missing script is
a failure, not a skip. Three nodes are meshed once per module by `create`,
and that run's output and its effect on every node are checked; the failure
tests start nodes of their own. Argument errors, which need no server, go
through click's CliRunner in-process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from disque_py.tools.cli import main
from tests.support import HOST, ServerProcess, free_port, wait_for

DISQUE_PY_BIN = Path(sys.executable).with_name("disque-py")
CLI_TIMEOUT_S = 90
MESH_TIMEOUT_S = 2
ROW_COLUMNS = ("id", "address", "flags", "link", "priority", "jobs", "queues")


def run_cli(*args: str, password: str | None = None) -> subprocess.CompletedProcess:
    assert DISQUE_PY_BIN.exists(), f"{DISQUE_PY_BIN} missing: pip install -e ."
    env = {key: value for key, value in os.environ.items() if key != "DISQUE_PASSWORD"}
    if password is not None:
        env["DISQUE_PASSWORD"] = password
    return subprocess.run([str(DISQUE_PY_BIN), "cluster", *args], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, env=env)


def address(server: ServerProcess) -> str:
    return f"{HOST}:{server.port}"


def cluster_info(server: ServerProcess) -> dict[str, str]:
    raw = server.client().execute_command("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in raw.split())


def sees_each_other(*servers: ServerProcess) -> bool:
    return all(cluster_info(server)["cluster_known_nodes"] == str(len(servers))
               and cluster_info(server)["cluster_reachable_nodes"] == str(len(servers) - 1)
               for server in servers)


def node_id(server: ServerProcess) -> str:
    return server.client().execute_command("CLUSTER", "MYID").decode()


def status_rows(output: str) -> dict[str, dict[str, str]]:
    """The node table of `cluster status`, by address."""
    rows = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == len(ROW_COLUMNS) and words[0] != "ID":
            row = dict(zip(ROW_COLUMNS, words))
            rows[row["address"]] = row
    return rows


def queue_section(output: str, server: ServerProcess) -> list[tuple[str, int]]:
    """(queue, length) lines listed under `queues on <server>`."""
    section = output.split(f"queues on {address(server)} ", 1)[1].split("\n\n", 1)[0]
    return [(name, int(length)) for name, length in
            re.findall(r"(?m)^(\S+)\s+(\d+)$", section)]


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    """Three nodes, meshed by `cluster create`; yields (servers, that run)."""
    base = tmp_path_factory.mktemp("trio")
    servers = [ServerProcess(base / f"node{i}") for i in (1, 2, 3)]
    try:
        for server in servers:
            server.start()
        yield servers, run_cli("create", *map(address, servers))
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def paused_safely():
    """Servers paused by a test are resumed afterwards, so they can be stopped."""
    paused: list[ServerProcess] = []
    yield paused
    for server in paused:
        if server.alive():
            server.resume()


# ------------------------------------------------------------ create

def test_create_builds_a_full_mesh(trio):
    servers, done = trio
    assert done.returncode == 0, done.stderr
    first, *others = servers
    for server in servers:
        assert f"checking {address(server)} ... ok" in done.stdout
    for server in others:
        assert f"meeting {address(server)} ... ok" in done.stdout
    assert f"meeting {address(first)}" not in done.stdout
    assert "full mesh" in done.stdout.splitlines()[-1]
    # create returned only once the mesh was complete: no waiting here.
    for server in servers:
        info = cluster_info(server)
        assert (info["cluster_known_nodes"], info["cluster_reachable_nodes"]) == ("3", "2")
        listed = server.client().execute_command("CLUSTER", "NODES").decode()
        assert {line.split()[0] for line in listed.splitlines()} == set(map(node_id, servers))


def test_create_again_on_a_built_cluster_succeeds(trio):
    servers, _ = trio
    done = run_cli("create", *map(address, servers))
    assert done.returncode == 0, done.stderr
    assert "full mesh" in done.stdout
    wait_for(lambda: sees_each_other(*servers), message="the mesh to settle again")


# ------------------------------------------------------------ status

def test_status_lists_every_node_with_flags_and_queue_lengths(trio):
    servers, _ = trio
    first, second, third = servers
    for queue, count in (("busy", 3), ("quiet", 1)):
        for _ in range(count):
            second.client().execute_command("ADDJOB", queue, "body", 0, "REPLICATE", 1)
    for length in range(1, 13):
        for _ in range(length):
            third.client().execute_command("ADDJOB", f"q{length:02d}", "body", 0,
                                           "REPLICATE", 1)
    try:
        done = run_cli("status", address(first))
    finally:
        for server in servers:
            server.client().execute_command("DEBUG", "FLUSHALL")
    assert done.returncode == 0, done.stderr
    rows = status_rows(done.stdout)
    assert set(rows) == set(map(address, servers)), done.stdout
    for server in servers:
        row = rows[address(server)]
        assert node_id(server).startswith(row["id"])
        assert row["flags"] == ("myself" if server is first else "noflags")
        assert (row["link"], row["priority"]) == ("connected", "1")
    assert (rows[address(first)]["jobs"], rows[address(first)]["queues"]) == ("0", "0")
    assert (rows[address(second)]["jobs"], rows[address(second)]["queues"]) == ("4", "2")
    assert (rows[address(third)]["jobs"], rows[address(third)]["queues"]) == ("78", "12")
    assert queue_section(done.stdout, first) == []
    assert queue_section(done.stdout, second) == [("busy", 3), ("quiet", 1)]
    assert queue_section(done.stdout, third) == [(f"q{n:02d}", n) for n in range(12, 2, -1)]
    third_id = rows[address(third)]["id"]
    assert f"queues on {address(third)} ({third_id}), longest 10 of 12:" in done.stdout


def test_status_of_an_unreachable_node_fails_naming_it():
    dead = f"{HOST}:{free_port()}"
    done = run_cli("status", dead)
    assert done.returncode == 1
    assert f"{dead}: cannot connect" in done.stderr
    assert done.stdout == ""


def test_status_asks_for_the_password(make_server):
    server = make_server().start()
    server.client().execute_command("CONFIG", "SET", "requirepass", "s3cret")
    refused = run_cli("status", address(server))
    assert refused.returncode == 1
    assert "requires a password" in refused.stderr and "DISQUE_PASSWORD" in refused.stderr
    done = run_cli("status", address(server), password="s3cret")
    assert done.returncode == 0, done.stderr
    assert status_rows(done.stdout)[address(server)]["flags"] == "myself"


# ------------------------------------------------------------ meet

def test_meet_sends_one_meet_and_returns(make_server):
    one, two = make_server("one").start(), make_server("two").start()
    done = run_cli("meet", address(one), address(two))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"meeting {address(two)} ... ok\n"
    wait_for(lambda: sees_each_other(one, two), message="the two nodes to meet")


# ------------------------------------------------------------ failures

def test_create_names_every_node_that_does_not_answer(make_server):
    alive = make_server().start()
    dead = [f"{HOST}:{free_port()}", f"{HOST}:{free_port()}"]
    done = run_cli("create", address(alive), *dead)
    assert done.returncode == 1
    for node in dead:
        assert f"{node}: cannot connect" in done.stderr
    assert cluster_info(alive)["cluster_known_nodes"] == "1", "nothing may be met"


def test_create_with_a_paused_node_fails_without_hanging(make_server, paused_safely):
    one, two = make_server("one").start(), make_server("two").start()
    paused_safely.append(two)
    two.pause()
    done = run_cli("create", address(one), address(two))
    assert done.returncode == 1
    assert f"{address(two)}: no answer within" in done.stderr
    assert "meeting" not in done.stdout


def test_create_times_out_on_an_impossible_mesh(make_server, paused_safely):
    """node3 already shares a cluster with node4, which is paused: neither
    node3 nor the nodes it gossips node4 to can ever see exactly three."""
    node1, node2, node3, node4 = (make_server(f"node{i}").start() for i in (1, 2, 3, 4))
    assert run_cli("meet", address(node3), address(node4)).returncode == 0
    wait_for(lambda: sees_each_other(node3, node4), message="node3 and node4 to meet")
    paused_safely.append(node4)
    node4.pause()
    started = time.monotonic()
    done = run_cli("create", address(node1), address(node2), address(node3),
                   "--timeout", str(MESH_TIMEOUT_S))
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stdout
    assert f"no full mesh after {MESH_TIMEOUT_S}s" in done.stderr
    assert f"{address(node3)}: knows 4 nodes" in done.stderr
    assert "another cluster" in done.stderr
    assert "waiting for a full mesh: 0/3 nodes see everyone" in done.stdout
    assert MESH_TIMEOUT_S <= elapsed < CLI_TIMEOUT_S


# ------------------------------------------------------------ arguments

@pytest.mark.parametrize("args, complaint", [
    (["create", f"{HOST}:7711"], "at least two nodes"),
    (["create", f"{HOST}:7711", "localhost:7711"], "are the same node"),
    (["status", "7711"], "is not HOST:PORT"),
    (["status", f"{HOST}:0"], "the port must be 1-55535"),
    (["meet", f"{HOST}:7711"], "Missing argument 'PEERS...'"),
    (["create", f"{HOST}:7711", f"{HOST}:7712", "--timeout", "-1"], "--timeout"),
])
def test_bad_arguments_are_usage_errors(args, complaint):
    done = CliRunner().invoke(main, ["cluster", *args])
    assert done.exit_code == 2, done.output
    assert complaint in done.output
