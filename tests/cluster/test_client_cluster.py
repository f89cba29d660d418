"""The client on a real 3-node cluster, as Disque's README asks clients to
behave: it learns every node with HELLO; when the node it uses is killed
-9 it carries on elsewhere (a call in flight too, when sending it again is
safe; an ADDJOB without DEDUP raises instead, it may have run); a
consumer served through federation moves to the node producing its jobs;
calls naming a job go to the node that made it. Where a call went is read
in each node's INFO commandstats. Blocking and asyncio clients alike.

One cluster for the module; a node a test kills is restarted after it.
Every test uses its own queue names.
"""

from __future__ import annotations

import threading

import pytest
import redis

from disque_py.client import NoReplError
from disque_py.client.types import producer_of
from tests.client_support import KINDS, ClientMaker, unique
from tests.cluster.harness import call, info, poll
from tests.support import HOST

pytestmark = pytest.mark.timeout(120)

SWITCH_AFTER = 8                 # jobs a consumer counts before it reconsiders its node
FEDERATION_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def trio(make_cluster):
    return make_cluster(3)


@pytest.fixture
def cluster(trio):
    """The module's cluster, whole again after the test (killed nodes
    restarted, every node seeing every other one up)."""
    yield trio
    for proc in trio:
        if not proc.alive():
            proc.start()
    trio.wait_full_mesh(timeout=30)


@pytest.fixture(params=KINDS, ids=lambda flavour: flavour.kind)
def make_client(request):
    maker = ClientMaker(request.param)
    yield maker
    maker.close()


def address(proc) -> tuple[str, int]:
    return (HOST, proc.port)


def client_of(make_client, proc, **options):
    """A client told only of `proc`, connected and knowing the cluster."""
    client = make_client(f"disque://{HOST}:{proc.port}", **options)
    assert client.ping()
    return client


def calls(proc, command: str) -> int:
    """How many times the node ran `command` (INFO commandstats)."""
    stats = info(proc, "commandstats").get(f"cmdstat_{command}", "calls=0")
    return int(stats.split(",")[0].partition("=")[2])


def calls_everywhere(cluster, *commands: str) -> list[dict[str, int]]:
    return [{command: calls(proc, command) for command in commands} for proc in cluster]


# ------------------------------------------------------------------ HELLO

def test_the_client_learns_every_node_with_hello(cluster, make_client):
    client = client_of(make_client, cluster[0])
    routes = client.routes
    assert routes.current == address(cluster[0])
    assert routes.by_prefix == {node_id[:8]: address(proc)
                                for node_id, proc in zip(cluster.ids, cluster)}
    assert sorted(routes.candidates()) == sorted(address(proc) for proc in cluster)
    assert {node.id for node in client.hello().nodes} == set(cluster.ids)


# ------------------------------------------------------------ a node killed

# The first call after the kill, each safe to send again elsewhere.
FIRST_CALLS = {
    "qlen": lambda client, queue: client.qlen(queue) == 0,
    "get": lambda client, queue: client.get(queue, nohang=True) == [],
    "add-dedup": lambda client, queue: client.add(queue, b"x", dedup="k", replicate=2),
}


@pytest.mark.parametrize("first_call", FIRST_CALLS)
def test_after_its_node_is_killed_the_client_goes_on_on_another(cluster, make_client,
                                                                first_call):
    client = client_of(make_client, cluster[0])
    queue = unique()
    made_on_0 = client.add(unique(), b"copied", replicate=3)
    cluster[0].kill()
    assert FIRST_CALLS[first_call](client, queue)          # no error seen
    assert client.routes.current != address(cluster[0])
    assert client.show(made_on_0).body == b"copied"          # a copy elsewhere
    job_id = client.add(queue, b"deduplicated", dedup=unique("key"), replicate=2)
    assert producer_of(job_id) != cluster.ids[0][:8]


@pytest.mark.parametrize("make_client", [KINDS[0]], ids=["sync"], indirect=True)
def test_an_add_without_dedup_after_the_kill_goes_on_as_it_was_never_sent(cluster,
                                                                         make_client):
    """The blocking client finds its pooled connection closed before
    sending (redis-py checks it), so the ADDJOB goes to another node. (The
    asyncio client sees the close only once its event loop has read it: a
    call made before may be sent and raise ConnectionError, see below.)"""
    client = client_of(make_client, cluster[0])
    cluster[0].kill()
    job_id = client.add(unique(), b"never sent to 0", replicate=2)
    assert producer_of(job_id) != cluster.ids[0][:8]


def test_an_add_waiting_for_copies_past_the_socket_timeout_gets_the_servers_answer(
        cluster, make_client):
    """ADDJOB waits up to its own timeout for its copies (a stopped node
    makes none): the answer is the server's NOREPL, not a socket timeout
    that takes a live node for lost."""
    client = client_of(make_client, cluster[0], socket_timeout=0.5)
    cluster[2].pause()
    try:
        with pytest.raises(NoReplError, match="Timeout reached before replicating"):
            client.add(unique(), b"body", replicate=3, timeout=800)
    finally:
        cluster[2].resume()
    assert client.routes.down_until == {}


