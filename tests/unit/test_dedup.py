"""ADDJOB ... DEDUP key [WINDOW seconds] in the core, on the fake clock: a
duplicate answers the first job's ID and makes nothing, per queue, until
the window ends (TTL by default), after the job is gone too, copying no
body; the table's
bound and memory; a failed first ADDJOB freeing its key on every node; a
duplicate that arrives while the first waits for its copies getting the
same answer; the key carried to holders in version 3 of the options block
(and left out for peers that read version 2)."""

from __future__ import annotations

import tracemalloc

import pytest

from disque_py.formats import bus as msg
from disque_py.base.clock import FakeClock
from disque_py.node.node import Node
from disque_py.node.replication import FIRST_ADD_GONE, TIMEOUT_BEFORE_COPIES
from disque_py.node.waiters import Waiter
from disque_py.engine import (DEDUP_MEMORY_OVERHEAD, FLAG_PROMISED, HOT_COMMANDS, JobOptions,
                              deserialize_job, run_hot)
from disque_py.base.errors import LeavingError, MaxlenError, NoReplError, OutOfMemoryError
from tests.unit.simnet import START_MS, SimNet
from tests.engine.commands import ack_jobs, get_jobs, nack_jobs

NODE_ID = b"0123456789abcdef0123456789abcdef01234567"
PEER = b"f" * 40
NOW_S = START_MS // 1000
ENTRY_MEMORY = DEDUP_MEMORY_OVERHEAD


@pytest.fixture
def core() -> Node:
    return Node(NODE_ID, FakeClock(START_MS, seed=1), id_seed=b"dedup")


def add(core, key=b"k", *, queue=b"q", body=b"body", ttl=3600, window_s=0, client=None):
    until = START_MS + window_s * 1000 if window_s else 0
    return core.add_job(queue, body, 1, 0, 60, ttl, 0, False, client=client, dedup_key=key,
                        dedup_until_ms=until)


def addjob(core, *args) -> bytes:
    """ADDJOB through the hot command's parser, as a client sends it."""
    return run_hot(HOT_COMMANDS["addjob"], core, None, [b"ADDJOB", *args])


def test_a_duplicate_answers_the_first_id_and_makes_no_job(core):
    first = add(core)
    assert add(core, body=b"other") == first.id
    assert len(core.jobs) == 1 and core.stats_jobs_created == 1
    assert core.dedup.hits == 1


