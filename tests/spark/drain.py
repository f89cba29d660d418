"""Read the row keys of a queue's jobs on a set of nodes: take them out
(GETJOB + FASTACK), or look at every copy a node holds (JSCAN); and fill a
node past its maxmemory."""

from __future__ import annotations

import json
from collections import Counter
from contextlib import contextmanager

from tests.support import wait_for

KEY_FIELD = "_disque_key"
BATCH = 1000


def take_all(client, queue: str) -> list[bytes]:
    """GETJOB NOHANG until the node's queue is empty; FASTACK what was taken."""
    bodies = []
    while True:
        jobs = client.execute_command("GETJOB", "NOHANG", "COUNT", BATCH, "FROM", queue)
        if not jobs:
            return bodies
        client.execute_command("FASTACK", *[job[1] for job in jobs])
        bodies.extend(job[2] for job in jobs)


def row_keys(bodies) -> Counter:
    return Counter(json.loads(body)[KEY_FIELD] for body in bodies)


def drain_until(clients, queue: str, expected: set[str], timeout: float) -> Counter:
    """Drain `clients` until every expected key was seen (copies of jobs
    from a dead node are queued by their holders once RETRY fires)."""
    seen: Counter = Counter()

    def complete() -> bool:
        for client in clients:
            seen.update(row_keys(take_all(client, queue)))
        return expected <= set(seen)
    try:
        wait_for(complete, timeout=timeout, interval=0.2,
                 message=f"{len(expected)} row keys drained from {queue!r}")
    except AssertionError as error:
        missing = expected - set(seen)
        raise AssertionError(f"{error}: {len(missing)} missing, "
                             f"e.g. {sorted(missing)[:10]}") from None
    return seen


def held_keys(client, queue: str) -> Counter:
    """Row keys of every job of `queue` this node holds a copy of, queued or
    not (a copy of a dead node's job is active until its RETRY fires)."""
    keys: Counter = Counter()
    cursor = b"0"
    while True:
        cursor, jobs = client.execute_command("JSCAN", cursor, "QUEUE", queue,
                                              "COUNT", BATCH, "REPLY", "all")
        for job in jobs:
            fields = dict(zip(job[::2], job[1::2]))
            keys[json.loads(fields[b"body"])[KEY_FIELD]] += 1
        if cursor == b"0":
            return keys


@contextmanager
def full_node(client):
    """The node over its maxmemory (200 kB of jobs, a 100 kB cap) inside the
    block; back to no cap after it."""
    for _ in range(20):
        client.execute_command("ADDJOB", "filler", b"x" * 10_000, 0)
    client.config_set("maxmemory", "100kb")
    try:
        yield
    finally:
        client.config_set("maxmemory", "0")
