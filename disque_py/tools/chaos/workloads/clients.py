"""Producers and consumers: real clients against random nodes, shared by the workloads.

Owns the load's threads. A producer sends ADDJOB ... REPLICATE r (and the
workload's job options) with a unique body to a random node at a steady
pace and records the outcome in the ledger before and after (so a delivery
can never precede its record). A consumer sends GETJOB to a random node,
records every job it gets, then NACKs some (they come back at once; which
ones is the workload's call), sends WORKING for some, and ACKJOBs the rest
on the same node or another one, trying other nodes when the ack gets no
answer. Once told to drain it NACKs nothing and reads the drain's queues
too (dead letters, a backlog). Nodes that are down cost a refused
connection or a socket timeout; the thread then picks another node. Each
thread has its own random generator drawn from the run's seed; thread
timing still makes runs differ.

Roles: the run stops producers and observers (a workload's other threads:
WAITJOB askers, dead-letter watchers) when the faults stop, and consumers
once the drain is over.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from disque_py.tools.chaos.ledger import NOT_SENT, Delivery, Ledger, job_body
from disque_py.tools.chaos.link import LinkError, Links, NoAnswer, NotSent, Refused

QUEUES = ("chaos-a", "chaos-b", "chaos-c")
ADDJOB_TIMEOUT_MS = 5000
GETJOB_TIMEOUT_MS = 1000
GETJOB_COUNT = 10
# Socket timeouts: longer than the server-side waits above, short enough
# that a paused node does not stall a thread for long.
PRODUCER_SOCKET_TIMEOUT_S = ADDJOB_TIMEOUT_MS / 1000 + 3
CONSUMER_SOCKET_TIMEOUT_S = GETJOB_TIMEOUT_MS / 1000 + 2
NACK_PROBABILITY = 0.05
WORKING_PROBABILITY = 0.10
ACK_ELSEWHERE_PROBABILITY = 0.2
ACK_ATTEMPTS = 4
MAX_PROCESSING_S = 0.02
DOWN_NODE_BACKOFF_S = 0.05
NOT_SENT_ATTEMPTS = 5
BODY_SIZE = 64

PRODUCER, CONSUMER, OBSERVER = "producer", "consumer", "observer"


@dataclass
class JobSpec:
    replicate: int
    retry_s: int
    ttl_s: int
    options: tuple = ()          # more ADDJOB words: MAXDELIVERIES n, DEDUP key ...

    def addjob(self, queue: str, body: str) -> tuple:
        return ("ADDJOB", queue, body, ADDJOB_TIMEOUT_MS, "REPLICATE", self.replicate,
                "RETRY", self.retry_s, "TTL", self.ttl_s, *self.options)


class Worker(threading.Thread):
    """A daemon thread with a stop event, its own RNG and links; errors are kept."""

    role = OBSERVER

    def __init__(self, name: str, rng: random.Random, addresses: list[tuple[str, int]],
                 ledger: Ledger, socket_timeout: float) -> None:
        super().__init__(name=name, daemon=True)
        self.rng = rng
        self.nodes = len(addresses)
        self.links = Links(addresses, socket_timeout)
        self.ledger = ledger
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.step()
        except BaseException as error:   # reported by the run, never silently lost
            self.error = error
        finally:
            self.links.close()

    def step(self) -> None:
        raise NotImplementedError

    def random_node(self, exclude: int | None = None) -> int:
        choices = [n for n in range(self.nodes) if n != exclude] or [exclude]
        return self.rng.choice(choices)

    def try_call(self, node: int, *command) -> bool:
        try:
            self.links.call(node, *command)
            return True
        except LinkError:
            return False


class Producer(Worker):
    """Adds jobs at `rate` a second (None: as fast as they are answered),
    `limit` of them (None: until stopped), to random queues of `queues`."""

    role = PRODUCER

    def __init__(self, number: int, seed: int, rate: float | None, spec: JobSpec,
                 queues: tuple = QUEUES, limit: int | None = None, **kwargs) -> None:
        super().__init__(f"producer{number}", socket_timeout=PRODUCER_SOCKET_TIMEOUT_S,
                         **kwargs)
        self.number, self.seed, self.spec = number, seed, spec
        self.queues, self.limit = queues, limit
        self.interval = 1.0 / rate if rate else 0.0
        self.next_at = time.monotonic()
        self.sent = 0

    def step(self) -> None:
        if self.limit is not None and self.sent >= self.limit:
            self.stopping.set()
            return
        if self.interval:
            self._pace()
        body = job_body(self.seed, self.number, self.sent, BODY_SIZE)
        queue = self.rng.choice(self.queues)
        self.sent += 1
        self.produce(body, queue)

    def produce(self, body: str, queue: str) -> None:
        """Add one job: a node that cannot be reached is never sent the
        ADDJOB, so another node is safe to try."""
        node = self.random_node()
        for attempt in range(NOT_SENT_ATTEMPTS):
            if self.add(body, queue, node, self.spec) is not None:
                return
            node = self.random_node(exclude=node)
            self.stopping.wait(DOWN_NODE_BACKOFF_S)

    def add(self, body: str, queue: str, node: int, spec: JobSpec) -> str | None:
        """One ADDJOB, recorded: its job ID, "" if it failed after it was
        sent (no answer, an error reply), None if it was not sent at all."""
        self.ledger.sending(body, queue, node, time.monotonic())
        try:
            job_id = self.links.call(node, *spec.addjob(queue, body)).decode()
        except NotSent as error:
            self.ledger.add_failed(body, NOT_SENT, str(error))
            return None
        except NoAnswer as error:
            self.ledger.add_failed(body, "no answer", str(error))
        except Refused as error:
            self.ledger.add_failed(body, str(error).split(" ")[0], str(error))
        else:
            self.ledger.added(body, job_id, time.monotonic())
            return job_id
        return ""

    def _pace(self) -> None:
        now = time.monotonic()
        self.next_at = max(self.next_at + self.interval, now - 1.0)  # no catch-up bursts
        if self.next_at > now:
            self.stopping.wait(self.next_at - now)


class Consumer(Worker):
    """Reads `queues` (and `drain_queues` too once draining); NACKs a job
    with `nack_probability` (wants_nack says, for the workloads that choose)."""

    role = CONSUMER

    def __init__(self, number: int, queues: tuple = QUEUES, drain_queues: tuple = (),
                 nack_probability: float = NACK_PROBABILITY, withcounters: bool = False,
                 **kwargs) -> None:
        super().__init__(f"consumer{number}", socket_timeout=CONSUMER_SOCKET_TIMEOUT_S,
                         **kwargs)
        self.queues, self.drain_queues = queues, drain_queues
        self.nack_probability = nack_probability
        self.withcounters = ("WITHCOUNTERS",) if withcounters else ()
        self.draining = threading.Event()    # no more NACKs: let the queues empty

    def step(self) -> None:
        node = self.random_node()
        asked_at = time.monotonic()
        queues = self.queues + self.drain_queues if self.draining.is_set() else self.queues
        try:
            jobs = self.links.call(node, "GETJOB", "TIMEOUT", GETJOB_TIMEOUT_MS,
                                   "COUNT", GETJOB_COUNT, *self.withcounters, "FROM", *queues)
        except NotSent:
            self.stopping.wait(DOWN_NODE_BACKOFF_S)
            return
        except LinkError:
            return
        got_at = time.monotonic()
        for queue, job_id, body, *counters in jobs or []:
            body = body.decode()
            delivery = Delivery(asked_at, node, job_id.decode(), queue.decode(), got_at,
                                _counters(counters))
            self.ledger.delivered(body, delivery)
            self.process(node, job_id, body, delivery)

    def process(self, node: int, job_id: bytes, body: str, delivery: Delivery) -> None:
        self.stopping.wait(self.rng.uniform(0, MAX_PROCESSING_S))
        if not self.draining.is_set() and self.wants_nack(body, delivery):
            self.try_call(node, "NACK", job_id)
            self.ledger.nacked(body)      # sent: it may have worked even without a reply
            return
        if self.rng.random() < WORKING_PROBABILITY:
            self.try_call(node, "WORKING", job_id)
        self.ack(node, job_id, body)

    def wants_nack(self, body: str, delivery: Delivery) -> bool:
        return self.rng.random() < self.nack_probability

    def ack(self, node: int, job_id: bytes, body: str) -> None:
        if self.rng.random() < ACK_ELSEWHERE_PROBABILITY:
            node = self.random_node(exclude=node)
        self.ledger.acking(body, time.monotonic())
        for _ in range(ACK_ATTEMPTS):
            if self.try_call(node, "ACKJOB", job_id):
                self.ledger.acked(body, node, time.monotonic(), job_id.decode())
                return
            node = self.random_node(exclude=node)


def _counters(words: list) -> tuple[int, int] | None:
    """WITHCOUNTERS' words after the body (nacks N additional-deliveries M)."""
    if not words:
        return None
    fields = {bytes(words[i]).decode(): int(words[i + 1]) for i in range(0, len(words) - 1, 2)}
    return fields.get("nacks", 0), fields.get("additional-deliveries", 0)
