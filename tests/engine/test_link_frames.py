"""LinkBase (engine/net/link.pxi) cutting a bus link's byte stream into
frames, with no socket, no node and no sleep.

A link is fed whole streams of frames (heartbeats, handshake-like frames
and job messages, encoded with formats/bus.py) cut into reads at
arbitrary points: each payload reaches on_frame exactly once, in order,
byte for byte, as soon as its last byte arrived. A length prefix outside
[5, frame_limit] calls refuse_length the moment its 4 bytes are in, and
nothing after it is ever delivered; nor is anything once the link is
closed. With the fast path shut (`fast` False, the default) every frame
goes to on_frame and fast_frames_done is never called.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_py.formats import bus as msg
from tests.engine.links import RecordingLink

SENDER = b"0123456789abcdef0123456789abcdef01234567"
MIN_FRAME = 5                       # link.pxd's LINK_MIN_FRAME: a handshake's payload
LIMIT = 64 * 1024                   # the frame_limit of the property tests' links
HEX = "0123456789abcdef"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def recording_link(frame_limit: int = LIMIT, close_after: int | None = None) -> RecordingLink:
    """A link with the fast path shut: every frame goes to on_frame."""
    return RecordingLink(frame_limit=frame_limit, close_after=close_after)


# ------------------------------------------------------------------ strategies

u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)
node_ids = st.text(HEX, min_size=40, max_size=40).map(str.encode)
job_ids = st.builds(lambda a, b, c: f"D-{a}-{b}-{c}".encode(),
                    st.text(HEX, min_size=8, max_size=8), st.text(B64, min_size=24, max_size=24),
                    st.text(HEX, min_size=4, max_size=4))


def header(kind: int, mflags: int = 0) -> msg.Header:
    return msg.Header(kind, SENDER, 7711, 0, mflags)


heartbeats = st.builds(
    lambda kind, gossip: msg.encode(header(kind), msg.Heartbeat(gossip)),
    st.sampled_from((msg.PING, msg.PONG, msg.MEET)),
    st.lists(st.builds(msg.Gossip, node_ids, st.just("127.0.0.1"), u16, u16), max_size=5))
job_frames = st.one_of(
    st.builds(lambda kind, jobs: msg.encode(header(kind), msg.Jobs(jobs)),
              st.sampled_from((msg.REPLJOB, msg.YOURJOBS)),
              st.lists(st.binary(max_size=3000), max_size=4)),
    st.builds(lambda kind, items: msg.encode(header(kind), msg.JobIds(items)),
              st.sampled_from((msg.GOTJOB, msg.SETACK, msg.GOTACK, msg.DELJOB)),
              st.lists(st.tuples(job_ids, u32), max_size=8)),
    st.builds(lambda queue, aux: msg.encode(header(msg.NEEDJOBS), msg.QueueOp(queue, aux)),
              st.binary(max_size=50), u32))
# A handshake's frames are as short as 5 bytes: the link splits them too.
handshakes = st.binary(min_size=1, max_size=60).map(
    lambda rest: msg.LENGTH.pack(4 + len(rest)) + b"DqA1" + rest)
frames = st.one_of(heartbeats, job_frames, handshakes)
streams = st.lists(frames, min_size=1, max_size=12)
bad_lengths = st.one_of(st.integers(0, MIN_FRAME - 1), st.integers(LIMIT + 1, 0xFFFF_FFFF))


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """data in reads ending at the given offsets (and at its end)."""
    bounds = sorted({p for p in points if 0 < p < len(data)}) + [len(data)]
    reads, start = [], 0
    for end in bounds:
        reads.append(data[start:end])
        start = end
    return reads


def cut_points(data: bytes):
    return st.lists(st.integers(0, len(data)), max_size=30)


def payloads(stream: list[bytes]) -> list[bytes]:
    return [frame[msg.LENGTH.size:] for frame in stream]


def frames_complete_within(stream: list[bytes], received: int) -> int:
    """How many frames of the stream end within its first `received` bytes."""
    count, end = 0, 0
    for frame in stream:
        end += len(frame)
        if end > received:
            break
        count += 1
    return count


# ------------------------------------------------------------------ splitting

@FUZZ
@given(stream=streams, data=st.data())
def test_every_payload_arrives_once_in_order_unchanged_whatever_the_read_boundaries(stream, data):
    wire = b"".join(stream)
    link = recording_link()
    received = 0
    for read in cut(wire, data.draw(cut_points(wire))):
        link.data_received(read)
        received += len(read)
        whole = frames_complete_within(stream, received)
        assert link.frames == payloads(stream)[:whole]      # as soon as it is whole, not later
    assert link.frames == payloads(stream)
    assert all(type(payload) is bytes for payload in link.frames)
    assert link.refused == [] and link.fast_reads == [] and not link.closed


def test_a_stream_fed_one_byte_at_a_time_arrives_whole():
    stream = [msg.encode(header(msg.PING), msg.Heartbeat([])),
              msg.encode(header(msg.REPLJOB), msg.Jobs([b"job" * 100, b""])),
              msg.LENGTH.pack(MIN_FRAME) + b"DqA1\x01"]
    wire = b"".join(stream)
    link = recording_link()
    for i in range(len(wire)):
        link.data_received(wire[i:i + 1])
    assert link.frames == payloads(stream)


def test_a_frame_larger_than_the_buffer_arrives_whole_and_the_link_goes_on():
    # Past the link's first buffer (16 KB) and its shrink threshold (1 MB).
    big = msg.encode(header(msg.REPLJOB), msg.Jobs([bytes(range(256)) * 8192]))
    small = msg.encode(header(msg.PING), msg.Heartbeat([]))
    link = recording_link(frame_limit=msg.MAX_FRAME)
    wire = small + big + small
    step = 65_521                              # a prime: reads straddle every boundary
    for start in range(0, len(wire), step):
        link.data_received(wire[start:start + step])
    link.data_received(small)
    assert link.frames == payloads([small, big, small, small])


def test_the_shortest_and_the_longest_frame_the_limit_allows_are_taken():
    shortest = msg.LENGTH.pack(MIN_FRAME) + b"DqA1\x02"
    longest = msg.LENGTH.pack(LIMIT) + b"x" * LIMIT
    link = recording_link()
    link.data_received(shortest + longest)
    assert link.frames == payloads([shortest, longest])
    assert link.refused == []


def test_a_limit_raised_by_on_frame_applies_to_the_next_frame_of_the_same_read():
    # BusLink raises its limit once a link is trusted (its first heartbeat).
    class Opening(RecordingLink):
        def on_frame(self, payload: bytes) -> None:
            super().on_frame(payload)
            self.frame_limit = msg.MAX_FRAME

    first = msg.encode(header(msg.PING), msg.Heartbeat([]))
    large = msg.encode(header(msg.REPLJOB), msg.Jobs([b"j" * (2 * LIMIT)]))
    link = Opening(frame_limit=LIMIT)
    link.data_received(first + large)
    assert link.frames == payloads([first, large]) and link.refused == []


# ------------------------------------------------------------------ refused lengths

@FUZZ
@given(before=st.lists(frames, max_size=5), bad=bad_lengths, after=st.lists(frames, max_size=5),
       data=st.data())
def test_a_length_out_of_bounds_is_refused_and_nothing_after_it_is_delivered(before, bad, after,
                                                                             data):
    prefix_end = sum(map(len, before)) + msg.LENGTH.size
    wire = b"".join(before) + msg.LENGTH.pack(bad) + b"DqP1" + b"".join(after)
    link = recording_link()
    received = 0
    for read in cut(wire, data.draw(cut_points(wire))):
        link.data_received(read)
        received += len(read)
        if received >= prefix_end:                 # refused the moment its 4 bytes are in
            assert link.refused == [bad] and link.closed
    assert link.refused == [bad]
    assert link.frames == payloads(before)
    link.data_received(b"".join(after))            # a read the transport still delivers
    assert link.frames == payloads(before) and link.refused == [bad]


def test_a_length_refused_in_the_middle_of_a_read_stops_that_read():
    good = msg.encode(header(msg.PING), msg.Heartbeat([]))
    link = recording_link()
    link.data_received(good + msg.LENGTH.pack(4) + good)
    assert link.frames == payloads([good])
    assert link.refused == [4] and link.closed


# ------------------------------------------------------------------ closed links

@FUZZ
@given(stream=streams, data=st.data())
def test_nothing_is_delivered_once_the_link_is_closed(stream, data):
    wire = b"".join(stream)
    reads = cut(wire, data.draw(cut_points(wire)))
    closing_read = data.draw(st.integers(0, len(reads) - 1))
    link = recording_link()
    received = 0
    for read in reads[:closing_read]:
        link.data_received(read)
        received += len(read)
    delivered = list(link.frames)
    link.closed = True
    for read in reads[closing_read:]:
        link.data_received(read)
    assert link.frames == delivered == payloads(stream)[:frames_complete_within(stream, received)]
    assert link.refused == []


@FUZZ
@given(stream=streams, data=st.data())
def test_a_link_closed_by_on_frame_takes_nothing_more_from_that_read_or_later(stream, data):
    close_after = data.draw(st.integers(1, len(stream)))
    wire = b"".join(stream)
    link = recording_link(close_after=close_after)
    for read in cut(wire, data.draw(cut_points(wire))):
        link.data_received(read)
    link.data_received(wire)
    assert link.frames == payloads(stream)[:close_after]
