"""The bus's fast path (engine/net/link.pxi): REPLJOB and GOTJOB frames
taken in C by a link whose `core` is a real Node, on a fake clock, with no
socket and no sleep.

Two nodes, a producer and a holder, each with a BusOutbox as in a server:
the producer's REPLJOB, fed to the holder's link, makes the copy and puts
the GOTJOB in the holder's outbox; that GOTJOB, fed to the producer's
link, completes its count and answers the parked ADDJOB. The copy is the
one the Python path (on_peer_message) makes. fast_frames_done is called
once per read that took frames, with the sender, their number and bytes.

Every frame the fast path must not take reaches on_frame byte for byte
and changes nothing: from an unknown node, from the receiver's own ID,
from another node than the one the link authenticated as, a REPLJOB or
GOTJOB of a bad shape (whatever formats/bus.decode refuses: the fast path
takes exactly the well-formed ones), a REPLJOB while healing watches the
copies, any other message, any frame while the path is shut.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from disque_py.base.clock import FakeClock
from disque_py.base.effects import Unblock
from disque_py.engine import ACTIVE, QUEUED, WAIT_REPL, BusOutbox, serialize_job
from disque_py.formats import bus as msg
from disque_py.node.node import Node
from tests.engine.links import RecordingLink

HOLDER = b"9bfa56e329abf3577408e45419d642cac8154459"
PRODUCER = b"0123456789abcdef0123456789abcdef01234567"
THIRD = b"fedcba9876543210fedcba9876543210fedcba98"       # known to both
STRANGER = b"5" * 40                                         # known to neither
NODES = (HOLDER, PRODUCER, THIRD)
PORT = 7711
START_MS = 1_700_000_000_000
CLIENT = "the producer's client"

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ the two nodes

def node_in_cluster(node_id: bytes, clock: FakeClock) -> Node:
    """A node that knows the two others and has an outbox, as in a server."""
    node = Node(node_id, clock, id_seed=b"fast path " + node_id[:8])
    peers = [peer for peer in NODES if peer != node_id]
    node.set_cluster_view(len(NODES), set(peers), len(peers), peers, False)
    node.bus_out = BusOutbox()
    node.bus_out.set_sender(node_id, PORT, 0)
    return node


class Pair:
    """A producer whose ADDJOB REPLICATE 2 (client parked) chose the holder,
    its REPLJOB frame to the holder, and a link into each node."""

    def __init__(self) -> None:
        self.clock = FakeClock(START_MS, seed=7)
        self.producer = node_in_cluster(PRODUCER, self.clock)
        self.holder = node_in_cluster(HOLDER, self.clock)
        self.job = self.add_job()
        self.repljob = frames_for(self.producer, HOLDER)[0]
        self.into_holder = RecordingLink(core=self.holder, fast=True)
        self.into_producer = RecordingLink(core=self.producer, fast=True)

    def add_job(self, body: bytes = b"body"):
        """A job the producer replicates to the holder alone (THIRD's link
        is down as far as the producer knows), its client parked."""
        self.producer.set_cluster_view(3, {HOLDER, THIRD}, 2, [HOLDER], False)
        job = self.producer.add_job(b"q", body, 2, 0, None, 3600, 0, False,
                                    client=(CLIENT, body))
        assert job.state == WAIT_REPL
        return job

    def gotjob(self, sender: bytes = HOLDER, job_id: bytes | None = None) -> bytes:
        return frame(msg.GOTJOB, sender, msg.JobIds([(job_id or self.job.id, 0)]))

    def job_bytes(self) -> bytes:
        return msg.decode(payload(self.repljob))[1].jobs[0]

    def another_job(self, body: bytes) -> tuple:
        """Another job the producer replicates to the holder, and its bytes."""
        job = self.add_job(body)
        return job, msg.decode(payload(frames_for(self.producer, HOLDER)[0]))[1].jobs[0]

    def another_copy(self, body: bytes):
        """The holder's copy of another job (taken on a link of its own;
        its GOTJOB leaves)."""
        job, data = self.another_job(body)
        RecordingLink(core=self.holder, fast=True).data_received(
            frame(msg.REPLJOB, PRODUCER, msg.Jobs([data])))
        frames_for(self.holder, PRODUCER)
        copy = self.holder.lookup(job.id)
        assert copy is not None
        return copy


@pytest.fixture
def pair() -> Pair:
    return Pair()


def frame(kind: int, sender: bytes, body, mflags: int = 0) -> bytes:
    return msg.encode(msg.Header(kind, sender, PORT, 0, mflags), body)


def frames_for(node: Node, peer: bytes) -> list[bytes]:
    """The frames node's outbox has for `peer` this turn, one by one."""
    out = {node_id: data for node_id, data, _ in node.bus_out.take(0)}
    data, frames = out.get(peer, b""), []
    while data:
        end = msg.LENGTH.size + msg.frame_length(data[:msg.LENGTH.size])
        frames.append(data[:end])
        data = data[end:]
    return frames


