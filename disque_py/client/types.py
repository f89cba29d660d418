"""The values the client answers: a job as GETJOB gives it, a job as SHOW
describes it, a queue as QSTAT describes it, the cluster as HELLO lists it.

Job IDs and queue names are `str`; a queue name that is not UTF-8 keeps its
bytes as surrogates (it goes back to the server unchanged). Bodies are
what the client's serializer makes of the bytes (bytes by default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A job ID is "D-" + the first 8 hex digits of the producing node's ID + ...
NODE_PREFIX = slice(2, 10)


def producer_of(job_id: str) -> str:
    """The ID prefix of the node that made the job (8 hex digits)."""
    return job_id[NODE_PREFIX]


@dataclass(frozen=True, slots=True)
class UnreadableBody:
    """A body the client's serializer could not read (not JSON, say), in
    place of the job's body: its bytes, and why. The other jobs of the
    same reply are read as usual; a Worker dead-letters such a job."""

    data: bytes
    error: str


@dataclass(frozen=True, slots=True)
class Job:
    """A job handed out by GETJOB (or listed by QPEEK). `nacks` and
    `additional_deliveries` are None unless asked for (WITHCOUNTERS). The
    body is an UnreadableBody when the serializer failed on it."""

    id: str
    queue: str
    body: Any
    nacks: int | None = None
    additional_deliveries: int | None = None

    @property
    def producer(self) -> str:
        """The ID prefix of the node that made the job."""
        return producer_of(self.id)

    @property
    def deliveries(self) -> int | None:
        """Times the job was delivered, this one included (with counters)."""
        if self.nacks is None or self.additional_deliveries is None:
            return None
        return 1 + self.nacks + self.additional_deliveries


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job as SHOW describes it. Times are as Disque gives them: `ttl`
    (the seconds the job has left to live), `delay` and `retry` in seconds,
    `ctime` in nanoseconds (milliseconds shifted), `next_requeue_within`
    and `next_awake_within` in milliseconds.
    The fields after `body` are disque-py's (None or their default on a
    plain job); `extra` keeps any field this client does not know."""

    id: str
    queue: str
    state: str
    replicate: int
    ttl: int
    ctime: int
    delay: int
    retry: int
    nacks: int
    additional_deliveries: int
    nodes_delivered: list[str]
    nodes_confirmed: list[str]
    next_requeue_within: int | None
    next_awake_within: int | None
    body: Any
    backoff: tuple[int, int] | None = None
    max_deliveries: int | None = None
    deadletter: str | None = None
    dead_reason: str | None = None
    dead_from: str | None = None
    priority: int = 5
    dedup_key: bytes | None = None
    dedup_until: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueStat:
    """A queue as QSTAT describes it (`age` and `idle` in seconds,
    `import_rate` in jobs per second, `pause`: none, in, out or all)."""

    name: str
    len: int
    age: int
    idle: int
    blocked: int
    import_from: list[str]
    import_rate: int
    jobs_in: int
    jobs_out: int
    pause: str


@dataclass(frozen=True, slots=True)
class Node:
    """A node as HELLO lists it. `priority` is Disque's: 1 for a node that
    answers, 10 for one that may have failed, 100 for one that failed."""

    id: str
    host: str
    port: int
    priority: int

    @property
    def prefix(self) -> str:
        """The 8 hex digits that start this node's job IDs' node part."""
        return self.id[:8]


@dataclass(frozen=True, slots=True)
class Hello:
    """HELLO's answer: the node that answered, and every node it knows."""

    version: int
    my_id: str
    nodes: list[Node]
