"""A node that cannot start says why and exits non-zero, in the foreground
and daemonized (docs/operating.md's three-node recipe runs `--daemonize yes`).

The ports are taken by the test itself: a listening socket on the client
port, or on the cluster bus port (port + 10000). Daemonized, disque-server
returns once the node listens (exit 0, pid file written) or has failed
(exit 1, the reason on stderr, no pid file); every daemon started is
stopped by the PID in its pid file.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import CLUSTER_PORT_OFFSET, HOST, RawClient, free_port, wait_for

SERVER_BIN = str(Path(sys.executable).with_name("disque-server"))
RUN_TIMEOUT_S = 30


def occupy(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind((HOST, port))
    sock.listen()
    return sock


def server_command(tmp_path: Path, port: int, *extra: str) -> list[str]:
    return [SERVER_BIN, "--port", str(port), "--bind", HOST, "--dir", str(tmp_path), *extra]


def daemon_command(tmp_path: Path, port: int) -> list[str]:
    return server_command(tmp_path, port, "--daemonize", "yes",
                          "--pidfile", str(tmp_path / "disque.pid"),
                          "--logfile", str(tmp_path / "log.txt"))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:      # a zombie is not running
        return stat.read().split(") ")[-1][:1] != "Z"


def test_a_taken_cluster_bus_port_is_named_with_the_way_out(tmp_path):
    port = free_port()
    with occupy(port + CLUSTER_PORT_OFFSET):
        result = subprocess.run(server_command(tmp_path, port), capture_output=True,
                                text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode != 0, result.stdout
    said = result.stdout + result.stderr
    assert f"cluster bus port {port + CLUSTER_PORT_OFFSET} (the port {port} + 10000" in said, said
    assert "--port N" in said and "make run PORT=N" in said, said
    assert "Traceback" not in said, said


def test_a_port_without_room_for_the_cluster_bus_is_refused(tmp_path):
    result = subprocess.run(server_command(tmp_path, 60000), capture_output=True, text=True,
                            timeout=RUN_TIMEOUT_S)
    assert result.returncode != 0, result.stdout
    assert "must be at most 55535" in result.stdout, result.stdout


@pytest.mark.parametrize("taken", ["client port", "cluster bus port"])
def test_a_daemonized_node_that_cannot_start_fails_loudly(tmp_path, taken):
    port = free_port()
    with occupy(port if taken == "client port" else port + CLUSTER_PORT_OFFSET):
        result = subprocess.run(daemon_command(tmp_path, port), capture_output=True,
                                text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "did not start" in result.stderr, result.stderr
    assert ("already in use" if taken == "client port" else "cluster bus port") in \
        result.stderr, result.stderr
    assert not (tmp_path / "disque.pid").exists(), "a pid file for a node that is not running"
    log = (tmp_path / "log.txt").read_text()
    daemon_pid = int(log.split(":", 1)[0])
    wait_for(lambda: not pid_alive(daemon_pid), 10, message="the failed daemon to exit")


def test_a_daemonized_node_returns_once_it_listens_and_removes_its_pid_file(tmp_path):
    port = free_port()
    result = subprocess.run(daemon_command(tmp_path, port), capture_output=True, text=True,
                            timeout=RUN_TIMEOUT_S)
    pidfile = tmp_path / "disque.pid"
    pid = int(pidfile.read_text()) if pidfile.exists() else None
    try:
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert pid is not None and pid_alive(pid)
        client = RawClient(port)         # listening already: no wait needed
        assert client.call("PING") == b"+PONG\r\n"
        client.close()
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not pid_alive(pid), 10, message="the daemon to stop")
        assert not pidfile.exists()
    finally:
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("damage", [b"abcd not a line\n", b"\xff\xfe not utf-8\n"],
                         ids=["unparsable line", "not utf-8"])
def test_a_corrupt_nodes_conf_is_refused_with_its_path_not_a_traceback(tmp_path, damage):
    # A bit flip or a truncation on disk (the chaos checker's `corrupt`
    # fault): the node must say which file and refuse to start, as Disque's
    # "corrupted cluster config file" does, and an operator then removes it.
    (tmp_path / "nodes.conf").write_bytes(damage)
    result = subprocess.run(server_command(tmp_path, free_port()), capture_output=True,
                            text=True, timeout=RUN_TIMEOUT_S)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert "nodes.conf" in said and "corrupted cluster config" in said, said
    assert "Traceback" not in said, said
