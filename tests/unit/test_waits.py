"""WAITJOB and QWAIT in the core (node/waits.py), on the fake clock.

A single node drives each status (acked, deleted, expired, unknown,
pending at the timeout), duplicated IDs, several waiters, a client that
goes away and DEBUG FLUSHALL; the in-memory network (simnet.py) shows an
ack made on one node waking a WAITJOB on another holder, and QWAIT counting
replica copies. Replies are rendered as the runtime renders them
(commands/queues.py render_outcome), so what is checked is what a client
would read.
"""

from __future__ import annotations

import itertools

import pytest

from disque_py.formats import bus as msg
from disque_py.commands.context import Park
from disque_py.commands.queues import render_outcome
from disque_py.base.effects import Unblock
from disque_py.engine import GONE_MOVED
from disque_py.node.waiters import DONE
from disque_py.node.waits import Waits
from disque_py.formats.resp import encode
from disque_py.server.state import ServerState
from disque_py.config import Config
from tests.unit.simnet import SimNet
from tests.engine.commands import ack_jobs, get_jobs

UNKNOWN_ID = b"D-abcdef01-" + b"A" * 24 + b"-0001"
FOREVER = 0                          # no deadline


def add(node, queue=b"q", *, ttl=3600, repl=None, retry=None):
    return node.add_job(queue, b"body", repl, 0, retry, ttl, 0, False)


def answers(node) -> dict:
    """client -> the reply its parked command got, from the node's effects."""
    return {effect.waiter.client: render_outcome(effect.waiter, effect.outcome)
            for effect in node.take_effects() if type(effect) is Unblock}


def parked(node, client, job_ids, deadline=FOREVER):
    statuses, waiter = node.waits.wait_for_jobs(client, list(job_ids), deadline)
    assert waiter is not None, statuses
    return waiter


def idle(node) -> bool:
    """Nothing of WAITJOB or QWAIT is left on the node."""
    return not node.waits.job_waits and not node.waits.queue_waits and node.parking.blocked_clients == 0


# ------------------------------------------------------------ WAITJOB now

def test_unknown_ids_answer_unknown_at_once_and_park_nothing(node):
    statuses, waiter = node.waits.wait_for_jobs("c", [UNKNOWN_ID, UNKNOWN_ID], FOREVER)
    assert (statuses, waiter) == ([b"unknown", b"unknown"], None)
    assert idle(node)


def test_a_job_acked_here_answers_acked_at_once(node):
    node.cluster_size = 2                # an ack for a job held elsewhere stays here
    assert ack_jobs(node, [UNKNOWN_ID]) == 0
    statuses, waiter = node.waits.wait_for_jobs("c", [UNKNOWN_ID], FOREVER)
    assert (statuses, waiter) == ([b"acked"], None)


def test_an_open_job_parks_with_its_position_pending(node):
    job = add(node)
    waiter = parked(node, "c", [UNKNOWN_ID, job.id])
    assert waiter.statuses == [b"unknown", b"pending"]
    assert node.parking.blocked_clients == 1 and list(node.waits.job_waits) == [job.id]


# ------------------------------------------------------------ each status

def test_fastack_answers_acked(node):
    job = add(node)
    parked(node, "c", [job.id])
    node.fast_ack([job.id])
    assert answers(node) == {"c": [b"acked"]}
    assert idle(node)


def test_ack_collected_through_setack_answers_acked(node):
    job = add(node)
    parked(node, "c", [job.id])
    node.acks.on_setack(b"f" * 40, 0, job.id, 1)
    assert answers(node) == {"c": [b"acked"]}


def test_ackjob_of_a_job_held_only_here_answers_acked(node):
    job = add(node)
    parked(node, "c", [job.id])
    ack_jobs(node, [job.id])
    assert answers(node) == {"c": [b"acked"]}


def test_deljob_answers_deleted(node):
    job = add(node)
    parked(node, "c", [job.id])
    assert node.delete_jobs([job.id]) == 1
    assert answers(node) == {"c": [b"deleted"]}


def test_a_job_reaching_its_ttl_answers_expired(node, drive):
    job = add(node, ttl=5)
    parked(node, "c", [job.id])
    drive(4000)
    assert answers(node) == {}
    drive(2000)
    assert answers(node) == {"c": [b"expired"]}
    assert idle(node)


