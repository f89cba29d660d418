"""Several real disque-server processes joined in a cluster, and the views
tests read from them (CLUSTER INFO, CLUSTER NODES, HELLO), parsed strictly.

Every wait is a wait_for with a deadline; timeouts are derived from the
cluster-node-timeout the nodes run with, doubled and padded so that a noisy
2-core machine does not turn a slow scheduler into a failure.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import CLUSTER_PORT_OFFSET, HOST, RawClient, ServerProcess, wait_for

NODE_TIMEOUT_MS = 1000
# What a slow machine may add to any protocol deadline (process scheduling,
# a Python interpreter per node, several nodes per core).
MARGIN_S = 3.0
MESH_TIMEOUT_S = 10.0
POLL_S = 0.05          # polling several nodes must not starve them of CPU

NODE_LINE = re.compile(
    r"(?P<id>[0-9a-f]{40}) (?P<ip>[^ ]*):(?P<port>\d+) (?P<flags>[a-z?]+(?:,[a-z?]+)*) "
    r"(?P<ping_sent>\d+) (?P<pong_received>\d+) (?P<link>connected|disconnected)\Z")
KNOWN_FLAGS = {"myself", "fail?", "fail", "handshake", "noaddr", "leaving", "noflags"}


def fail_deadline_s(node_timeout_ms: int = NODE_TIMEOUT_MS) -> float:
    """How long failure detection may take: 2 x node timeout plus a margin."""
    return 2 * node_timeout_ms / 1000 + MARGIN_S


@dataclass
class NodeLine:
    id: str
    ip: str
    port: int
    flags: set[str]
    ping_sent: int
    pong_received: int
    link: str


class ReplyError(Exception):
    """An error reply (its text, without the leading '-')."""


def parse_reply(data: bytes, pos: int = 0):
    """(value, end) of the RESP2 reply at pos: bytes, int, list or ReplyError."""
    newline = data.index(b"\r\n", pos)
    kind, line = data[pos:pos + 1], data[pos + 1:newline]
    end = newline + 2
    if kind == b"+":
        return line, end
    if kind == b"-":
        return ReplyError(line.decode()), end
    if kind == b":":
        return int(line), end
    if kind == b"$":
        size = int(line)
        return (None, end) if size < 0 else (data[end:end + size], end + size + 2)
    if kind == b"*":
        items = []
        for _ in range(int(line)):
            item, end = parse_reply(data, end)
            items.append(item)
        return items, end
    raise AssertionError(f"not a RESP2 reply: {data[pos:pos + 40]!r}")


def call(proc: ServerProcess, *args):
    """One command on a short-lived plain socket; error replies raise."""
    client = RawClient(proc.port)
    try:
        value, _ = parse_reply(client.call(*args))
    finally:
        client.close()
    if isinstance(value, ReplyError):
        raise value
    return value


def poll(condition, timeout: float, message: str = ""):
    """wait_for at a pace that leaves the nodes their CPU."""
    return wait_for(condition, timeout=timeout, interval=POLL_S, message=message)


def cluster_info(proc: ServerProcess) -> dict[str, str]:
    text = call(proc, "CLUSTER", "INFO").decode()
    assert text.endswith("\r\n"), text
    fields = {}
    for line in text.split("\r\n")[:-1]:
        key, sep, value = line.partition(":")
        assert sep, f"bad CLUSTER INFO line {line!r}"
        fields[key] = value
    return fields


def cluster_nodes(proc: ServerProcess) -> list[NodeLine]:
    """CLUSTER NODES, each line checked against Disque's format."""
    text = call(proc, "CLUSTER", "NODES").decode()
    assert text.endswith("\n"), repr(text)
    lines = []
    for line in text[:-1].split("\n"):
        match = NODE_LINE.match(line)
        assert match, f"CLUSTER NODES line not in Disque's format: {line!r}"
        flags = set(match["flags"].split(","))
        assert flags <= KNOWN_FLAGS, line
        lines.append(NodeLine(match["id"], match["ip"], int(match["port"]), flags,
                              int(match["ping_sent"]), int(match["pong_received"]),
                              match["link"]))
    return lines


def nodes_by_id(proc: ServerProcess) -> dict[str, NodeLine]:
    return {line.id: line for line in cluster_nodes(proc)}


def myid(proc: ServerProcess) -> str:
    return call(proc, "CLUSTER", "MYID").decode()


def hello(proc: ServerProcess) -> tuple[int, str, dict[str, tuple[str, int, int]]]:
    """HELLO: version, my ID, {id: (ip, port, priority)}."""
    reply = call(proc, "HELLO")
    version, node_id, *entries = reply
    nodes = {}
    for entry in entries:
        assert len(entry) == 4, entry
        nid, ip, port, priority = entry
        nodes[nid.decode()] = (ip.decode(), int(port), int(priority))
    return int(version), node_id.decode(), nodes


