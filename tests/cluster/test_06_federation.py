"""Federation with real processes: jobs travel to where consumers wait
(Disque's README "Cluster messages related to nodes federation" and its Tcl
unit 06-federation).

  * a consumer blocked on node B gets a job added on node A, quickly;
  * producers on A, consumers on B and C: every job arrives, none twice
    (RETRY is long, so no re-queue may fire);
  * a queue paused in output on A gives B nothing until the pause ends;
  * after a flow QSTAT on B names A in import-from, with a positive
    import-rate; INFO federation counters move on both sides;
  * Disque's scenario: 100 jobs on random nodes with REPLICATE 3, all
    fetched from node 0; then 100 at-most-once jobs on node 1, all fetched
    from node 0.

Three nodes, cluster-node-timeout 1000 ms, one cluster for the module;
every test uses its own queue names, so tests do not see each other's jobs.
"""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest

from tests.cluster.harness import MARGIN_S, call, poll, show

LONG_RETRY_S = 600
FAST_DELIVERY_S = 2.0          # a loose bound on one job's trip from A to B
FLOW_DEADLINE_S = 60.0
BCAST_MAX_DELAY_S = 5.0        # node/federation.py: the slowest NEEDJOBS broadcast period


@pytest.fixture(scope="module")
def trio(make_cluster):
    return make_cluster(3)


@pytest.fixture
def queue_name():
    return "fed-" + uuid.uuid4().hex[:10]


# ------------------------------------------------------------------ helpers

def addjob(proc, queue, body, *options, timeout_ms=5000) -> bytes:
    return call(proc, "ADDJOB", queue, body, timeout_ms, *options)


def qstat(proc, queue) -> dict[str, object]:
    reply = call(proc, "QSTAT", queue)
    return {} if reply is None else {k.decode(): v for k, v in zip(reply[::2], reply[1::2])}


def federation_info(proc) -> dict[str, int]:
    text = call(proc, "INFO", "federation").decode()
    assert text.startswith("# Federation\r\n"), text
    fields = {}
    for line in text.split("\r\n")[1:]:
        if line:
            key, _, value = line.partition(":")
            fields[key] = int(value)
    return fields


class Getter(threading.Thread):
    """One blocking GETJOB on its own connection, timed."""

    def __init__(self, proc, queue, timeout_ms: int) -> None:
        super().__init__(daemon=True)
        self.client = proc.client(socket_timeout=timeout_ms / 1000 + 30)
        self.queue, self.timeout_ms = queue, timeout_ms
        self.reply = self.error = None
        self.returned_at = None

    def run(self) -> None:
        try:
            self.reply = self.client.execute_command("GETJOB", "TIMEOUT", self.timeout_ms,
                                                     "FROM", self.queue)
        except Exception as error:  # reported by result()
            self.error = error
        self.returned_at = time.monotonic()

    def result(self, wait_s: float):
        self.join(wait_s)
        assert not self.is_alive(), f"GETJOB still blocked after {wait_s}s"
        if self.error is not None:
            raise self.error
        return self.reply


def park(proc, queue, timeout_ms: int) -> Getter:
    """Start a GETJOB on `proc` and wait until the node has it parked."""
    getter = Getter(proc, queue, timeout_ms)
    before = qstat(proc, queue).get("blocked", 0)
    getter.start()
    poll(lambda: qstat(proc, queue).get("blocked", 0) > before, 5 + MARGIN_S,
         f"a client blocked on {queue}")
    return getter


class Consumers:
    """Threads that GETJOB and ACKJOB on some nodes until `expected` jobs
    (by ID) have been seen; every delivery is recorded with its node."""

    def __init__(self, procs, queue, expected: int, per_node: int = 2) -> None:
        self.queue, self.expected = queue, expected
        self.deliveries: dict[bytes, list[int]] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.errors: list[Exception] = []
        self.threads = [threading.Thread(target=self._run, args=(proc, index), daemon=True)
                        for proc, index in procs for _ in range(per_node)]

    def start(self) -> "Consumers":
        for thread in self.threads:
            thread.start()
        return self

    def _run(self, proc, index: int) -> None:
        client = proc.client(socket_timeout=30)
        try:
            while not self.done.is_set():
                reply = client.execute_command("GETJOB", "TIMEOUT", 500, "COUNT", 10,
                                               "FROM", self.queue)
                for _queue, job_id, _body in reply or ():
                    client.execute_command("ACKJOB", job_id)
                    with self.lock:
                        self.deliveries.setdefault(job_id, []).append(index)
                        if len(self.deliveries) >= self.expected:
                            self.done.set()
        except Exception as error:
            self.errors.append(error)
            self.done.set()

    def wait(self, timeout: float) -> None:
        self.done.wait(timeout)
        self.done.set()
        for thread in self.threads:
            thread.join(10)
        assert not self.errors, self.errors

    def twice(self) -> dict[bytes, list[int]]:
        return {job_id: nodes for job_id, nodes in self.deliveries.items() if len(nodes) > 1}