def payload(whole_frame: bytes) -> bytes:
    return whole_frame[msg.LENGTH.size:]


def reframed(body_payload: bytes) -> bytes:
    return msg.LENGTH.pack(len(body_payload)) + body_payload


# ------------------------------------------------------------------ what it takes

def test_a_repljob_from_a_known_peer_makes_the_copy_and_queues_its_gotjob(pair):
    pair.into_holder.data_received(pair.repljob)
    copy = pair.holder.lookup(pair.job.id)
    assert copy is not None and copy.state == ACTIVE
    assert set(copy.delivered) == {PRODUCER, HOLDER}
    assert pair.into_holder.frames == []
    assert pair.into_holder.fast_reads == [(PRODUCER, 1, len(pair.repljob))]
    (gotjob,) = frames_for(pair.holder, PRODUCER)
    header, body = msg.decode(payload(gotjob))
    assert (header.type, header.sender, header.port) == (msg.GOTJOB, HOLDER, PORT)
    assert body.items == [(pair.job.id, 0)]


def test_the_holders_gotjob_completes_the_count_and_answers_the_parked_addjob(pair):
    pair.into_holder.data_received(pair.repljob)
    (gotjob,) = frames_for(pair.holder, PRODUCER)
    pair.into_producer.data_received(gotjob)
    assert pair.into_producer.frames == []
    assert pair.into_producer.fast_reads == [(HOLDER, 1, len(gotjob))]
    assert pair.job.state == QUEUED
    answers = [effect for effect in pair.producer.take_effects() if type(effect) is Unblock]
    assert [answer.outcome for answer in answers] == [pair.job.id]


def test_the_copy_the_fast_path_makes_is_the_one_the_python_path_makes(pair):
    twin = node_in_cluster(HOLDER, pair.clock)
    header, body = msg.decode(payload(pair.repljob))
    twin.on_peer_message(header.sender, header.type, header.mflags, body)
    pair.into_holder.data_received(pair.repljob)
    now_s = pair.clock.now_ms() // 1000
    assert serialize_job(pair.holder.lookup(pair.job.id), now_s) == \
        serialize_job(twin.lookup(pair.job.id), now_s)
    assert frames_for(pair.holder, PRODUCER) == frames_for(twin, PRODUCER)


def test_fast_frames_done_is_called_once_per_read_with_its_frames_and_bytes(pair):
    jobs = [pair.job_bytes()] + [pair.another_job(body)[1] for body in (b"two", b"three")]
    repljobs = [frame(msg.REPLJOB, PRODUCER, msg.Jobs([job])) for job in jobs]
    ping = frame(msg.PING, PRODUCER, msg.Heartbeat([]))
    link = pair.into_holder
    link.data_received(repljobs[0] + ping + repljobs[1] + repljobs[2][:30])
    assert link.fast_reads == [(PRODUCER, 2, len(repljobs[0]) + len(repljobs[1]))]
    link.data_received(repljobs[2][30:40])                  # no frame ends here
    assert len(link.fast_reads) == 1
    link.data_received(repljobs[2][40:])
    assert link.fast_reads[1:] == [(PRODUCER, 1, len(repljobs[2]))]
    assert link.frames == [payload(ping)]
    assert len(frames_for(pair.holder, PRODUCER)) == 1     # one GOTJOB frame, three items


