"""BusOutbox (engine/net/frames.pxi) held to the reference codec
(formats/bus.py), with no socket and no sleep.

Items go in the way the node's paths send them (NodeCore.send, that is
outbox.pxi's send_to_peer, with the node's bus_out set). Whatever the
sequence of peers, kinds, items and message flags, the bytes take()
returns for a peer decode, frame by frame, to exactly the items sent to
it, in order; consecutive items of one kind and flags share a frame (a
queue op never shares one, and no frame spans two takes), and the bytes
are those formats/bus.encode gives for that grouping, under the header
set_sender gave. Confirmations (GOTJOB, GOTACK, DELJOB) wait for the AOF
batch noted when they were sent: none leaves before take() is told that
batch is released, and whatever was sent to that peer after them waits
behind them; drop_held forgets them.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_py.base.clock import FakeClock
from disque_py.base.scantable import ScanTable
from disque_py.engine import BusOutbox, NodeCore
from disque_py.formats import bus as msg

NODE_ID = b"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
PEERS = (b"1" * 40, b"2" * 40, b"3" * 40)
JOB_ID = b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1"
HEX = "0123456789abcdef"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

JOBS_KINDS = (msg.REPLJOB, msg.YOURJOBS)
QUEUE_KINDS = (msg.NEEDJOBS, msg.PAUSE)
JOB_ID_KINDS = (msg.GOTJOB, msg.ENQUEUE, msg.QUEUED, msg.WORKING, msg.SETACK, msg.WILLQUEUE,
                msg.GOTACK, msg.DELJOB)
CONFIRMATIONS = (msg.GOTJOB, msg.GOTACK, msg.DELJOB)
TAKE = "take"

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def new_core(port: int = 7711, flags: int = 0) -> NodeCore:
    """A node alone with an outbox, as a server has (no AOF unless a test
    turns it on)."""
    core = NodeCore()
    core.init_core(NODE_ID, FakeClock(seed=3), b"bus outbox tests", ScanTable(16))
    core.bus_out = BusOutbox()
    core.bus_out.set_sender(NODE_ID, port, flags)
    return core


# ------------------------------------------------------------------ strategies

u32 = st.integers(0, 0xFFFF_FFFF)
job_ids = st.builds(lambda a, b, c: f"D-{a}-{b}-{c}".encode(),
                    st.text(HEX + "ABCDEF", min_size=8, max_size=8),
                    st.text(B64, min_size=24, max_size=24),
                    st.text(HEX + "ABCDEF", min_size=4, max_size=4))
mflags = st.sampled_from((0, msg.MSG_NOREPLY, msg.MSG_RESENT, msg.MSG_PROMISED))


def item_of(kind: int):
    if kind in JOBS_KINDS:
        return st.binary(max_size=200)
    if kind in QUEUE_KINDS:
        return st.builds(msg.QueueOp, st.binary(max_size=60), u32)
    return st.tuples(job_ids, u32)


@st.composite
def sends(draw, kinds=JOBS_KINDS + QUEUE_KINDS + JOB_ID_KINDS):
    """(peer, kind, item, mflags). Few kinds and flags, so that runs form."""
    kind = draw(st.sampled_from(kinds))
    return draw(st.sampled_from(PEERS)), kind, draw(item_of(kind)), draw(mflags)


steps = st.lists(st.one_of(sends(), sends(), sends(), st.just(TAKE)), max_size=40)


# ------------------------------------------------------------------ the reference

def body_of(kind: int, items: list):
    if kind in JOBS_KINDS:
        return msg.Jobs(list(items))
    if kind in QUEUE_KINDS:
        (item,) = items
        return item
    return msg.JobIds(list(items))


class Reference:
    """What each peer should get from the next take: formats/bus.encode
    of its items, consecutive ones of one kind and flags in one frame."""

    def __init__(self, port: int, flags: int) -> None:
        self.port, self.flags = port, flags
        self.runs: dict[bytes, list] = {}

    def add(self, peer: bytes, kind: int, item, flags: int) -> None:
        runs = self.runs.setdefault(peer, [])
        if runs and runs[-1][:2] == [kind, flags] and kind not in QUEUE_KINDS:
            runs[-1][2].append(item)
        else:
            runs.append([kind, flags, [item]])

    def take(self) -> dict[bytes, tuple[bytes, int]]:
        expected = {
            peer: (b"".join(msg.encode(msg.Header(kind, NODE_ID, self.port, self.flags, flags),
                                       body_of(kind, items)) for kind, flags, items in runs),
                   len(runs))
            for peer, runs in self.runs.items()}
        self.runs = {}
        return expected


def taken(outbox: BusOutbox, released: int = 0) -> dict[bytes, tuple[bytes, int]]:
    out = outbox.take(released)
    peers = [peer for peer, _, _ in out]
    assert len(peers) == len(set(peers)), f"a peer twice in one take: {peers}"
    return {peer: (data, frames) for peer, data, frames in out}


def split_frames(data: bytes) -> list[bytes]:
    payloads, pos = [], 0
    while pos < len(data):
        length = msg.frame_length(data[pos:pos + msg.LENGTH.size])
        payloads.append(data[pos + msg.LENGTH.size:pos + msg.LENGTH.size + length])
        pos += msg.LENGTH.size + length
    assert pos == len(data), "the bytes end inside a frame"
    return payloads


def decoded_items(data: bytes) -> list[tuple]:
    """(kind, mflags, item) for every item of every frame in data."""
    items = []
    for payload in split_frames(data):
        header, body = msg.decode(payload)
        if isinstance(body, msg.Jobs):
            items += [(header.type, header.mflags, job) for job in body.jobs]
        elif isinstance(body, msg.JobIds):
            items += [(header.type, header.mflags, item) for item in body.items]
        else:
            items.append((header.type, header.mflags, body))
    return items


# ------------------------------------------------------------------ encoding

@FUZZ
@given(plan=steps, port=st.integers(0, 0xFFFF), flags=st.integers(0, 0xFFFF))
def test_each_peers_frames_are_the_reference_codecs_for_the_items_sent(plan, port, flags):
    core = new_core(port, flags)
    reference = Reference(port, flags)
    sent: dict[bytes, list] = {}
    for step in plan + [TAKE]:
        if step == TAKE:
            expected = reference.take()
            got = taken(core.bus_out)
            assert got == expected
            for peer, (data, frames) in got.items():
                assert len(split_frames(data)) == frames
                assert decoded_items(data) == sent.pop(peer)
            assert not sent and not core.bus_out.pending
            continue
        peer, kind, item, item_flags = step
        core.send(peer, kind, item, item_flags)
        reference.add(peer, kind, item, item_flags)
        sent.setdefault(peer, []).append((kind, item_flags, item))


def test_a_frame_past_16_mb_takes_no_more_items():
    core = new_core()
    jobs = [bytes([i]) * (6 * 1024 * 1024) for i in range(4)]
    for job in jobs:
        core.send(PEERS[0], msg.REPLJOB, job, 0)
    (data, frames), = taken(core.bus_out).values()
    assert frames == 2
    assert [msg.decode(payload)[1].jobs for payload in split_frames(data)] == [jobs[:3], jobs[3:]]


def test_a_peer_whose_large_frame_left_gets_whole_frames_after_it():
    """The buffer a large job grew is freed once taken (frames.pxi keeps
    only small ones between turns); the next frames are made in a new one."""
    core = new_core()
    large = b"x" * (3 * 1024 * 1024)
    core.send(PEERS[0], msg.REPLJOB, large, 0)
    (data, frames), = taken(core.bus_out).values()
    assert frames == 1 and decoded_items(data) == [(msg.REPLJOB, 0, large)]
    for round_ in range(3):
        core.send(PEERS[0], msg.GOTACK, (JOB_ID, round_), 0)
        (data, frames), = taken(core.bus_out).values()
        assert frames == 1 and decoded_items(data) == [(msg.GOTACK, 0, (JOB_ID, round_))]


def test_a_new_sender_header_applies_to_the_frames_made_after_it():
    core = new_core(7711, 0)
    core.send(PEERS[0], msg.SETACK, (JOB_ID, 2), 0)
    assert taken(core.bus_out)
    core.bus_out.set_sender(NODE_ID, 7712, 4)
    core.send(PEERS[0], msg.SETACK, (JOB_ID, 2), 0)
    (data, _), = taken(core.bus_out).values()
    header, _ = msg.decode(split_frames(data)[0])
    assert (header.sender, header.port, header.flags) == (NODE_ID, 7712, 4)


def test_on_frames_is_called_once_per_turn_at_its_first_item():
    core = new_core()
    calls = []
    core.bus_out.on_frames = lambda: calls.append(True)
    for peer in PEERS:
        core.send(peer, msg.QUEUED, (JOB_ID, 0), 0)
    assert len(calls) == 1
    taken(core.bus_out)
    core.send(PEERS[0], msg.QUEUED, (JOB_ID, 0), 0)
    assert len(calls) == 2


def test_a_forgotten_peer_gets_nothing_of_what_was_sent_before():
    core = new_core()
    core.send(PEERS[0], msg.DELJOB, (JOB_ID, 0), 0)
    core.send(PEERS[1], msg.DELJOB, (JOB_ID, 0), 0)
    core.bus_out.forget(PEERS[0])
    assert set(taken(core.bus_out)) == {PEERS[1]}
    core.send(PEERS[0], msg.WORKING, (JOB_ID, 0), 0)
    core.bus_out.forget(PEERS[1])
    core.send(PEERS[0], msg.WORKING, (JOB_ID, 0), 0)
    (data, frames), = taken(core.bus_out).values()
    assert frames == 1 and decoded_items(data) == [(msg.WORKING, 0, (JOB_ID, 0))] * 2


@pytest.mark.parametrize("kind, item, error", [
    (msg.NEEDJOBS, msg.QueueOp(b"q", -1), OverflowError),
    (msg.PAUSE, msg.QueueOp(b"q", 1 << 32), OverflowError),
    (msg.GOTACK, (JOB_ID[:39], 0), ValueError),
    (msg.REPLJOB, "not bytes", TypeError)])
def test_an_item_refused_by_the_encoder_leaves_no_frame_behind(kind, item, error):
    core = new_core()
    with pytest.raises(error):
        core.send(PEERS[0], kind, item, 0)
    core.send(PEERS[0], msg.QUEUED, (JOB_ID, 1), 0)
    (data, frames), = taken(core.bus_out).values()
    assert frames == 1 and decoded_items(data) == [(msg.QUEUED, 0, (JOB_ID, 1))]


# ------------------------------------------------------------------ held confirmations

def with_aof(core: NodeCore) -> NodeCore:
    core.aof_enabled = True
    return core


def send_waiting_for(core: NodeCore, gen: int, peer: bytes, kind: int, item, flags: int = 0):
    """Send as a path does while AOF batch `gen` holds this turn's records
    (0: everything written is released): AofLog.reply_gen() says gen."""
    log = core.aof
    log.written_gen = gen
    log.released_gen = gen - 1 if gen else 0
    assert log.reply_gen() == gen
    core.send(peer, kind, item, flags)


held_plan = st.lists(st.one_of(
    st.tuples(sends(), st.integers(0, 4)),
    st.tuples(sends(CONFIRMATIONS), st.integers(0, 4)),
    st.tuples(st.just(TAKE), st.integers(0, 5))), max_size=40)


@FUZZ
@given(plan=held_plan)
def test_confirmations_leave_only_once_their_batch_is_released_and_keep_their_order(plan):
    """pending[peer]: what was sent and has not left, as (gen, whether it
    waits behind a confirmation, (kind, mflags, item))."""
    core = with_aof(new_core())
    pending: dict[bytes, list] = {peer: [] for peer in PEERS}
    for step, number in plan + [(TAKE, 5)]:
        if step == TAKE:
            got = taken(core.bus_out, released=number)
            for peer, queue in pending.items():
                left = decoded_items(got[peer][0]) if peer in got else []
                assert left == [entry[2] for entry in queue[:len(left)]], "out of order"
                assert all(gen <= number for gen, _, _ in queue[:len(left)]), \
                    "a confirmation left before its batch was released"
                assert len(left) >= sum(1 for _, behind, _ in queue if not behind), \
                    "an item waiting for nothing did not leave"
                if all(gen <= number for gen, _, _ in queue):
                    assert len(left) == len(queue), "released items stayed"
                del queue[:len(left)]
            assert core.bus_out.pending == any(pending.values())
            continue
        peer, kind, item, flags = step
        gen = number if kind in CONFIRMATIONS else 0
        send_waiting_for(core, gen, peer, kind, item, flags)
        queue = pending[peer]
        behind = bool(gen) or any(waiting for _, waiting, _ in queue)
        queue.append((gen, behind, (kind, flags, item)))
    assert not any(pending.values())


def test_a_confirmation_waits_for_its_batch_and_what_follows_it_waits_behind_it():
    core = with_aof(new_core())
    peer = PEERS[0]
    send_waiting_for(core, 0, peer, msg.REPLJOB, b"first")
    send_waiting_for(core, 2, peer, msg.GOTJOB, (JOB_ID, 0))
    send_waiting_for(core, 0, peer, msg.SETACK, (JOB_ID, 3))
    (data, _), = taken(core.bus_out, released=1).values()
    assert decoded_items(data) == [(msg.REPLJOB, 0, b"first")]
    assert core.bus_out.pending
    assert taken(core.bus_out, released=1) == {}
    (data, frames), = taken(core.bus_out, released=2).values()
    assert frames == 2
    assert decoded_items(data) == [(msg.GOTJOB, 0, (JOB_ID, 0)), (msg.SETACK, 0, (JOB_ID, 3))]
    assert not core.bus_out.pending


def test_confirmations_of_one_peer_do_not_hold_another_peers_frames():
    core = with_aof(new_core())
    send_waiting_for(core, 3, PEERS[0], msg.GOTACK, (JOB_ID, 1))
    send_waiting_for(core, 0, PEERS[1], msg.QUEUED, (JOB_ID, 0))
    assert set(taken(core.bus_out, released=0)) == {PEERS[1]}
    assert set(taken(core.bus_out, released=3)) == {PEERS[0]}


def test_drop_held_forgets_the_confirmations_of_the_failed_batches_only():
    core = with_aof(new_core())
    send_waiting_for(core, 2, PEERS[0], msg.GOTJOB, (JOB_ID, 0))
    send_waiting_for(core, 0, PEERS[0], msg.REPLJOB, b"behind it")
    send_waiting_for(core, 5, PEERS[1], msg.DELJOB, (JOB_ID, 0))
    assert taken(core.bus_out, released=1) == {}
    core.bus_out.drop_held(2, 4)
    got = taken(core.bus_out, released=5)
    assert set(got) == {PEERS[1]}
    assert decoded_items(got[PEERS[1]][0]) == [(msg.DELJOB, 0, (JOB_ID, 0))]
    assert not core.bus_out.pending
    send_waiting_for(core, 0, PEERS[0], msg.GOTJOB, (JOB_ID, 0))   # the peer asks again
    assert decoded_items(taken(core.bus_out)[PEERS[0]][0]) == [(msg.GOTJOB, 0, (JOB_ID, 0))]


def test_no_confirmation_is_sent_while_the_aof_refuses_records():
    core = with_aof(new_core())
    core.aof.refusing = True
    for kind in CONFIRMATIONS:
        core.send(PEERS[0], kind, (JOB_ID, 0), 0)
    core.send(PEERS[0], msg.SETACK, (JOB_ID, 2), 0)
    (data, _), = taken(core.bus_out).values()
    assert decoded_items(data) == [(msg.SETACK, 0, (JOB_ID, 2))]