def test_the_timeout_answers_what_is_known_with_pending_for_the_rest(node, clock, drive):
    done, still_open = add(node), add(node)
    parked(node, "c", [done.id, still_open.id, UNKNOWN_ID], clock.now_ms() + 100)
    node.fast_ack([done.id])
    assert answers(node) == {}
    drive(99)
    assert answers(node) == {}
    drive(1)
    assert answers(node) == {"c": [b"acked", b"pending", b"unknown"]}
    assert idle(node)


def test_a_job_moved_to_another_node_keeps_its_waiter_waiting(node):
    # Federation hands an at-most-once job to the node that asked for it:
    # this node cannot learn its fate, so the position stays pending.
    job = add(node, repl=1, retry=0)
    parked(node, "c", [job.id])
    node.unregister(job, GONE_MOVED)
    assert answers(node) == {}
    assert list(node.waits.job_waits) == [job.id] and node.parking.blocked_clients == 1


# ------------------------------------------------------------ several IDs, waiters

def test_duplicated_ids_answer_every_position(node):
    first, second = add(node), add(node)
    parked(node, "c", [first.id, second.id, first.id])
    node.fast_ack([first.id])
    assert answers(node) == {}
    node.delete_jobs([second.id])
    assert answers(node) == {"c": [b"acked", b"deleted", b"acked"]}


def test_several_waiters_on_one_job_are_all_answered(node, clock, drive):
    shared, other = add(node), add(node)
    parked(node, "a", [shared.id])
    parked(node, "b", [shared.id, other.id])
    parked(node, "c", [shared.id], clock.now_ms() + 50)
    drive(50)
    assert answers(node) == {"c": [b"pending"]}
    node.fast_ack([shared.id])
    assert answers(node) == {"a": [b"acked"]}
    node.fast_ack([other.id])
    assert answers(node) == {"b": [b"acked", b"acked"]}
    assert idle(node)


def test_a_client_that_goes_away_leaves_nothing_behind(node):
    job = add(node)
    waiter = parked(node, "c", [job.id, UNKNOWN_ID])
    qwaiter = node.waits.wait_for_queue("d", b"q", FOREVER)
    node.parking.cancel(waiter)
    node.parking.cancel(qwaiter)
    assert idle(node)
    node.fast_ack([job.id])
    assert answers(node) == {}


def test_flushall_answers_every_waiter(node):
    job = add(node)
    parked(node, "c", [job.id, UNKNOWN_ID])
    node.waits.wait_for_queue("d", b"q", FOREVER)
    node.flush_all()
    assert answers(node) == {"c": [b"deleted", b"unknown"], "d": 1}
    assert idle(node)


# ------------------------------------------------------------ QWAIT

def test_qwait_on_an_unknown_or_finished_queue_answers_at_once_and_makes_no_queue(node):
    assert node.waits.wait_for_queue("c", b"nosuch", FOREVER) is None
    assert node.queues.get(b"nosuch") is None
    job = add(node)
    node.fast_ack([job.id])
    assert node.waits.wait_for_queue("c", b"q", FOREVER) is None
    assert idle(node)


def test_qwait_counts_queued_and_active_jobs_until_the_last_is_acked(node):
    first, second = add(node), add(node)
    node.waits.wait_for_queue("c", b"q", FOREVER)
    assert get_jobs(node, [b"q"], 1) == [first]      # active now: still open
    node.fast_ack([first.id])
    third = add(node)                               # a job added while waiting counts
    node.fast_ack([second.id])
    assert answers(node) == {}
    node.delete_jobs([third.id])
    assert answers(node) == {"c": 1}
    assert idle(node)


def test_qwait_times_out_with_zero_while_jobs_are_open(node, clock, drive):
    add(node)
    node.waits.wait_for_queue("c", b"q", clock.now_ms() + 200)
    drive(200)
    assert answers(node) == {"c": 0}
    assert idle(node)


def test_qwait_ignores_other_queues(node):
    add(node, b"q")
    other = add(node, b"other")
    node.waits.wait_for_queue("c", b"q", FOREVER)
    node.fast_ack([other.id])
    assert answers(node) == {}


def test_qwaits_on_one_queue_share_one_scan_of_the_job_table(node, monkeypatch):
    scans = []
    monkeypatch.setattr(Waits, "count_open_jobs",
                        lambda self, name: scans.append(name) or 1)
    job = add(node)
    for client in ("a", "b", "c"):
        node.waits.wait_for_queue(client, b"q", FOREVER)
    assert scans == [b"q"]
    node.fast_ack([job.id])
    assert answers(node) == {"a": 1, "b": 1, "c": 1}