@FUZZ
@given(pings_after=st.lists(st.booleans(), min_size=1, max_size=6), data=st.data())
def test_whatever_the_read_boundaries_each_copy_is_made_once_and_each_read_reported_once(
        pings_after, data):
    pair = Pair()
    jobs = [pair.job] + [pair.another_job(b"job %d" % i)[0] for i in range(1, len(pings_after))]
    repljob_of = {job.id: frame(msg.REPLJOB, PRODUCER, msg.Jobs([serialize_job(
        job, pair.clock.now_ms() // 1000)])) for job in jobs}
    ping = frame(msg.PING, PRODUCER, msg.Heartbeat([]))
    stream = []
    for job, then_ping in zip(jobs, pings_after):
        stream += [repljob_of[job.id]] + ([ping] if then_ping else [])
    wire = b"".join(stream)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(wire) - 1), max_size=20))))
    link, start, expected_reads = pair.into_holder, 0, []
    for end in cuts + [len(wire)]:
        link.data_received(wire[start:end])
        done = [f for f in frames_ending_in(stream, start, end) if f is not ping]
        if done:
            expected_reads.append((PRODUCER, len(done), sum(map(len, done))))
        start = end
    assert link.fast_reads == expected_reads
    assert link.frames == [payload(ping)] * sum(pings_after)
    assert all(pair.holder.lookup(job.id).state == ACTIVE for job in jobs)
    confirmed = [item for gotjob in frames_for(pair.holder, PRODUCER)
                 for item in msg.decode(payload(gotjob))[1].items]
    assert confirmed == [(job.id, 0) for job in jobs]


def frames_ending_in(stream: list[bytes], start: int, end: int) -> list[bytes]:
    """The frames of the stream whose last byte is in [start, end)."""
    found, offset = [], 0
    for each in stream:
        offset += len(each)
        if start < offset <= end:
            found.append(each)
    return found


def test_a_link_bound_to_its_peer_takes_that_peers_frames(pair):
    pair.into_holder.peer_id = PRODUCER
    pair.into_holder.data_received(pair.repljob)
    assert pair.holder.lookup(pair.job.id) is not None and pair.into_holder.frames == []


def test_a_promised_copy_is_taken_while_healing_watches_the_copies(pair):
    mark_a_job_for_healing(pair)
    promised = frame(msg.REPLJOB, PRODUCER, msg.Jobs([pair.job_bytes()]), msg.MSG_PROMISED)
    pair.into_holder.data_received(promised)
    assert pair.into_holder.frames == [] and pair.into_holder.fast_reads


def mark_a_job_for_healing(pair: Pair) -> None:
    """Healing's marks are not empty: a copy the holder has lost a holder
    (node/healing.py keeps its marks in the dict the core reads)."""
    pair.holder.heal_marks[pair.another_copy(b"marked")] = (THIRD,)


# ------------------------------------------------------------------ what it leaves to Python

def refused_repljobs(pair: Pair) -> dict[str, bytes]:
    """REPLJOB frames for the holder that the fast path must not take."""
    good = payload(pair.repljob)
    job = pair.job_bytes()
    body = good[msg.HEADER.size:]
    return {
        "from an unknown node": payload(frame(msg.REPLJOB, STRANGER, msg.Jobs([job]))),
        "from the holder's own ID": payload(frame(msg.REPLJOB, HOLDER, msg.Jobs([job]))),
        "truncated": good[:-1],
        "cut inside its count": good[:msg.HEADER.size + 2],
        "with trailing bytes": good + b"\x00",
        "counting one job more": good[:msg.HEADER.size] + msg.U32.pack(2) + body[4:],
        "counting one job less": good[:msg.HEADER.size] + msg.U32.pack(0) + body[4:],
        "with a job longer than the frame": good[:msg.HEADER.size] + body[:4] +
        msg.U32.pack(len(job) + 1) + job,
        "with a bad signature": b"DqP2" + good[4:],
    }