# ------------------------------------------------------------------ one job

@pytest.mark.parametrize("replicate", [["REPLICATE", 1], []], ids=["repl1", "repl-default"])
def test_a_consumer_blocked_on_b_gets_a_job_added_on_a_quickly(trio, queue_name, replicate):
    a, b = trio[0], trio[1]
    asked = federation_info(a)["needjobs_received"]
    getter = park(b, queue_name, 20_000)
    poll(lambda: federation_info(a)["needjobs_received"] > asked, 5 + MARGIN_S,
         "B's NEEDJOBS reaching A")
    started = time.monotonic()
    job_id = addjob(a, queue_name, "hello", *replicate, "RETRY", LONG_RETRY_S)
    reply = getter.result(20 + MARGIN_S)
    latency = getter.returned_at - started
    print(f"\nA->B delivery latency ({'default' if not replicate else 'REPLICATE 1'}): "
          f"{latency * 1000:.1f} ms")
    assert reply == [[queue_name.encode(), job_id, b"hello"]]
    assert latency < FAST_DELIVERY_S
    assert call(b, "ACKJOB", job_id) == 1


# ------------------------------------------------------------------ flows

def test_every_job_produced_on_a_reaches_b_or_c_exactly_once(trio, queue_name):
    total = 300
    consumers = Consumers([(trio[1], 1), (trio[2], 2)], queue_name, total).start()
    produced = []
    for n in range(total):
        produced.append(addjob(trio[0], queue_name, f"job-{n}", "RETRY", LONG_RETRY_S))
    consumers.wait(FLOW_DEADLINE_S)
    missing = set(produced) - set(consumers.deliveries)
    print(f"\n{total} jobs from A: {sum(len(v) for v in consumers.deliveries.values())} "
          f"deliveries, B got {sum(v.count(1) for v in consumers.deliveries.values())}, "
          f"C got {sum(v.count(2) for v in consumers.deliveries.values())}")
    assert not missing, f"{len(missing)} of {total} jobs never delivered"
    assert set(consumers.deliveries) == set(produced)
    assert not consumers.twice(), f"delivered twice without a retry: {consumers.twice()}"
    poll(lambda: all(call(p, "QLEN", queue_name) == 0 for p in trio), 5 + MARGIN_S,
         "every queue empty")


def test_qstat_on_b_names_a_in_import_from_with_a_positive_rate(trio, queue_name):
    a, b = trio[0], trio[1]
    total = 50
    consumers = Consumers([(b, 1)], queue_name, total, per_node=1).start()
    for n in range(total):
        addjob(a, queue_name, f"job-{n}", "REPLICATE", 1, "RETRY", LONG_RETRY_S)
    consumers.wait(FLOW_DEADLINE_S)
    assert len(consumers.deliveries) == total
    stat = qstat(b, queue_name)
    assert stat["import-from"] == [trio.ids[0].encode()]
    assert stat["import-rate"] > 0
    assert qstat(a, queue_name)["import-from"] == []


def test_info_federation_counters_move_on_both_sides(trio, queue_name):
    a, b = trio[0], trio[1]
    before_a, before_b = federation_info(a), federation_info(b)
    assert set(before_a) == {"needjobs_sent", "needjobs_received", "yourjobs_jobs_sent",
                             "yourjobs_jobs_received", "jobs_offered_to_waiting_nodes"}
    job_id = addjob(a, queue_name, "counted", "REPLICATE", 1, "RETRY", LONG_RETRY_S)
    reply = Getter(b, queue_name, 10_000)
    reply.start()
    ((_, got, _),) = reply.result(10 + MARGIN_S)
    assert got == job_id
    after_a, after_b = federation_info(a), federation_info(b)
    assert after_b["needjobs_sent"] > before_b["needjobs_sent"]
    assert after_a["needjobs_received"] > before_a["needjobs_received"]
    assert after_a["yourjobs_jobs_sent"] >= before_a["yourjobs_jobs_sent"] + 1
    assert after_b["yourjobs_jobs_received"] >= before_b["yourjobs_jobs_received"] + 1
    call(b, "ACKJOB", job_id)


