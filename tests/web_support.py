"""Talking to a node's HTTP endpoint in tests: GETs, scrapes, listening sockets.

http_get speaks plain HTTP/1.1 to 127.0.0.1 with urllib (no proxy, which
the environment may name); scrape() parses /metrics with prometheus_client's
parser into {(name, labels): value}; listening_ports() reads which TCP ports
a process listens on from /proc, without sending a byte.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support import HOST, ServerProcess, free_port, wait_for

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
TCP_LISTEN = "0A"


def http_get(port: int, path: str, timeout: float = 10.0) -> tuple[int, dict, bytes]:
    """(status, headers, body) of GET http://127.0.0.1:port/path; an error
    status is returned, not raised."""
    try:
        with _OPENER.open(f"http://{HOST}:{port}{path}", timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def metrics_text(port: int) -> str:
    status, headers, body = http_get(port, "/metrics")
    assert status == 200, (status, body)
    return body.decode()


def parse_metrics(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted label pairs): value} of every sample."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    return parse_metrics(metrics_text(port))


def value(samples: dict, name: str, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def http_server(directory: Path, *args: str) -> tuple[ServerProcess, int]:
    """A node (not started) with its HTTP endpoint on a free port."""
    http_port = free_port()
    return ServerProcess(directory, args=["--http-port", str(http_port), *args]), http_port


@contextmanager
def running_http_server(directory: Path, password: str | None = None):
    """A started node with its HTTP endpoint (its port in `http_port`),
    with `requirepass` when a password is given; stopped after the block."""
    args = ("--requirepass", password) if password is not None else ()
    proc, proc.http_port = http_server(directory, *args)
    proc.start(wait=password is None)
    if password is not None:       # the readiness PING needs the password
        wait_for(lambda: proc.client(password=password).ping(), timeout=20, message="PING")
    try:
        yield proc
    finally:
        proc.stop()


def http_cluster(directory: Path, count: int):
    """A cluster harness (not started) whose nodes each have an HTTP
    endpoint; the cluster and the nodes' HTTP ports, in order."""
    from tests.cluster.harness import Cluster
    cluster = Cluster(directory, count)
    http_ports = []
    for proc in cluster:
        http_ports.append(free_port())
        proc.args += ["--http-port", str(http_ports[-1])]
    return cluster, http_ports


def listening_ports(pid: int) -> set[tuple[str, int]]:
    """(hex address, port) of each TCP socket the process listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == TCP_LISTEN and inode in inodes:
                address, port = local.split(":")
                found.add((address, int(port, 16)))
    return found