def refused_gotjobs(pair: Pair) -> dict[str, bytes]:
    """GOTJOB frames for the producer that the fast path must not take."""
    good = payload(pair.gotjob())
    bad_id = pair.job.id[:2] + b"!" + pair.job.id[3:]
    return {
        "from an unknown node": payload(pair.gotjob(sender=STRANGER)),
        "from the producer's own ID": payload(pair.gotjob(sender=PRODUCER)),
        "truncated": good[:-1],
        "with trailing bytes": good + b"\x00",
        "with a bad job ID": payload(pair.gotjob(job_id=bad_id)),
        "with a short count": good[:msg.HEADER.size] + msg.U32.pack(0) + good[msg.HEADER.size + 4:],
        "with a long count": good[:msg.HEADER.size] + msg.U32.pack(2) + good[msg.HEADER.size + 4:],
    }


REPLJOB_CASES = list(refused_repljobs(Pair()))
GOTJOB_CASES = list(refused_gotjobs(Pair()))


def assert_left_to_python(link: RecordingLink, sent: list[bytes]) -> None:
    assert link.frames == sent
    assert all(type(each) is bytes for each in link.frames)
    assert link.fast_reads == []


def assert_holder_unchanged(pair: Pair) -> None:
    assert pair.holder.lookup(pair.job.id) is None
    assert not pair.holder.bus_out.pending


def assert_producer_unchanged(pair: Pair) -> None:
    assert pair.job.state == WAIT_REPL
    assert not [effect for effect in pair.producer.take_effects() if type(effect) is Unblock]


@pytest.mark.parametrize("case", REPLJOB_CASES)
def test_a_repljob_the_fast_path_refuses_reaches_on_frame_unchanged(pair, case):
    sent = refused_repljobs(pair)[case]
    pair.into_holder.data_received(reframed(sent))
    assert_left_to_python(pair.into_holder, [sent])
    assert_holder_unchanged(pair)


@pytest.mark.parametrize("case", GOTJOB_CASES)
def test_a_gotjob_the_fast_path_refuses_reaches_on_frame_unchanged(pair, case):
    sent = refused_gotjobs(pair)[case]
    pair.into_producer.data_received(reframed(sent))
    assert_left_to_python(pair.into_producer, [sent])
    assert_producer_unchanged(pair)


def assert_copy_and_count_left_to_python(pair):
    """The producer's REPLJOB and the holder's GOTJOB both reach on_frame
    unchanged, and neither node changes."""
    pair.into_holder.data_received(pair.repljob)
    pair.into_producer.data_received(pair.gotjob())
    assert_left_to_python(pair.into_holder, [payload(pair.repljob)])
    assert_left_to_python(pair.into_producer, [payload(pair.gotjob())])
    assert_holder_unchanged(pair)
    assert_producer_unchanged(pair)


def test_frames_of_another_node_than_the_authenticated_one_reach_on_frame(pair):
    pair.into_holder.peer_id = THIRD
    pair.into_producer.peer_id = THIRD
    assert_copy_and_count_left_to_python(pair)


def test_a_repljob_reaches_on_frame_while_healing_marks_jobs(pair):
    mark_a_job_for_healing(pair)
    pair.into_holder.data_received(pair.repljob)
    assert_left_to_python(pair.into_holder, [payload(pair.repljob)])
    assert_holder_unchanged(pair)


def test_a_repljob_reaches_on_frame_while_healing_watches_jobs(pair):
    pair.holder.heal_watch[pair.another_copy(b"watched")] = 0
    pair.into_holder.data_received(pair.repljob)
    assert_left_to_python(pair.into_holder, [payload(pair.repljob)])
    assert_holder_unchanged(pair)