def test_a_queue_paused_in_output_is_not_a_source_until_the_pause_ends(trio, queue_name):
    a, b = trio[0], trio[1]
    assert call(a, "PAUSE", queue_name, "out") == b"out"
    job_id = addjob(a, queue_name, "held", "REPLICATE", 1, "RETRY", LONG_RETRY_S)
    asked = federation_info(a)["needjobs_received"]
    # B waits 3 s and gets nothing, although it asked A meanwhile.
    waited = Getter(b, queue_name, 3000)
    waited.run()
    assert waited.error is None and waited.reply is None
    assert federation_info(a)["needjobs_received"] > asked
    assert call(a, "QLEN", queue_name) == 1 and call(b, "QLEN", queue_name) == 0
    getter = park(b, queue_name, 30_000)
    assert call(a, "PAUSE", queue_name, "none") == b"none"
    cleared = time.monotonic()
    ((_, got, _),) = getter.result(BCAST_MAX_DELAY_S + 2 * MARGIN_S)
    assert got == job_id
    print(f"\nafter PAUSE none: delivered on B in {(getter.returned_at - cleared) * 1000:.0f} ms")
    call(b, "ACKJOB", job_id)


def test_a_paused_source_gives_nothing_to_a_blocked_consumer_while_paused(trio, queue_name):
    a, b = trio[0], trio[1]
    call(a, "PAUSE", queue_name, "out")
    getter = park(b, queue_name, 2500)
    addjob(a, queue_name, "held", "REPLICATE", 1, "RETRY", LONG_RETRY_S)
    assert getter.result(2.5 + 10 + MARGIN_S) is None         # timed out: nothing came
    assert call(a, "QLEN", queue_name) == 1
    call(a, "PAUSE", queue_name, "none")


# ------------------------------------------------------------------ Disque's 06

def active_copies(trio, job_id) -> int:
    """count_job_copies(job, active): holders (by nodes-delivered) with it active."""
    ids = {node_id.encode(): proc for node_id, proc in zip(trio.ids, trio)}
    delivered = show(trio[0], job_id) or next(filter(None, (show(p, job_id) for p in trio)))
    count = 0
    for node_id in delivered["nodes-delivered"]:
        copy = show(ids[node_id], job_id)
        if copy is not None and copy["state"] == b"active":
            count += 1
    return count


def fetch_all_from(proc, queue, expected: int) -> tuple[set[bytes], int]:
    """GETJOB TIMEOUT 5000 and ACKJOB until `expected` distinct bodies came."""
    bodies: set[bytes] = set()
    fetched = 0
    client = proc.client(socket_timeout=30)
    while len(bodies) != expected:
        reply = client.execute_command("GETJOB", "TIMEOUT", 5000, "FROM", queue)
        assert reply, f"can't retrieve more jobs ({len(bodies)} of {expected})"
        ((_, job_id, body),) = reply
        bodies.add(body)
        fetched += 1
        client.execute_command("ACKJOB", job_id)
    return bodies, fetched


def test_disque_06_jobs_added_on_random_nodes_are_all_fetched_from_node_0(trio):
    queue, numjobs = "myqueue", 100
    rng = random.Random(6)
    for j in range(numjobs):
        proc = trio[rng.randrange(len(trio))]
        job_id = addjob(proc, queue, f"job_{j}", "REPLICATE", 3)
        assert job_id
        assert active_copies(trio, job_id) >= 2
    assert call(trio[0], "QLEN", queue) != numjobs       # node 0 does not have them all
    started = time.monotonic()
    bodies, fetched = fetch_all_from(trio[0], queue, numjobs)
    print(f"\n06 part 1: {numjobs} jobs fetched from node 0 in "
          f"{time.monotonic() - started:.2f} s ({fetched - numjobs} duplicates)")
    assert bodies == {f"job_{j}".encode() for j in range(numjobs)}
    assert fetched == numjobs

    for j in range(numjobs):
        # (node 0 asked for this queue moments ago: node 1 may push each job to
        # it at once, so SHOW on node 1 may already be empty, unlike Disque's)
        assert addjob(trio[1], queue, f"job_{j}", "REPLICATE", 1, "RETRY", 0)
    started = time.monotonic()
    bodies, fetched = fetch_all_from(trio[0], queue, numjobs)
    print(f"06 part 2: {numjobs} at-most-once jobs fetched from node 0 in "
          f"{time.monotonic() - started:.2f} s")
    assert bodies == {f"job_{j}".encode() for j in range(numjobs)}
    assert fetched == numjobs
