"""The nodes of a chaos run as one cluster: form it, watch it, question it, stop it.

Owns the cluster-wide views the run needs from outside the nodes: start all
nodes and MEET them, wait for a full mesh (every member knows every other,
reaches all of them, and flags none as failing), count the jobs each member
still holds, and show what every node knows of one job (to explain a lost
job). Spare slots (for `membership` faults) are made but not started, and
are not members until a fault meets them; membership changes which nodes
are members, and the views follow. Every query uses a short-lived link with a timeout; a node that does
not answer is reported as such, never waited on forever.
"""

from __future__ import annotations

import time
from pathlib import Path

from disque_py.tools.chaos.link import Link, LinkError
from disque_py.tools.chaos.nodes import Launch, Node

QUERY_TIMEOUT_S = 3.0
MESH_POLL_S = 0.25
BAD_FLAGS = {"fail?", "fail", "handshake", "noaddr"}
SHOWN_FIELDS = ("state", "queue", "nacks", "additional-deliveries", "nodes-delivered",
                "next-requeue-within")


def query(node: Node, *command, timeout: float = QUERY_TIMEOUT_S):
    link = Link(node.host, node.port, timeout)
    try:
        return link.call(*command)
    finally:
        link.close()


def text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def node_dir(base_dir: Path, index: int) -> Path:
    return Path(base_dir) / f"node{index}"


class Fleet:
    def __init__(self, base_dir: Path, launches: list[Launch], server_args: list[str],
                 spares: int = 0) -> None:
        """The last `spares` of `launches` are spare slots, not members."""
        self.nodes = [Node(i, node_dir(base_dir, i), server_args, launch)
                      for i, launch in enumerate(launches)]
        for node in self.nodes[len(self.nodes) - spares:]:
            node.member = False

    @property
    def members(self) -> list[Node]:
        return [node for node in self.nodes if node.member]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [(node.host, node.port) for node in self.nodes]

    def start(self, mesh_timeout: float) -> None:
        members = self.members
        for node in members:          # boot all at once, then wait for each
            node.start()
        for node in members:
            node.wait_ready()
        for node in members[1:]:
            query(members[0], "CLUSTER", "MEET", node.host, node.port)
        if not self.wait_mesh(mesh_timeout):
            raise RuntimeError(f"no full mesh of {len(members)} nodes within "
                               f"{mesh_timeout:g}s: {self.mesh_problems()}")

    def wait_mesh(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.mesh_problems():
            if time.monotonic() >= deadline:
                return False
            time.sleep(MESH_POLL_S)
        return True

    def mesh_problems(self) -> str:
        """'' when every node knows, reaches and trusts every other; else what is wrong."""
        members = self.members
        problems = [f"{node.name}: {problem}" for node in members
                    for problem in [self._mesh_problem(node, len(members))] if problem]
        return "; ".join(problems)

    def _mesh_problem(self, node: Node, members: int) -> str:
        try:
            lines = text(query(node, "CLUSTER", "NODES")).splitlines()
        except LinkError as error:
            return f"no answer ({error})"
        if len(lines) != members:
            return f"knows {len(lines)} nodes"
        for line in lines:
            words = line.split()
            flags = set(words[2].split(",")) if len(words) > 2 else {"?"}
            if flags & BAD_FLAGS or (words[-1] != "connected" and "myself" not in flags):
                return f"sees {words[1]} as {words[2]} {words[-1]}"
        return ""

    def node_ids(self) -> list[str]:
        """Each member's ID (CLUSTER MYID), by index: a job ID names its
        creator's. Spares are not started yet and have none."""
        return [text(query(node, "CLUSTER", "MYID")) for node in self.members]

    def jobs_held(self) -> dict[str, int | None]:
        """registered_jobs of each node (None: no answer)."""
        held = {}
        for node in self.members:
            try:
                info = text(query(node, "INFO", "jobs"))
                held[node.name] = int(info.split("registered_jobs:")[1].split()[0])
            except (LinkError, IndexError, ValueError):
                held[node.name] = None
        return held

    def describe_job(self, job_id: str) -> str:
        """What each node's SHOW says of a job, on one line."""
        parts = []
        for node in self.members:
            try:
                reply = query(node, "SHOW", job_id)
            except LinkError as error:
                parts.append(f"{node.name}: {error}")
                continue
            if reply is None:
                parts.append(f"{node.name}: -")
                continue
            fields = dict(zip(map(text, reply[::2]), reply[1::2]))
            shown = " ".join(f"{key}={_field(fields.get(key))}" for key in SHOWN_FIELDS)
            parts.append(f"{node.name}: {shown}")
        return "; ".join(parts)

    def stop(self) -> dict[str, int | None]:
        """Stop every node politely (SIGKILL if it hangs); exit status of each."""
        return {node.name: node.stop() for node in self.nodes}

    def force_kill(self) -> None:
        for node in self.nodes:
            node.force_kill()

    def crashes(self) -> list:
        return [crash for node in self.nodes for crash in node.crashes()]

    def restarts(self) -> int:
        return sum(max(node.starts - 1, 0) for node in self.nodes)


def _field(value) -> str:
    if isinstance(value, list):
        return ",".join(text(item)[:8] for item in value) or "[]"
    return "nil" if value is None else text(value)