class Cluster:
    """`count` nodes in their own directories, meeting in a chain."""

    def __init__(self, base_dir: Path, count: int, node_timeout_ms: int = NODE_TIMEOUT_MS,
                 extra_args: list[str] | None = None) -> None:
        self.node_timeout_ms = node_timeout_ms
        args = ["--cluster-node-timeout", str(node_timeout_ms)] + list(extra_args or [])
        self.procs = [ServerProcess(Path(base_dir) / f"node{i}", args=list(args))
                      for i in range(count)]
        self.ids: list[str] = []
        self.mesh_seconds = None

    def __getitem__(self, index: int) -> ServerProcess:
        return self.procs[index]

    def __iter__(self):
        return iter(self.procs)

    def __len__(self) -> int:
        return len(self.procs)

    def start(self) -> "Cluster":
        for proc in self.procs:          # all boot at once, then wait for each
            proc.start(wait=False)
        for proc in self.procs:
            proc.wait_ready()
        self.ids = [myid(proc) for proc in self.procs]
        return self

    def meet_chain(self) -> float:
        """CLUSTER MEET 0->1, 1->2, ...; the seconds until a full mesh."""
        began = time.monotonic()
        for left, right in zip(self.procs, self.procs[1:]):
            assert call(left, "CLUSTER", "MEET", HOST, right.port) == b"OK"
        self.wait_full_mesh()
        self.mesh_seconds = time.monotonic() - began
        return self.mesh_seconds

    def is_full_mesh(self, procs=None) -> bool:
        procs = list(procs or self.procs)
        count = len(self.procs)
        expected = set(self.ids)
        for proc in procs:
            info = cluster_info(proc)
            if (info["cluster_known_nodes"], info["cluster_reachable_nodes"],
                    info["cluster_size"]) != (str(count), str(count - 1), str(count)):
                return False
            lines = cluster_nodes(proc)
            if {line.id for line in lines} != expected:
                return False
            for line in lines:
                if line.flags & {"fail?", "fail", "handshake", "noaddr"} \
                        or line.link != "connected":
                    return False
        return True

    def wait_full_mesh(self, timeout: float = MESH_TIMEOUT_S, procs=None) -> None:
        poll(lambda: self.is_full_mesh(procs), timeout,
             f"a full mesh of {len(self.procs)} nodes")

    def flags_seen(self, observer: ServerProcess, node_id: str) -> set[str] | None:
        line = nodes_by_id(observer).get(node_id)
        return None if line is None else line.flags

    def bus_port(self, index: int) -> int:
        return self.procs[index].port + CLUSTER_PORT_OFFSET

    def nodes_conf(self, index: int) -> Path:
        return self.procs[index].dir / "nodes.conf"

    def logs(self) -> str:
        return "\n".join(f"--- node{i} ---\n{proc.log_text()[-3000:]}"
                         for i, proc in enumerate(self.procs))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.alive():
                proc.kill()


# ------------------------------------------------------------------ jobs and INFO

def show(proc: ServerProcess, job_id) -> dict | None:
    """SHOW as a dict (field name str -> value), None for an unknown job."""
    reply = call(proc, "SHOW", job_id)
    if reply is None:
        return None
    return {key.decode(): value for key, value in zip(reply[::2], reply[1::2])}


def states(cluster, job_id, indexes=None) -> dict[int, str]:
    """{node index: job state} for the nodes (default: all) that know the job."""
    found = {}
    for index in (range(len(cluster)) if indexes is None else indexes):
        fields = show(cluster[index], job_id)
        if fields is not None:
            found[index] = fields["state"].decode()
    return found


def queued_on(cluster, job_id, indexes=None) -> list[int]:
    return [i for i, state in states(cluster, job_id, indexes).items() if state == "queued"]


def jobs_in_queue(proc: ServerProcess, queue) -> dict[bytes, str]:
    """{job ID: state} for every job of `queue` this node knows (JSCAN)."""
    cursor, found = b"0", {}
    while True:
        cursor, items = call(proc, "JSCAN", cursor, "COUNT", 1000, "QUEUE", queue,
                             "REPLY", "ALL")
        for item in items:
            fields = dict(zip(item[::2], item[1::2]))
            found[fields[b"id"]] = fields[b"state"].decode()
        if cursor == b"0":
            return found


def qlen(proc: ServerProcess, queue) -> int:
    return call(proc, "QLEN", queue)


def info(proc: ServerProcess, section: str = "all") -> dict[str, str]:
    """INFO as a dict of field -> value (strings)."""
    fields = {}
    for line in call(proc, "INFO", section).decode().split("\r\n"):
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value
    return fields


def registered_jobs(proc: ServerProcess) -> int:
    return int(info(proc, "jobs")["registered_jobs"])


def raw_reply(proc: ServerProcess, *args) -> bytes:
    """The exact bytes of one reply, on a short-lived connection."""
    client = proc.raw()
    try:
        return client.call(*args)
    finally:
        client.close()
