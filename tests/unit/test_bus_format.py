"""The cluster bus codec (formats/bus.py): every message type survives
encode -> decode unchanged, and decode refuses anything malformed with
BadFrame and never with any other exception (a peer's garbage must close
the link, not crash the node)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_py.formats import bus as msg
from disque_py.formats.bus import BadFrame

SENDER = b"0123456789abcdef0123456789abcdef01234567"
OTHER = b"fedcba9876543210fedcba9876543210fedcba98"
JOB_ID = b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1"
HEX = "0123456789abcdef"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

HEARTBEAT_TYPES = (msg.PING, msg.PONG, msg.MEET)
JOBS_TYPES = (msg.REPLJOB, msg.YOURJOBS)
JOB_ID_TYPES = (msg.GOTJOB, msg.ENQUEUE, msg.QUEUED, msg.WORKING, msg.SETACK,
                msg.WILLQUEUE, msg.GOTACK, msg.DELJOB)
QUEUE_OP_TYPES = (msg.NEEDJOBS, msg.PAUSE)
ALL_TYPES = HEARTBEAT_TYPES + (msg.FAIL,) + JOBS_TYPES + JOB_ID_TYPES + QUEUE_OP_TYPES + (
    msg.EPOCH,)

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ strategies

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)
node_ids = st.text(HEX, min_size=40, max_size=40).map(str.encode)
ips = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=msg.MAX_IP_LEN)
job_ids = st.builds(
    lambda node, body, ttl: b"D-%s-%s-%s" % (node.encode(), body.encode(), ttl.encode()),
    st.text(HEX + "ABCDEF", min_size=8, max_size=8),
    st.text(B64, min_size=24, max_size=24),
    st.text(HEX + "ABCDEF", min_size=4, max_size=4))
gossip_entries = st.builds(msg.Gossip, node_ids, ips, u16, u16)
headers = st.builds(msg.Header, st.just(0), node_ids, u16, u16, u8)

bodies = {
    msg.Heartbeat: st.builds(msg.Heartbeat, st.lists(gossip_entries, max_size=20)),
    msg.Fail: st.builds(msg.Fail, node_ids),
    msg.Jobs: st.builds(msg.Jobs, st.lists(st.binary(max_size=300), max_size=10)),
    msg.JobIds: st.builds(msg.JobIds, st.lists(st.tuples(job_ids, u32), max_size=20)),
    msg.QueueOp: st.builds(msg.QueueOp, st.binary(max_size=200), u32),
    msg.Epoch: st.builds(msg.Epoch, st.integers(1, 2 ** 64 - 1),
                         st.lists(st.tuples(node_ids, st.integers(1, 2 ** 64 - 1)), max_size=5)),
}


@st.composite
def messages(draw, types=ALL_TYPES):
    kind = draw(st.sampled_from(types))
    header = draw(headers)
    header.type = kind
    body = draw(bodies[msg.BODY_KIND[kind]])
    return header, body


def sample_body(kind: int):
    """A representative, non-trivial body for each message type."""
    body_kind = msg.BODY_KIND[kind]
    if body_kind is msg.Heartbeat:
        return msg.Heartbeat([msg.Gossip(OTHER, "127.0.0.1", 7711, 0),
                              msg.Gossip(SENDER, "::1", 7712, 3)])
    if body_kind is msg.Fail:
        return msg.Fail(OTHER)
    if body_kind is msg.Jobs:
        return msg.Jobs([b"first job", b"", b"\x00\xff" * 5])
    if body_kind is msg.JobIds:
        return msg.JobIds([(JOB_ID, 3), (JOB_ID.replace(b"8YL", b"9ZZ"), 0xFFFF_FFFF)])
    if body_kind is msg.Epoch:
        return msg.Epoch(0x0123_4567_89AB_CDEF, [(OTHER, 42)])
    return msg.QueueOp(b"myqueue", 42)


def frame_of(kind: int, body=None, sender: bytes = SENDER, port: int = 7711,
             flags: int = 0, mflags: int = 0) -> bytes:
    header = msg.Header(kind, sender, port, flags, mflags)
    return msg.encode(header, sample_body(kind) if body is None else body)


def payload_of(kind: int, body=None, **kwargs) -> bytes:
    return frame_of(kind, body, **kwargs)[msg.LENGTH.size:]


def raw_header(kind: int, sender: bytes = SENDER, signature: bytes = msg.SIGNATURE) -> bytes:
    return msg.HEADER.pack(signature, kind, 0, 7711, 0, sender)


def decode_only_badframe(payload) -> None:
    """decode() either succeeds or raises BadFrame: nothing else."""
    try:
        msg.decode(payload)
    except BadFrame:
        pass


# ------------------------------------------------------------------ round trips

@pytest.mark.parametrize("kind", ALL_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
def test_every_message_type_round_trips(kind):
    body = sample_body(kind)
    frame = frame_of(kind, body, port=12345, flags=128, mflags=msg.MSG_INCR_NACKS)
    assert msg.frame_length(frame[:4]) == len(frame) - 4
    header, decoded = msg.decode(frame[4:])
    assert header == msg.Header(kind, SENDER, 12345, 128, msg.MSG_INCR_NACKS)
    assert type(decoded) is msg.BODY_KIND[kind]
    assert decoded == body


@pytest.mark.parametrize("kind", ALL_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
def test_every_message_type_round_trips_when_empty(kind):
    empty = {msg.Heartbeat: msg.Heartbeat(), msg.Fail: msg.Fail(OTHER), msg.Jobs: msg.Jobs(),
             msg.JobIds: msg.JobIds(), msg.QueueOp: msg.QueueOp(b"", 0),
             msg.Epoch: msg.Epoch(1)}[msg.BODY_KIND[kind]]
    header, decoded = msg.decode(payload_of(kind, empty))
    assert header.type == kind
    assert decoded == empty


@FUZZ
@given(messages())
def test_random_messages_round_trip(message):
    header, body = message
    frame = msg.encode(header, body)
    assert msg.frame_length(frame[:4]) == len(frame) - 4
    assert msg.decode(frame[4:]) == (header, body)


@FUZZ
@given(messages())
def test_random_messages_round_trip_from_a_memoryview(message):
    header, body = message
    frame = bytearray(msg.encode(header, body))
    decoded_header, decoded_body = msg.decode(memoryview(frame)[4:])
    assert (decoded_header, decoded_body) == (header, body)
    assert type(decoded_header.sender) is bytes


@FUZZ
@given(messages(HEARTBEAT_TYPES))
def test_heartbeat_gossip_lists_round_trip(message):
    header, body = message
    assert msg.decode(msg.encode(header, body)[4:])[1].gossip == body.gossip


@FUZZ
@given(messages(JOBS_TYPES))
def test_job_lists_of_random_bytes_round_trip(message):
    header, body = message
    assert msg.decode(msg.encode(header, body)[4:])[1].jobs == body.jobs


@FUZZ
@given(messages(JOB_ID_TYPES))
def test_job_id_lists_round_trip(message):
    header, body = message
    assert msg.decode(msg.encode(header, body)[4:])[1].items == body.items


@FUZZ
@given(messages(QUEUE_OP_TYPES))
def test_queue_ops_round_trip(message):
    header, body = message
    assert msg.decode(msg.encode(header, body)[4:])[1] == body


def test_gossip_ip_of_maximum_length_round_trips():
    ip = "f" * msg.MAX_IP_LEN
    body = msg.Heartbeat([msg.Gossip(OTHER, ip, 1, 0)])
    assert msg.decode(payload_of(msg.PING, body))[1] == body


def test_encode_refuses_what_is_not_a_message_body():
    with pytest.raises(TypeError):
        msg.encode(msg.Header(msg.PING, SENDER, 1, 0), object())


# ------------------------------------------------------------------ header refusals

def test_decode_refuses_a_wrong_signature():
    payload = bytearray(payload_of(msg.PING))
    payload[0:4] = b"DqP2"
    with pytest.raises(BadFrame):
        msg.decode(bytes(payload))


@pytest.mark.parametrize("signature", [b"\x00\x00\x00\x00", b"RCmb", b"dqp1", b"DqP0"])
def test_decode_refuses_other_signatures(signature):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.FAIL, signature=signature) + OTHER)


@pytest.mark.parametrize("kind", [17, 18, 100, 255])
def test_decode_refuses_an_unknown_type(kind):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(kind) + OTHER)


@pytest.mark.parametrize("sender", [
    SENDER.upper(),                       # node IDs are lowercase hex
    b"g" * 40,
    b"\x00" * 40,
    b" " * 40,
    SENDER[:39] + b"\n",
    SENDER[:39] + b"-",
], ids=["uppercase", "not-hex", "nul", "spaces", "newline", "dash"])
def test_decode_refuses_a_bad_sender_id(sender):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.PING, sender=sender) + b"\x00\x00")


def test_decode_refuses_a_frame_shorter_than_its_header():
    for size in range(msg.HEADER.size):
        with pytest.raises(BadFrame):
            msg.decode(raw_header(msg.PING)[:size])


# ------------------------------------------------------------------ body refusals

@pytest.mark.parametrize("kind", ALL_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
def test_decode_refuses_a_body_truncated_at_every_byte(kind):
    payload = payload_of(kind)
    for size in range(len(payload)):
        with pytest.raises(BadFrame):
            msg.decode(payload[:size])


@pytest.mark.parametrize("kind", ALL_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
@pytest.mark.parametrize("extra", [b"\x00", b"x" * 7, b"\x00" * 40])
def test_decode_refuses_trailing_bytes(kind, extra):
    with pytest.raises(BadFrame):
        msg.decode(payload_of(kind) + extra)


def test_decode_refuses_a_gossip_count_above_the_limit():
    entry = msg.GOSSIP_FIXED.pack(OTHER, 1, 0, 0)
    count = msg.MAX_GOSSIP + 1
    payload = raw_header(msg.PING) + msg.U16.pack(count) + entry * count
    with pytest.raises(BadFrame):
        msg.decode(payload)


def test_decode_accepts_a_gossip_count_at_the_limit():
    entry = msg.GOSSIP_FIXED.pack(OTHER, 1, 0, 0)
    payload = raw_header(msg.PING) + msg.U16.pack(msg.MAX_GOSSIP) + entry * msg.MAX_GOSSIP
    assert len(msg.decode(payload)[1].gossip) == msg.MAX_GOSSIP


@pytest.mark.parametrize("count", [1, 2, 0xFFFF])
def test_decode_refuses_a_gossip_count_that_does_not_fit_the_frame(count):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.PONG) + msg.U16.pack(count))


@pytest.mark.parametrize("kind", JOBS_TYPES + JOB_ID_TYPES,
                         ids=lambda kind: msg.TYPE_NAMES[kind])
@pytest.mark.parametrize("count", [1, 2, 1 << 20, 0xFFFF_FFFF])
def test_decode_refuses_a_job_count_that_does_not_fit_the_frame(kind, count):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(kind) + msg.U32.pack(count) + b"\x00" * 3)


@pytest.mark.parametrize("length", [1, 100, 0xFFFF_FFFF])
def test_decode_refuses_a_job_length_past_the_frame(length):
    payload = raw_header(msg.REPLJOB) + msg.U32.pack(1) + msg.U32.pack(length)
    with pytest.raises(BadFrame):
        msg.decode(payload)


@pytest.mark.parametrize("length", [1, 0xFFFF, msg.MAX_QUEUE_NAME + 1, 0xFFFF_FFFF])
@pytest.mark.parametrize("kind", QUEUE_OP_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
def test_decode_refuses_a_queue_name_length_past_the_frame(kind, length):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(kind) + msg.QUEUE_OP.pack(1, length))


@pytest.mark.parametrize("job_id", [
    b"X" + JOB_ID[1:],                                  # not D-
    JOB_ID[:-1] + b"g",                                 # TTL not hex
    JOB_ID[:2] + b"zzzzzzzz" + JOB_ID[10:],             # node part not hex
    JOB_ID[:11] + b"!" + JOB_ID[12:],                   # body not base64
    JOB_ID[:10] + b"_" + JOB_ID[11:],                   # separator
    b"\x00" * 40,
    b" " * 40,
], ids=["prefix", "ttl", "node", "body", "separator", "nul", "spaces"])
@pytest.mark.parametrize("kind", JOB_ID_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
def test_decode_refuses_bad_job_ids(kind, job_id):
    assert len(job_id) == 40
    payload = raw_header(kind) + msg.U32.pack(1) + msg.ID_AUX.pack(job_id, 0)
    with pytest.raises(BadFrame):
        msg.decode(payload)


def test_decode_refuses_a_bad_job_id_after_good_ones():
    items = msg.ID_AUX.pack(JOB_ID, 1) + msg.ID_AUX.pack(b"?" * 40, 2)
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.SETACK) + msg.U32.pack(2) + items)


@pytest.mark.parametrize("node_id", [OTHER.upper(), b"z" * 40, b"\x00" * 40, b"\n" * 40])
def test_decode_refuses_a_bad_node_id_in_fail(node_id):
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.FAIL) + node_id)


@pytest.mark.parametrize("node_id", [OTHER.upper(), b"z" * 40, b"\x00" * 40, OTHER[:39] + b" "])
@pytest.mark.parametrize("kind", HEARTBEAT_TYPES, ids=lambda kind: msg.TYPE_NAMES[kind])
def test_decode_refuses_a_bad_gossip_node_id(kind, node_id):
    entry = msg.GOSSIP_FIXED.pack(node_id, 7711, 0, 9) + b"127.0.0.1"
    with pytest.raises(BadFrame):
        msg.decode(raw_header(kind) + msg.U16.pack(1) + entry)


@pytest.mark.parametrize("ip_length", [msg.MAX_IP_LEN + 1, 100, 255])
def test_decode_refuses_a_gossip_ip_that_is_too_long(ip_length):
    entry = msg.GOSSIP_FIXED.pack(OTHER, 7711, 0, ip_length) + b"1" * ip_length
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.PING) + msg.U16.pack(1) + entry)


def test_decode_refuses_a_gossip_ip_length_past_the_frame():
    entry = msg.GOSSIP_FIXED.pack(OTHER, 7711, 0, 20) + b"127.0.0.1"
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.PING) + msg.U16.pack(1) + entry)


def test_decode_refuses_a_non_ascii_gossip_ip():
    ip = "127.0.0.\u00e9".encode("latin-1")
    entry = msg.GOSSIP_FIXED.pack(OTHER, 7711, 0, len(ip)) + ip
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.PING) + msg.U16.pack(1) + entry)


def test_decode_refuses_a_bad_second_gossip_entry():
    good = msg.GOSSIP_FIXED.pack(OTHER, 7711, 0, 9) + b"127.0.0.1"
    bad = msg.GOSSIP_FIXED.pack(b"x" * 40, 7712, 0, 9) + b"127.0.0.1"
    with pytest.raises(BadFrame):
        msg.decode(raw_header(msg.PING) + msg.U16.pack(2) + good + bad)


# ------------------------------------------------------------------ frame_length

@pytest.mark.parametrize("length", [msg.HEADER.size, msg.HEADER.size + 1, 1 << 20, msg.MAX_FRAME])
def test_frame_length_accepts_lengths_in_range(length):
    assert msg.frame_length(msg.LENGTH.pack(length)) == length


@pytest.mark.parametrize("length", [0, 1, msg.HEADER.size - 1, msg.MAX_FRAME + 1, 0xFFFF_FFFF])
def test_frame_length_refuses_lengths_out_of_range(length):
    with pytest.raises(BadFrame):
        msg.frame_length(msg.LENGTH.pack(length))


@FUZZ
@given(st.binary(min_size=4, max_size=4))
def test_frame_length_of_any_prefix_is_in_range_or_badframe(prefix):
    try:
        length = msg.frame_length(prefix)
    except BadFrame:
        return
    assert msg.HEADER.size <= length <= msg.MAX_FRAME


# ------------------------------------------------------------------ fuzzing

@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_never_raise_anything_but_badframe(data):
    decode_only_badframe(data)


@FUZZ
@given(st.sampled_from(ALL_TYPES), node_ids, st.binary(max_size=400))
def test_random_bodies_behind_a_valid_header_never_raise_anything_but_badframe(kind, sender,
                                                                              body):
    decode_only_badframe(raw_header(kind, sender=sender) + body)


@FUZZ
@given(messages(), st.data())
def test_corrupted_valid_frames_never_raise_anything_but_badframe(message, data):
    payload = bytearray(msg.encode(*message)[4:])
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(payload) - 1))
        payload[position] = data.draw(u8)
    cut = data.draw(st.integers(0, len(payload)))
    decode_only_badframe(bytes(payload[:cut]))
    decode_only_badframe(memoryview(payload))


@FUZZ
@given(st.sampled_from(ALL_TYPES), st.lists(u32, min_size=1, max_size=4),
       st.binary(max_size=64))
def test_random_counts_and_lengths_never_raise_anything_but_badframe(kind, numbers, tail):
    body = b"".join(struct.pack(">I", number) for number in numbers) + tail
    decode_only_badframe(raw_header(kind) + body)


def test_epoch_is_a_u64_never_zero_with_the_epochs_heard_of_others():
    frame = frame_of(msg.EPOCH, msg.Epoch(2 ** 64 - 1))
    assert len(frame) == msg.LENGTH.size + msg.HEADER.size + 8 + 2
    assert msg.decode(frame[4:])[1] == msg.Epoch(2 ** 64 - 1)
    others = [(OTHER, 7), (SENDER, 2 ** 63)]
    frame = frame_of(msg.EPOCH, msg.Epoch(5, others))
    assert len(frame) == msg.LENGTH.size + msg.HEADER.size + 8 + 2 + 2 * 48
    assert msg.decode(frame[4:])[1] == msg.Epoch(5, others)
    for bad in (msg.U64.pack(0) + msg.U16.pack(0),                        # epoch 0
                msg.U64.pack(1) + msg.U16.pack(1) + OTHER + msg.U64.pack(0),
                msg.U64.pack(1) + msg.U16.pack(1) + b"x" * 40 + msg.U64.pack(1),
                msg.U64.pack(1) + msg.U16.pack(2) + OTHER + msg.U64.pack(1)):
        with pytest.raises(BadFrame):
            msg.decode(raw_header(msg.EPOCH) + bad)