def test_a_job_moving_queue_moves_its_count(node):
    # The contract dead-lettering relies on: waits_queue_moved(job, old).
    add(node, b"q:dead")
    live = add(node, b"q")
    node.waits.wait_for_queue("dead", b"q:dead", FOREVER)
    node.waits.wait_for_queue("live", b"q", FOREVER)
    node.waits.job_moved(live, b"q:dead")          # as if `live` came from q:dead
    assert answers(node) == {"dead": 1}
    assert node.waits.queue_waits[b"q"].open == 2 and b"q:dead" not in node.waits.queue_waits


def test_a_job_moved_to_another_node_leaves_the_queue_count(node):
    job = add(node, repl=1, retry=0)
    node.waits.wait_for_queue("c", b"q", FOREVER)
    node.unregister(job, GONE_MOVED)
    assert answers(node) == {"c": 1}


# ------------------------------------------------------------ commands

@pytest.fixture
def call(node):
    server = ServerState(node, Config())
    session = server.new_session()
    return lambda *args: server.commands.dispatch(
        server, session, [arg if isinstance(arg, bytes) else str(arg).encode() for arg in args])


def test_waitjob_and_qwait_answer_at_once_when_nothing_is_open(call):
    assert encode(call("WAITJOB", UNKNOWN_ID, "TIMEOUT", 10)) == \
        b"*1\r\n$7\r\nunknown\r\n"
    assert encode(call("QWAIT", "q")) == b":1\r\n"


def test_waitjob_and_qwait_park_with_a_deadline(call, node, clock):
    job = add(node)
    reply = call("waitjob", job.id, "timeout", 300)
    assert isinstance(reply, Park) and reply.waiter.deadline == clock.now_ms() + 300
    reply = call("qwait", "q")
    assert isinstance(reply, Park) and reply.waiter.deadline == 0


def test_rendering_of_each_outcome(node):
    job = add(node)
    waiter = parked(node, "c", [job.id])
    queue_waiter = node.waits.wait_for_queue("d", b"q", FOREVER)
    assert encode(render_outcome(queue_waiter, DONE)) == b":1\r\n"
    node.fast_ack([job.id])
    assert encode(render_outcome(waiter, DONE)) == b"*1\r\n$5\r\nacked\r\n"


# ------------------------------------------------------------ the cluster

_clients = itertools.count()


def replicated(net: SimNet, node: int = 0, *, repl: int, queue: bytes = b"q"):
    client = ("producer", next(_clients))
    job = net.add_job(node, queue, repl=repl, client=client)
    assert net.run_until(lambda: client in net.unblocked, 1000)
    return job


def test_an_ack_on_another_node_wakes_a_waitjob_on_a_holder():
    net = SimNet(3, seed=21)
    job = replicated(net, repl=3)
    waiter = net.call(1, "waits.wait_for_jobs", "c", [job.id], FOREVER)[1]
    assert waiter is not None
    assert net.call(2, ack_jobs, [job.id]) == 1
    assert net.run_until(lambda: "c" in net.unblocked, 1000)
    assert net.unblocked["c"] == [DONE] and waiter.statuses == [b"acked"]
    assert idle(net.nodes[1])


def test_a_holder_that_kept_an_ack_answers_acked_at_once():
    net = SimNet(3, seed=22)
    job = replicated(net, repl=3)
    net.drop_rule = lambda m: m.kind == msg.DELJOB        # the ack stays on node 1
    net.call(0, ack_jobs, [job.id])
    assert net.run_until(lambda: net.copies(job.id).get(1) == "acked", 1000)
    assert net.call(1, "waits.wait_for_jobs", "c", [job.id], FOREVER) == ([b"acked"], None)


def test_qwait_counts_replica_copies_on_a_holder():
    net = SimNet(3, seed=23)
    first = replicated(net, repl=3)
    assert net.call(1, "waits.wait_for_queue", "c", b"q", FOREVER) is not None
    second = replicated(net, repl=3)                 # its copy reaches node 1 too
    assert net.copies(second.id).get(1) == "active"
    net.call(0, ack_jobs, [first.id])
    net.run_for(2000)
    assert "c" not in net.unblocked
    net.call(2, ack_jobs, [second.id])
    assert net.run_until(lambda: "c" in net.unblocked, 1000)
    assert net.unblocked["c"] == [DONE]
    assert idle(net.nodes[1])