def connections_waiting(proc) -> int:
    """Connections to the node holding bytes it has not read (/proc/net/tcp):
    calls sent to it while it is stopped."""
    port = f":{proc.port:04X}"
    waiting = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, state, queues = line.split()[1], line.split()[3], line.split()[4]
            if local.endswith(port) and state == "01" and int(queues.split(":")[1], 16):
                waiting += 1
    return waiting


class InFlight(threading.Thread):
    """One client call run in its own thread: its answer or its error."""

    def __init__(self, call) -> None:
        super().__init__(daemon=True)
        self.call, self.answer, self.error = call, None, None

    def run(self) -> None:
        try:
            self.answer = self.call()
        except Exception as error:
            self.error = error


def test_calls_in_flight_when_their_node_dies_go_on_only_when_safe(cluster, make_client):
    """Three clients send to a stopped node, which is then killed -9: the
    QLEN and the ADDJOB with DEDUP are answered by another node; the
    ADDJOB without DEDUP raises ConnectionError (it may have run), and
    that client's next call works."""
    victim = cluster[0]
    queue = unique()
    reader, deduplicated, plain = (client_of(make_client, victim) for _ in range(3))
    victim.pause()
    flights = [InFlight(lambda: reader.qlen(unique("empty"))),
               InFlight(lambda: deduplicated.add(queue, b"once", dedup="k", replicate=2)),
               InFlight(lambda: plain.add(queue, b"maybe", replicate=2))]
    for flight in flights:
        flight.start()
    poll(lambda: connections_waiting(victim) == len(flights), timeout=10,
         message="the three calls queued at the stopped node")
    victim.kill()
    for flight in flights:
        flight.join(timeout=60)
    (qlen, added, refused) = flights
    assert (qlen.error, qlen.answer) == (None, 0)
    assert added.error is None and producer_of(added.answer) != cluster.ids[0][:8]
    assert isinstance(refused.error, redis.ConnectionError), refused.error
    assert plain.qlen(queue) == 1                  # the next call, on another node


# -------------------------------------------------------- where calls go

def test_a_consumer_moves_to_the_node_producing_its_jobs(cluster, make_client):
    consumer = client_of(make_client, cluster[0])
    consumer.routes.switch_after = SWITCH_AFTER
    queue = unique()
    for n in range(SWITCH_AFTER):
        call(cluster[1], "ADDJOB", queue, b"job %d" % n, 5000, "REPLICATE", 1, "RETRY", 600)
    received = []

    def federated():
        received.extend(consumer.get(queue, count=SWITCH_AFTER, timeout=1000))
        return len(received) >= SWITCH_AFTER
    poll(federated, timeout=FEDERATION_DEADLINE_S, message="jobs pulled from node 1")
    assert {job.producer for job in received} == {cluster.ids[1][:8]}
    assert consumer.routes.current == address(cluster[1])
    before = calls_everywhere(cluster, "getjob")
    consumer.get(queue, nohang=True)
    after = calls_everywhere(cluster, "getjob")
    assert [a["getjob"] - b["getjob"] for a, b in zip(after, before)] == [0, 1, 0]


def test_a_node_lost_elsewhere_leaves_the_client_on_its_node(cluster, make_client):
    """A job call fails on its dead producer and goes on on the current
    node; the client learns the cluster anew, staying on the node it chose."""
    client = client_of(make_client, cluster[0])
    job_id = call(cluster[2], "ADDJOB", unique(), b"body", 5000, "REPLICATE", 3).decode()
    client.routes.current = address(cluster[1])          # as a consumer's move would
    cluster[2].kill()
    assert client.show(job_id).body == b"body"            # node 1's copy
    assert client.ping() and client.routes.current == address(cluster[1])


def test_ack_show_and_working_go_to_the_node_that_made_the_job(cluster, make_client):
    client = client_of(make_client, cluster[0])
    queue = unique()
    job_id = call(cluster[1], "ADDJOB", queue, b"made on 1", 5000, "REPLICATE", 1,
                  "RETRY", 90).decode()
    commands = ("show", "working", "ackjob")
    before = calls_everywhere(cluster, *commands)
    assert client.show(job_id).body == b"made on 1"        # only node 1 knows it
    assert client.working(job_id) == 90
    assert client.ack(job_id) == 1
    after = calls_everywhere(cluster, *commands)
    assert [{command: a[command] - b[command] for command in commands}
            for a, b in zip(after, before)] == \
        [dict.fromkeys(commands, 0), dict.fromkeys(commands, 1), dict.fromkeys(commands, 0)]
    assert client.routes.current == address(cluster[0])


def test_a_consumer_on_a_leaving_node_goes_on_on_another(cluster, make_client):
    """A leaving node answers a GETJOB it cannot serve at once with
    -LEAVING: it did nothing, so the call goes to another node."""
    consumer = client_of(make_client, cluster[0])
    assert call(cluster[0], "CLUSTER", "LEAVING", "yes") == b"OK"
    try:
        assert consumer.get(unique(), timeout=100) == []
    finally:
        assert call(cluster[0], "CLUSTER", "LEAVING", "no") == b"OK"
    assert consumer.routes.current != address(cluster[0])
