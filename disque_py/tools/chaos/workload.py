"""Producers and consumers: real clients against random nodes.

Owns the load. A producer sends ADDJOB ... REPLICATE r with a unique body to
a random node at a steady pace and records the outcome in the ledger before
and after (so a delivery can never precede its record). A consumer sends
GETJOB to a random node, records every job it gets, then NACKs a few (they
come back at once), sends WORKING for some, and ACKJOBs the rest on the same
node or another one, trying other nodes when the ack gets no answer. Nodes
that are down cost a refused connection or a socket timeout; the thread then
picks another node. A backlog (`--backlog N`) is loaded before the faults by
producers that add as fast as the nodes answer, into BACKLOG_QUEUE, which
consumers read only once they drain: jobs that sit unconsumed through every
fault, what re-replication is for. Each thread has its own random generator drawn from the
run's seed; thread timing still makes runs differ.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from disque_py.tools.chaos.ledger import Delivery, Ledger, job_body
from disque_py.tools.chaos.link import LinkError, Links, NoAnswer, NotSent, Refused

QUEUES = ("chaos-a", "chaos-b", "chaos-c")
BACKLOG_QUEUE = "chaos-backlog"
BACKLOG_PRODUCER_BASE = 1000      # backlog producers' numbers (their bodies differ)
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


@dataclass
class JobSpec:
    replicate: int
    retry_s: int
    ttl_s: int


class Worker(threading.Thread):
    """A daemon thread with a stop event, its own RNG and links; errors are kept."""

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


class Producer(Worker):
    """Adds jobs at `rate` a second (None: as fast as they are answered),
    `limit` of them (None: until stopped), to random queues of `queues`."""

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
        node = self.random_node()
        for attempt in range(NOT_SENT_ATTEMPTS):   # never sent: safe to try another node
            if self.add(body, queue, node, attempt == NOT_SENT_ATTEMPTS - 1):
                return
            node = self.random_node(exclude=node)
            self.stopping.wait(DOWN_NODE_BACKOFF_S)

    def add(self, body: str, queue: str, node: int, last: bool) -> bool:
        """One ADDJOB, recorded; False if it could not be sent at all."""
        self.ledger.sending(body, queue, node, time.monotonic())
        spec = self.spec
        try:
            job_id = self.links.call(node, "ADDJOB", queue, body, ADDJOB_TIMEOUT_MS,
                                     "REPLICATE", spec.replicate, "RETRY", spec.retry_s,
                                     "TTL", spec.ttl_s)
        except NotSent as error:
            self.ledger.add_failed(body, "not sent", str(error), final=last)
            return False
        except NoAnswer as error:
            self.ledger.add_failed(body, "no answer", str(error))
        except Refused as error:
            self.ledger.add_failed(body, str(error).split(" ")[0], str(error))
        else:
            self.ledger.added(body, job_id.decode(), time.monotonic())
        return True

    def _pace(self) -> None:
        now = time.monotonic()
        self.next_at = max(self.next_at + self.interval, now - 1.0)  # no catch-up bursts
        if self.next_at > now:
            self.stopping.wait(self.next_at - now)


class Consumer(Worker):
    def __init__(self, number: int, **kwargs) -> None:
        super().__init__(f"consumer{number}", socket_timeout=CONSUMER_SOCKET_TIMEOUT_S,
                         **kwargs)
        self.draining = threading.Event()    # no more NACKs: let the queues empty

    def step(self) -> None:
        node = self.random_node()
        asked_at = time.monotonic()
        queues = QUEUES + (BACKLOG_QUEUE,) if self.draining.is_set() else QUEUES
        try:
            jobs = self.links.call(node, "GETJOB", "TIMEOUT", GETJOB_TIMEOUT_MS,
                                   "COUNT", GETJOB_COUNT, "FROM", *queues)
        except NotSent:
            self.stopping.wait(DOWN_NODE_BACKOFF_S)
            return
        except LinkError:
            return
        for queue, job_id, body in jobs or []:
            body = body.decode()
            self.ledger.delivered(body, Delivery(asked_at, node, job_id.decode(),
                                                 queue.decode()))
            self.process(node, job_id, body)

    def process(self, node: int, job_id: bytes, body: str) -> None:
        self.stopping.wait(self.rng.uniform(0, MAX_PROCESSING_S))
        if not self.draining.is_set() and self.rng.random() < NACK_PROBABILITY:
            self._try(node, "NACK", job_id)
            self.ledger.nacked(body)      # sent: it may have worked even without a reply
            return
        if self.rng.random() < WORKING_PROBABILITY:
            self._try(node, "WORKING", job_id)
        self.ack(node, job_id, body)

    def ack(self, node: int, job_id: bytes, body: str) -> None:
        if self.rng.random() < ACK_ELSEWHERE_PROBABILITY:
            node = self.random_node(exclude=node)
        for _ in range(ACK_ATTEMPTS):
            if self._try(node, "ACKJOB", job_id):
                self.ledger.acked(body, node, time.monotonic())
                return
            node = self.random_node(exclude=node)

    def _try(self, node: int, *command) -> bool:
        try:
            self.links.call(node, *command)
            return True
        except LinkError:
            return False