# The message types the fast path takes (engine/net/link.pxi; DELJOB unless
# flagged MSG_ABANDONED, which these frames are not).
FAST_KINDS = (msg.REPLJOB, msg.GOTJOB, msg.SETACK, msg.GOTACK, msg.DELJOB)


def other_messages(pair: Pair) -> list[bytes]:
    """One frame of every other message type, from the known producer."""
    job_ids = msg.JobIds([(pair.job.id, 2)])
    bodies = {msg.Heartbeat: msg.Heartbeat([msg.Gossip(THIRD, "127.0.0.1", 7713, 0)]),
              msg.Fail: msg.Fail(THIRD), msg.Jobs: msg.Jobs([pair.job_bytes()]),
              msg.JobIds: job_ids, msg.QueueOp: msg.QueueOp(b"q", 10),
              msg.Epoch: msg.Epoch(3, [(THIRD, 4)])}
    return [payload(frame(kind, PRODUCER, bodies[body_kind]))
            for kind, body_kind in msg.BODY_KIND.items() if kind not in FAST_KINDS]


def test_every_other_message_type_reaches_on_frame_unchanged(pair):
    sent = other_messages(pair)
    pair.into_holder.data_received(b"".join(map(reframed, sent)))
    assert_left_to_python(pair.into_holder, sent)
    assert_holder_unchanged(pair)


def test_handshake_frames_reach_on_frame_unchanged(pair):
    sent = [b"DqA1\x01" + b"n" * 32 + PRODUCER, b"DqA1\x03" + b"m" * 32]
    pair.into_holder.data_received(b"".join(map(reframed, sent)))
    assert_left_to_python(pair.into_holder, sent)


def test_nothing_is_taken_while_the_fast_path_is_shut(pair):
    pair.into_holder.fast = False
    pair.into_producer.fast = False
    assert_copy_and_count_left_to_python(pair)


def test_a_second_sender_in_one_read_is_left_to_python(pair):
    from_third = payload(frame(msg.REPLJOB, THIRD, msg.Jobs([pair.another_job(b"two")[1]])))
    pair.into_holder.data_received(pair.repljob + reframed(from_third))
    assert pair.into_holder.fast_reads == [(PRODUCER, 1, len(pair.repljob))]
    assert pair.into_holder.frames == [from_third]


# ------------------------------------------------------------------ the shape, against the codec

def mutated(good: bytes, data) -> bytes:
    """good's payload with its body (after the header) cut, extended, or
    a byte of it changed."""
    body = good[msg.HEADER.size:]
    how = data.draw(st.sampled_from(("cut", "extend", "change", "count")))
    if how == "cut":
        body = body[:data.draw(st.integers(0, len(body)))]
    elif how == "extend":
        body += data.draw(st.binary(min_size=1, max_size=50))
    elif how == "change" and body:
        at = data.draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([data.draw(st.integers(0, 255))]) + body[at + 1:]
    else:
        body = msg.U32.pack(data.draw(st.integers(0, 0xFFFF_FFFF))) + body[4:]
    return good[:msg.HEADER.size] + body


def decodes(sent: bytes) -> bool:
    try:
        msg.decode(sent)
    except msg.BadFrame:
        return False
    return True


@FUZZ
@given(data=st.data())
def test_the_fast_path_takes_a_frame_exactly_when_the_codec_accepts_it(data):
    pair = Pair()
    kind = data.draw(st.sampled_from((msg.REPLJOB, msg.GOTJOB)))
    if kind == msg.REPLJOB:
        link, good, sender = pair.into_holder, payload(pair.repljob), PRODUCER
    else:
        link, good, sender = pair.into_producer, payload(pair.gotjob()), HOLDER
    sent = mutated(good, data)
    link.data_received(reframed(sent))
    event(f"{msg.TYPE_NAMES[kind]} {'well formed' if decodes(sent) else 'malformed'}")
    if decodes(sent):
        assert link.frames == []
        assert link.fast_reads == [(sender, 1, msg.LENGTH.size + len(sent))]
    else:
        assert_left_to_python(link, [sent])