def test_a_duplicate_or_a_refused_addjob_copies_no_body(core):
    """With a key the job is built before the lookup, but its body is
    copied only once the checks passed: a retry or a refusal of a 4 MB job
    allocates what one of a small job does (tracemalloc traces PyMem)."""
    big = b"x" * (4 << 20)
    first = add(core, body=b"small")
    tracemalloc.start()
    try:
        assert addjob(core, b"q", big, b"0", b"DEDUP", b"k") == b"+" + first.id + b"\r\n"
        with pytest.raises(MaxlenError):
            addjob(core, b"q", big, b"0", b"MAXLEN", b"1", b"DEDUP", b"new")
        with pytest.raises(MaxlenError):
            addjob(core, b"q", big, b"0", b"MAXLEN", b"1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10
    assert len(core.jobs) == 1 and len(core.dedup) == 1


def test_the_key_is_per_queue(core):
    first = add(core, queue=b"q1")
    second = add(core, queue=b"q2")
    assert second.id != first.id and len(core.jobs) == 2


def test_the_window_defaults_to_the_ttl_and_then_the_key_is_free(core):
    first = add(core, ttl=100)
    core.clock.advance(99_999)
    assert add(core, ttl=100) == first.id
    core.clock.advance(1)
    later = add(core, ttl=100)
    assert later.id != first.id


def test_a_window_ends_the_key_before_the_ttl_and_the_timer_frees_it(core):
    first = add(core, window_s=10)
    assert core.dedup.memory == ENTRY_MEMORY + len(b"k")
    before = core.used_memory
    core.clock.advance(10_000)
    assert core.next_wakeup() <= core.clock.now_ms()
    core.tick()
    assert len(core.dedup) == 0 and core.dedup.memory == 0
    assert core.used_memory == before - ENTRY_MEMORY - len(b"k")
    assert add(core).id != first.id


def test_a_key_whose_window_ended_before_the_timer_ran_names_the_new_job(core):
    add(core, window_s=1)
    core.clock.advance(1000)                 # ended; no tick yet
    second = add(core, window_s=60)
    assert core.dedup.lookup(b"q", b"k", core.clock.now_ms()) == second.id
    assert add(core) == second.id
    core.tick()
    assert add(core) == second.id and len(core.dedup) == 1


def test_the_key_outlives_its_acknowledged_job(core):
    first = add(core)
    get_jobs(core, [b"q"], 1)
    assert ack_jobs(core, [first.id]) == 1
    assert core.lookup(first.id) is None
    assert add(core) == first.id and len(core.jobs) == 0


def test_a_full_table_refuses_new_keys_with_oom_but_answers_known_ones(core):
    core.dedup.max_keys = 2
    first = add(core, b"a")
    add(core, b"b")
    with pytest.raises(OutOfMemoryError, match=r"dedup-max-keys 2"):
        add(core, b"c")
    assert add(core, b"a") == first.id
    assert core.dedup.refused == 1 and len(core.jobs) == 2
    assert add(core, None).id           # a job without a key is not refused


def test_a_job_keeps_its_key_after_the_table_forgot_it(core):
    job = add(core, window_s=10)
    core.clock.advance(10_000)
    core.tick()
    assert len(core.dedup) == 0 and core.dedup.memory == 0
    assert job.dedup == (b"q", b"k", START_MS + 10_000)          # it still travels
    assert deserialize_job(core.job_bytes(job)).options[7:] == (b"k", START_MS + 10_000, None)
    core.delete_jobs([job.id])
    assert core.lookup(job.id) is None


def test_a_key_outlives_its_deleted_job_until_its_window_ends(core):
    job = add(core)
    job_id = job.id
    core.delete_jobs([job_id])
    del job
    assert core.dedup.lookup(b"q", b"k", START_MS) == job_id
    assert core.dedup.items() == [(b"q", b"k", job_id, START_MS + 3600_000)]


def test_flushall_forgets_every_key(core):
    first = add(core)
    core.flush_all()
    assert len(core.dedup) == 0 and add(core).id != first.id


def test_the_hot_parser_checks_dedup_and_window_and_answers_the_first_id(core):
    reply = addjob(core, b"q", b"body", b"0", b"DEDUP", b"k", b"WINDOW", b"60")
    assert reply.startswith(b"+D-")
    assert addjob(core, b"q", b"again", b"0", b"dedup", b"k") == reply
    job = core.lookup(reply[1:-2])
    assert job.options is None                  # a DEDUP key alone makes no JobOptions
    assert job.dedup == (b"q", b"k", START_MS + 60_000)
    for args, error in (((b"WINDOW", b"5"), "WINDOW needs DEDUP"),
                        ((b"DEDUP", b""), "DEDUP key must be 1 to 1024 bytes"),
                        ((b"DEDUP", b"x" * 1025), "DEDUP key must be 1 to 1024 bytes"),
                        ((b"DEDUP", b"k", b"WINDOW", b"0"), "WINDOW must be a number > 0"),
                        ((b"DEDUP", b"k", b"WINDOW", b"x"), "WINDOW must be a number > 0")):
        with pytest.raises(Exception, match=error):
            addjob(core, b"q", b"body", b"0", *args)


def test_the_key_travels_in_the_v3_block_and_not_to_a_v2_reader(core):
    job = add(core, window_s=30)
    assert deserialize_job(core.job_bytes(job)).options[7:] == (b"k", START_MS + 30_000, None)
    core.options_readers = {PEER: 2}
    assert deserialize_job(core.job_bytes(job, NOW_S, PEER)).options is None
    with_priority = core.add_job(b"q", b"b", 1, 0, 60, 3600, 0, False,
                                 options=JobOptions(priority=8), dedup_key=b"p")
    assert deserialize_job(core.job_bytes(with_priority, NOW_S, PEER)).options[6:] == \
        (8, None, 0, None)


# --------------------------------------------------------------- cluster

def test_every_holder_remembers_the_key_and_answers_the_first_id():
    """The producer saw the copies made: it answers at once. A holder knows
    only its copy: it answers once REPLICATE holders confirm theirs."""
    net = SimNet(3, seed=11)
    job = net.add_job(0, repl=3, client="p", dedup_key=b"k")
    assert net.run_until(lambda: "p" in net.unblocked, 1000)
    assert net.add_job(0, repl=3, dedup_key=b"k") == job.id
    for i in (1, 2):
        assert net.nodes[i].dedup.lookup(b"q", b"k", net.clock.now_ms()) == job.id
        waiter = net.add_job(i, repl=3, client=("retry", i), dedup_key=b"k")
        assert isinstance(waiter, Waiter)
        assert net.run_until(lambda: ("retry", i) in net.unblocked, 1000)
        assert net.unblocked[("retry", i)] == [job.id]
        promised = [m for m in net.sent if m.kind == msg.REPLJOB and m.src == i]
        assert promised and all(m.mflags & msg.MSG_PROMISED for m in promised)
        assert net.add_job(i, repl=3, dedup_key=b"k") == job.id   # confirmed
    assert sum(len(node.jobs) for node in net.nodes) == 3


def test_a_failed_addjob_frees_its_key_on_the_producer_and_the_holders():
    net = SimNet(3, seed=3)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.src == 2   # 2 keeps a copy, mute
    job = net.add_job(0, repl=3, client="p", timeout_ms=500, dedup_key=b"k")
    assert net.run_until(lambda: "p" in net.unblocked, 2000)
    assert str(net.unblocked["p"][0]) == TIMEOUT_BEFORE_COPIES
    deljobs = [m for m in net.sent if m.kind == msg.DELJOB]
    assert deljobs and all(m.mflags & msg.MSG_ABANDONED for m in deljobs)
    net.run_for(1000)
    now = net.clock.now_ms()
    assert all(node.dedup.lookup(b"q", b"k", now) is None for node in net.nodes)
    net.drop_rule = None
    retry = net.add_job(0, repl=3, client="p2", dedup_key=b"k")
    assert retry.id != job.id


def test_a_duplicate_during_the_copies_wait_gets_the_first_answer():
    net = SimNet(3, seed=5)
    net.latency_ms = 20
    job = net.add_job(0, repl=3, client="first", dedup_key=b"k")
    waiter = net.add_job(0, repl=3, client="retry", dedup_key=b"k")
    assert isinstance(waiter, Waiter)
    assert net.run_until(lambda: "retry" in net.unblocked, 1000)
    assert net.unblocked["first"] == [job.id] and net.unblocked["retry"] == [job.id]
    assert net.nodes[0].parking.blocked_clients == 0


def test_a_duplicate_shares_the_first_failure_and_times_out_alone():
    net = SimNet(3, seed=7)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB
    net.add_job(0, repl=3, client="first", timeout_ms=800, dedup_key=b"k")
    net.add_job(0, repl=3, client="short", timeout_ms=100, dedup_key=b"k")
    net.add_job(0, repl=3, client="long", timeout_ms=5000, dedup_key=b"k")
    assert net.run_until(lambda: "short" in net.unblocked, 1000)
    assert str(net.unblocked["short"][0]) == TIMEOUT_BEFORE_COPIES
    assert "first" not in net.unblocked            # the first still waits
    assert net.run_until(lambda: "long" in net.unblocked, 2000)
    assert isinstance(net.unblocked["long"][0], NoReplError)
    assert net.unblocked["long"] == net.unblocked["first"]
    assert net.nodes[0].parking.blocked_clients == 0


def test_a_duplicate_of_a_first_addjob_whose_client_left_gets_norepl():
    net = SimNet(3, seed=9)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB
    job = net.add_job(0, repl=3, client="first", dedup_key=b"k")
    net.add_job(0, repl=3, client="retry", dedup_key=b"k")
    net.call(0, "parking.cancel", net.nodes[0].more(job).waiter)
    assert str(net.unblocked["retry"][0]) == FIRST_ADD_GONE
    assert net.nodes[0].parking.blocked_clients == 0


def test_the_table_survives_many_keys_windows_out_of_order_and_discards(core):
    """The heap and the partitions under load: 5,000 keys with windows in a
    scrambled order, a third discarded, then expiry in window order."""
    table = core.dedup
    windows = [(index * 7919) % 5000 + 1 for index in range(5000)]
    jobs = {}
    for index, window_s in enumerate(windows):
        jobs[index] = add(core, b"k%d" % index, window_s=window_s)
    for index in range(0, 5000, 3):
        core.forget_dedup(jobs[index])
    assert len(table) == 5000 - 1667
    now = core.clock.now_ms()           # every pair is still found past the gaps left
    assert all(table.lookup(b"q", b"k%d" % index, now) == (None if index % 3 == 0 else job.id)
               for index, job in jobs.items())
    expected = sorted(window for index, window in enumerate(windows) if index % 3)
    for window_s in expected[::500]:
        core.clock.advance(START_MS + window_s * 1000 - core.clock.now_ms())
        core.tick()
        assert len(table) == len([w for w in expected if w > window_s])
    live = table.items()
    assert all(until > core.clock.now_ms() for _, _, _, until in live)
    assert table.memory == sum(ENTRY_MEMORY + len(key) for _, key, _, _ in live)


def test_a_retry_at_a_holder_during_the_first_wait_keeps_the_job_the_producer_gave_up():
    """The retry reached a holder while the first ADDJOB still waited at its
    producer: the holder asks the holders to confirm their copies (and to
    keep them), so when the producer's ADDJOB times out the job stays, and
    the retry gets its ID once REPLICATE copies are confirmed."""
    net = SimNet(3, seed=13)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.src == 2
    job = net.add_job(0, repl=3, client="first", timeout_ms=500,
                      dedup_key=b"k")
    assert net.run_until(lambda: net.nodes[1].lookup(job.id) is not None, 100)
    net.add_job(1, repl=3, client="retry", dedup_key=b"k")
    assert net.run_until(lambda: "first" in net.unblocked, 2000)
    assert isinstance(net.unblocked["first"][0], NoReplError)
    assert "retry" not in net.unblocked                   # node 2 still mute
    assert not [m for m in net.sent if m.kind == msg.DELJOB]   # promised: kept
    net.drop_rule = None
    assert net.run_until(lambda: "retry" in net.unblocked, 2000)
    assert net.unblocked["retry"] == [job.id]
    assert len(net.copies(job.id)) == 3
    now = net.clock.now_ms()
    assert all(node.dedup.lookup(b"q", b"k", now) == job.id for node in net.nodes)
    assert [taken.id for taken in net.get_jobs(0, b"q")] == [job.id]


def test_a_producer_that_starts_leaving_keeps_a_copy_it_promised():
    """The simulation's seed 95782: the first ADDJOB still waited at its
    producer when a retry at a holder asked for confirmations, and the
    producer confirmed its copy; then the producer started leaving. Its
    ADDJOB fails with -LEAVING, but the promised copy stays (as when it
    times out), so the retry's count of confirmed copies stays true."""
    net = SimNet(3, seed=13)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.src == 2
    job = net.add_job(0, repl=3, client="first", dedup_key=b"k")
    assert net.run_until(lambda: net.nodes[1].lookup(job.id) is not None, 100)
    net.add_job(1, repl=3, client="retry", timeout_ms=5000, dedup_key=b"k")
    assert net.run_until(
        lambda: net.nodes[0].lookup(job.id).flags & FLAG_PROMISED, 1000)
    net.set_leaving(0)
    assert net.run_until(lambda: "first" in net.unblocked, 100)
    assert isinstance(net.unblocked["first"][0], LeavingError)
    assert net.nodes[0].lookup(job.id) is not None     # promised: kept
    assert not [m for m in net.sent if m.kind == msg.DELJOB]
    net.drop_rule = None
    assert net.run_until(lambda: "retry" in net.unblocked, 2000)
    assert net.unblocked["retry"] == [job.id]
    assert len(net.copies(job.id)) == 3


def test_a_promised_copy_outlives_an_abandoned_deljob():
    """A promise round reached this holder before the producer gave up on
    an ADDJOB whose client left: the DELJOB flagged MSG_ABANDONED leaves
    the promised copy, which is queued."""
    net = SimNet(3, seed=17)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.dst == 0
    job = net.add_job(0, repl=3, client="first", dedup_key=b"k")
    assert net.run_until(lambda: all(node.lookup(job.id) for node in net.nodes[1:]), 100)
    net.add_job(1, repl=3, client="retry", timeout_ms=5000, dedup_key=b"k")
    assert net.run_until(lambda: "retry" in net.unblocked, 1000)
    net.nodes[0].lookup(job.id).flags &= ~FLAG_PROMISED   # as if it missed it
    net.call(0, "parking.cancel", net.nodes[0].more(job).waiter)
    deljobs = [m for m in net.sent if m.kind == msg.DELJOB]
    assert deljobs and all(m.mflags & msg.MSG_ABANDONED for m in deljobs)
    net.run_for(1000)
    assert net.unblocked["retry"] == [job.id]
    assert all(net.nodes[i].lookup(job.id) is not None for i in (1, 2))
    assert len(net.copies(job.id)) == 3               # and copied back to the producer


def test_a_promised_job_is_copied_back_to_the_nodes_that_refuse_copies_of_its_failed_addjob():
    """The producer and a holder the promise round missed delete the job
    when its ADDJOB fails, and then refuse copies still in flight (a heal
    that crossed the DELJOB would outlive the job); the holder that
    promised the job keeps it, and its copies, flagged MSG_KEPT, are taken."""
    net = SimNet(3, seed=17)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.dst == 0
    job = net.add_job(0, repl=3, client="first", dedup_key=b"k")
    assert net.run_until(lambda: all(node.lookup(job.id) for node in net.nodes[1:]), 100)
    net.add_job(1, repl=2, client="retry", timeout_ms=5000, dedup_key=b"k")
    assert net.run_until(lambda: "retry" in net.unblocked, 1000)
    assert net.unblocked["retry"] == [job.id]
    for i in (0, 2):
        net.nodes[i].lookup(job.id).flags &= ~FLAG_PROMISED   # as if the round missed it
    producer = net.nodes[0]
    stale = producer.job_bytes(producer.lookup(job.id), net.clock.now_ms() // 1000, net.ids[2])
    net.call(0, "parking.cancel", producer.more(job).waiter)
    assert producer.lookup(job.id) is None
    assert net.run_until(lambda: net.nodes[2].lookup(job.id) is None, 10)   # its DELJOB
    net.call(2, "healing.on_repljob", net.ids[0], 0, [stale])
    assert net.nodes[2].lookup(job.id) is None       # refused: its ADDJOB failed
    assert net.run_until(lambda: len(net.copies(job.id)) == 3, 1000)
    kept = [m for m in net.delivered if m.kind == msg.REPLJOB and m.src == 1]
    assert kept and all(m.mflags & msg.MSG_KEPT for m in kept)
    assert all(job.id in net.nodes[i].abandoned for i in (0, 2))


def test_holders_keeping_an_abandoned_job_list_only_nodes_with_a_copy():
    """The simulation's seed 4311: the producer gave up on a job whose ID
    was promised to a duplicate, and a REPLJOB it sent before (in flight
    since) names it among the holders. The holders keeping the job count
    the producer as a holder that lost its copy, the stale frame does not
    change that, and one of them sends it a copy: every node a holder
    lists has the job, so healing counts no copy that does not exist."""
    net = SimNet(4, seed=17, failure_detection=True)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.dst == 0
    job = net.add_job(0, repl=3, client="first", timeout_ms=5000, dedup_key=b"k")
    assert net.run_until(lambda: len(net.copies(job.id)) == 4, 1000)   # a retry added one
    net.add_job(1, repl=2, client="retry", timeout_ms=5000, dedup_key=b"k")
    assert net.run_until(lambda: "retry" in net.unblocked, 1000)
    assert net.unblocked["retry"] == [job.id]
    producer = net.nodes[0]
    stale = producer.job_bytes(producer.lookup(job.id), net.clock.now_ms() // 1000,
                               net.ids[1])
    producer.lookup(job.id).flags &= ~FLAG_PROMISED   # as if it missed it
    net.call(0, "parking.cancel", producer.more(job).waiter)
    assert producer.lookup(job.id) is None
    net.run_for(5)                                   # the DELJOBs arrive, not yet a heal
    for i in (1, 2, 3):
        net.call(i, "healing.on_repljob", net.ids[0], 0, [stale])
    assert net.run_until(lambda: producer.lookup(job.id) is not None, 1000)
    net.run_for(1000)
    for i in (1, 2, 3):
        assert all(net.nodes[net.index[node_id]].lookup(job.id) is not None
                   for node_id in net.nodes[i].lookup(job.id).delivered)


def test_two_jobs_of_one_pair_are_both_remembered_until_their_own_windows_end(core):
    first = add(core, window_s=10)
    later = core.add_job(b"q", b"b", 1, 0, 60, 3600, 0, False,
                         dedup_key=b"other")
    # A copy of another job with the same pair (a retry that reached a node
    # that knew neither, replicated here): remembered beside the first.
    record = deserialize_job(core.job_bytes(later))
    options = record.options[:7] + (b"k", START_MS + 60_000, None)
    copy = record._replace(id=later.id[:-4] + b"0e11", options=options)
    core.adopt_record(copy, core.clock.now_ms())
    assert len(core.dedup) == 3
    assert add(core) == copy.id                  # the one that ends last
    core.clock.advance(10_000)
    core.tick()
    assert add(core) == copy.id and first.id not in {e[2] for e in core.dedup.items()}


def test_a_moved_job_keeps_the_pair_of_its_addjob_queue(core):
    options = JobOptions(0, 0, 1, b"dlq")
    job = core.add_job(b"q", b"b", 1, 0, 60, 3600, 0, False, options=options, dedup_key=b"k")
    get_jobs(core, [b"q"], 1)
    nack_jobs(core, [job.id])                     # the one delivery allowed: dead-lettered
    assert job.queue == b"dlq" and job.dedup[0] == b"q"
    record = deserialize_job(core.job_bytes(job))
    other = Node(PEER, FakeClock(START_MS, seed=2), id_seed=b"other")
    other.load_job(record, False)
    assert other.dedup.lookup(b"q", b"k", START_MS) == job.id
    assert other.dedup.lookup(b"dlq", b"k", START_MS) is None
    assert add(core) == job.id


def test_an_expired_job_s_record_still_brings_back_its_open_window(core):
    job = add(core, ttl=10, window_s=3600)
    record = deserialize_job(core.job_bytes(job))
    later = Node(NODE_ID, FakeClock(START_MS + 20_000, seed=3), id_seed=b"later")
    assert later.load_job(record, False) is False             # the job expired
    assert later.dedup.lookup(b"q", b"k", START_MS + 20_000) == job.id


def test_an_ack_during_a_promise_round_answers_it_and_collects_with_its_own_gotacks():
    net = SimNet(3, seed=19)
    job = net.add_job(0, repl=3, client="first", dedup_key=b"k")
    assert net.run_until(lambda: "first" in net.unblocked, 1000)
    net.drop_rule = lambda m: m.kind == msg.GOTJOB and m.src == 2
    net.add_job(1, repl=3, client="retry", timeout_ms=60_000, dedup_key=b"k")
    net.run_for(200)
    assert "retry" not in net.unblocked               # node 2's confirmation is lost
    net.drop_rule = lambda m: m.kind == msg.GOTACK and m.src == 2
    net.call(1, ack_jobs, [job.id])
    assert net.unblocked["retry"] == [job.id]
    net.run_for(500)
    assert net.nodes[1].lookup(job.id) is not None    # node 2's GOTACK still missing
    net.drop_rule = None
    assert net.run_until(lambda: not net.copies(job.id), 30_000)
