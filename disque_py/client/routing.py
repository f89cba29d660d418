"""Which node a client talks to, as Disque's README asks clients to choose.

- The client starts with the addresses it was given, and on connecting asks
  HELLO for every node and its priority (1: up, 10: may have failed, 100:
  failed), so it knows where to go when its node is lost.
- A lost node (a connection refused or dropped) is left for `retry_after`
  seconds; the client goes on with the best other node: lowest priority
  first, then the order HELLO listed them in, then the given addresses.
- A consumer counts which node produced the jobs it receives (the node
  prefix in each job ID); every `switch_after` jobs, if another known node
  produced more of them than the current one, the client moves there:
  jobs are then taken where they are, without federation moving them.
- A call naming jobs (ACKJOB, SHOW, WORKING...) goes to the node that made
  them when all were made by one known node that is not left aside; any
  node would do (the cluster routes acks), that one knows the job best.

No I/O here: the clients report what happened and ask where to go. The
clock is passed in, so tests move time by hand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from redis.exceptions import ConnectionError as RedisConnectionError

from disque_py.client.types import Hello, Job, producer_of

Address = tuple[str, int]

# A node given up on is tried again after this many seconds.
RETRY_AFTER_S = 5.0
# A consumer reconsiders its node after this many jobs.
SWITCH_AFTER_JOBS = 128


class NoNodeError(RedisConnectionError):
    """No node could be reached: every known address failed. A
    redis.ConnectionError, as a lost connection is."""


class Routes:
    """The node a client uses, the nodes it knows, and those left aside."""

    def __init__(self, seeds: Sequence[Address], clock: Callable[[], float],
                 retry_after: float = RETRY_AFTER_S,
                 switch_after: int = SWITCH_AFTER_JOBS) -> None:
        if not seeds:
            raise ValueError("a client needs at least one node address")
        self.seeds = list(seeds)
        self.current: Address = self.seeds[0]
        self.clock = clock
        self.retry_after = retry_after
        self.switch_after = switch_after
        self.by_prefix: dict[str, Address] = {}
        self.prefix_at: dict[Address, str] = {}
        self.priority: dict[Address, int] = {}
        self.order: list[Address] = []          # HELLO's order, then the seeds
        self.down_until: dict[Address, float] = {}
        self.produced: Counter[str] = Counter()
        self.received = 0

    # ----------------------------------------------------------- learning

    def learn(self, hello: Hello, via: Address) -> None:
        """HELLO's answer from `via`: every node, its address and priority."""
        self.by_prefix.clear()
        self.prefix_at.clear()
        self.priority.clear()
        listed = []
        for node in hello.nodes:
            address = (node.host, node.port)
            if node.id == hello.my_id:
                address = via               # as the client reached it (a name, not an IP)
            self.by_prefix[node.prefix] = address
            self.prefix_at[address] = node.prefix
            self.priority[address] = node.priority
            listed.append(address)
        self.order = listed + [seed for seed in self.seeds if seed not in listed]

    def is_down(self, address: Address) -> bool:
        until = self.down_until.get(address)
        if until is None:
            return False
        if self.clock() >= until:
            del self.down_until[address]
            return False
        return True

    # ------------------------------------------------------------ failing

    def failed(self, address: Address) -> None:
        """A connection to `address` failed: leave it aside, and if it was
        the current node, move to the best other one."""
        self.down_until[address] = self.clock() + self.retry_after
        if address == self.current:
            self.current = self.best()
            self.produced.clear()
            self.received = 0

    def candidates(self) -> list[Address]:
        """Every address worth trying, best first (the ones left aside last)."""
        known = self.order or self.seeds
        known = known + [seed for seed in self.seeds if seed not in known]
        up = [address for address in known if not self.is_down(address)]
        up.sort(key=lambda address: self.priority.get(address, 1))
        down = sorted((address for address in known if address not in up),
                      key=lambda address: self.down_until.get(address, 0.0))
        return up + down

    def no_node_error(self) -> NoNodeError:
        return NoNodeError(f"no node answered: tried {self.candidates()}")

    def known(self) -> int:
        """How many addresses the client knows (a call tries each once at most)."""
        return len(set(self.order) | set(self.seeds))

    def best(self) -> Address:
        return self.candidates()[0]

    def discovery_order(self) -> list[Address]:
        """Where to ask HELLO again: the current node first while it is not
        left aside (the client learns anew after any lost node, and must
        not leave a node it chose for a failure elsewhere), then the rest."""
        candidates = self.candidates()
        if self.current in candidates and not self.is_down(self.current):
            candidates.remove(self.current)
            candidates.insert(0, self.current)
        return candidates

    # ------------------------------------------------------------ routing

    def for_jobs(self, job_ids: Iterable[str]) -> Address:
        """Where a call naming these jobs goes: their producer when they
        share one that is known and not left aside, else the current node."""
        producer = None
        for job_id in job_ids:
            prefix = producer_of(job_id)
            if producer is None:
                producer = prefix
            elif prefix != producer:
                return self.current
        address = self.by_prefix.get(producer) if producer is not None else None
        if address is None or self.is_down(address):
            return self.current
        return address

    def handed_out(self, jobs: Sequence[Job]) -> None:
        """A consumer received these jobs: count their producers, and every
        `switch_after` jobs move to the node that produced most of them."""
        for job in jobs:
            self.produced[producer_of(job.id)] += 1
        self.received += len(jobs)
        if self.received < self.switch_after:
            return
        leader, count = self.produced.most_common(1)[0]
        mine = self.produced.get(self.prefix_at.get(self.current, ""), 0)
        self.produced.clear()
        self.received = 0
        address = self.by_prefix.get(leader)
        if address is not None and count > mine and not self.is_down(address):
            self.current = address
