"""The cluster bus wire format: one class per message, encode and decode.

A frame is a 4-byte big-endian length (of everything after it), then a
fixed header, then the message body:

    header  = signature b"DqP1", u8 type, u8 message flags,
              u16 sender client port, u16 sender node flags,
              40 bytes sender node ID (hex)
    PING / PONG / MEET   u16 count, count x gossip entry
        gossip entry    = 40 bytes node ID, u16 port, u16 flags,
                          u8 IP length, IP (ASCII, at most 46 bytes)
    FAIL                 40 bytes node ID
    REPLJOB / YOURJOBS   u32 count, count x (u32 length, serialized job)
    GOTJOB ENQUEUE QUEUED WORKING SETACK WILLQUEUE GOTACK DELJOB
                         u32 count, count x (40 bytes job ID, u32 aux)
    NEEDJOBS / PAUSE     u32 aux, u32 queue name length, queue name
    EPOCH                u64 the sender's start epoch, u16 count,
                         count x (40 bytes node ID, u64 its start epoch)

Job messages carry lists so that one frame can batch what a node has for a
peer in one event-loop turn. decode() checks size and shape completely
(lengths add up, IDs are well formed, counts are bounded) before anything
is returned; a frame that fails is a BadFrame and is never applied. This
module never touches a socket: bus.py moves the bytes.

Rolling upgrades: a node rejects a frame of an unknown type (and trailing
bytes), but ignores header node-flag bits it does not know. So whatever a
newer version adds to the bus is announced first by a header bit, and sent
only to the nodes whose headers carry it. EPOCH (a node's start epoch,
which changes whenever it starts without loading jobs from an AOF: its
copies are gone) is sent only as an answer to a PING or MEET whose header
has SPEAKS_EPOCH (membership.py), right after the PONG; the epochs the
sender knows of other nodes come along when the PING asked for them
(MSG_WANT_EPOCHS, a message flag older nodes ignore on a heartbeat).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from itertools import starmap

SIGNATURE = b"DqP1"
LENGTH = struct.Struct(">I")
HEADER = struct.Struct(">4sBBHH40s")
GOSSIP_FIXED = struct.Struct(">40sHHB")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
ID_AUX = struct.Struct(">40sI")
QUEUE_OP = struct.Struct(">II")
U64 = struct.Struct(">Q")
NODE_EPOCH = struct.Struct(">40sQ")

MAX_FRAME = 600 * 1024 * 1024       # a job body may be up to 512 MB
MAX_GOSSIP = 1000
MAX_IP_LEN = 46
NODE_ID_LEN = 40
# NEEDJOBS and PAUSE make a queue on their receiver without a job: a queue
# with a longer name is not federated (federation.py and PAUSE ... BCAST
# do not send it), and a frame carrying one is refused.
MAX_QUEUE_NAME = 64 * 1024

# Message types.
PING, PONG, MEET, FAIL = 0, 1, 2, 3
REPLJOB, GOTJOB, ENQUEUE, QUEUED, SETACK, WILLQUEUE, GOTACK, DELJOB = 4, 5, 6, 7, 8, 9, 10, 11
NEEDJOBS, YOURJOBS, WORKING, PAUSE = 12, 13, 14, 15
EPOCH = 16            # only to nodes whose header has membership.SPEAKS_EPOCH
TYPE_NAMES = {PING: "PING", PONG: "PONG", MEET: "MEET", FAIL: "FAIL", REPLJOB: "REPLJOB",
              GOTJOB: "GOTJOB", ENQUEUE: "ENQUEUE", QUEUED: "QUEUED", SETACK: "SETACK",
              WILLQUEUE: "WILLQUEUE", GOTACK: "GOTACK", DELJOB: "DELJOB",
              NEEDJOBS: "NEEDJOBS", YOURJOBS: "YOURJOBS", WORKING: "WORKING", PAUSE: "PAUSE",
              EPOCH: "EPOCH"}

# Message flags (the u8 after the type).
MSG_NOREPLY = 1       # REPLJOB: do not answer with GOTJOB
MSG_RESENT = 2        # REPLJOB: sent again to some holders only (older nodes ignore it)
MSG_INCR_NACKS = 2    # QUEUED: count a NACK
MSG_INCR_DELIV = 4    # QUEUED: count an additional delivery
MSG_WANT_EPOCHS = 8   # PING, MEET: answer with the epochs you know of others too
MSG_DEAD = 8          # QUEUED: it went to its dead-letter queue (older nodes ignore it)
MSG_REVISED = 16      # REPLJOB: the job changed (QREQUEUE): update the copy (ditto)
MSG_ABANDONED = 32    # DELJOB: its ADDJOB failed: forget its DEDUP key too (ditto)
MSG_PROMISED = 32     # REPLJOB: its ID answered a duplicate ADDJOB: keep it (ditto)
MSG_KEPT = 64         # REPLJOB: a promised job: taken even where its ADDJOB failed (ditto)

_NODE_ID = re.compile(rb"[0-9a-f]{40}\Z")
# A whole block of (job ID, u32 aux) items, checked in one match.
_JOB_ID_AUX_BLOCK = re.compile(rb"(?:D-[0-9a-fA-F]{8}-[A-Za-z0-9+/]{24}-[0-9a-fA-F]{4}.{4})*",
                               re.DOTALL)


def is_node_id(value: bytes) -> bool:
    return _NODE_ID.match(value) is not None


class BadFrame(ValueError):
    """A frame that is not well formed: the link is closed, nothing applied."""


@dataclass(slots=True)
class Header:
    type: int
    sender: bytes            # 40 hex bytes
    port: int                # the sender's client port
    flags: int               # the sender's node flags (leaving, ...)
    mflags: int = 0          # message flags


@dataclass(slots=True)
class Gossip:
    node_id: bytes
    ip: str
    port: int
    flags: int


@dataclass(slots=True)
class Heartbeat:
    """PING, PONG and MEET: who the sender is, and a sample of its view."""

    gossip: list[Gossip] = field(default_factory=list)


@dataclass(slots=True)
class Fail:
    node_id: bytes


@dataclass(slots=True)
class Jobs:
    """REPLJOB and YOURJOBS: serialized jobs (see engine/model/wire.pxi)."""

    jobs: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class JobIds:
    """Every message about job IDs: (id, aux) pairs, aux per type
    (SETACK: nodes that may have the job; GOTACK: known; ENQUEUE: delay)."""

    items: list[tuple[bytes, int]] = field(default_factory=list)


@dataclass(slots=True)
class QueueOp:
    """NEEDJOBS (aux: how many jobs) and PAUSE (aux: pause flags)."""

    queue: bytes
    aux: int


@dataclass(slots=True)
class Epoch:
    """EPOCH: the sender's start epoch (a u64, never 0), and those of other
    nodes it heard from them: (node ID, epoch) pairs."""

    epoch: int
    others: list[tuple[bytes, int]] = field(default_factory=list)


BODY_KIND = {PING: Heartbeat, PONG: Heartbeat, MEET: Heartbeat, FAIL: Fail,
             REPLJOB: Jobs, YOURJOBS: Jobs,
             GOTJOB: JobIds, ENQUEUE: JobIds, QUEUED: JobIds, WORKING: JobIds,
             SETACK: JobIds, WILLQUEUE: JobIds, GOTACK: JobIds, DELJOB: JobIds,
             NEEDJOBS: QueueOp, PAUSE: QueueOp, EPOCH: Epoch}


# ------------------------------------------------------------------ encode

def encode(header: Header, body) -> bytes:
    """A whole frame, length prefix included."""
    parts = [b"", HEADER.pack(SIGNATURE, header.type, header.mflags, header.port,
                              header.flags, header.sender)]
    kind = type(body)
    if kind is Heartbeat:
        parts.append(U16.pack(len(body.gossip)))
        for entry in body.gossip:
            ip = entry.ip.encode("ascii")
            parts.append(GOSSIP_FIXED.pack(entry.node_id, entry.port, entry.flags, len(ip)))
            parts.append(ip)
    elif kind is Fail:
        parts.append(body.node_id)
    elif kind is Jobs:
        parts.append(U32.pack(len(body.jobs)))
        for job in body.jobs:
            parts.append(U32.pack(len(job)))
            parts.append(job)
    elif kind is JobIds:
        parts.append(U32.pack(len(body.items)))
        parts.extend(starmap(ID_AUX.pack, body.items))
    elif kind is QueueOp:
        parts.append(QUEUE_OP.pack(body.aux, len(body.queue)))
        parts.append(body.queue)
    elif kind is Epoch:
        parts.append(U64.pack(body.epoch))
        parts.append(U16.pack(len(body.others)))
        parts.extend(starmap(NODE_EPOCH.pack, body.others))
    else:
        raise TypeError(f"not a bus message body: {kind.__name__}")
    payload_length = sum(map(len, parts))
    parts[0] = LENGTH.pack(payload_length)
    return b"".join(parts)


# ------------------------------------------------------------------ decode

def frame_length(prefix: bytes) -> int:
    """The payload length announced by a frame's first 4 bytes (checked)."""
    (length,) = LENGTH.unpack(prefix)
    if length < HEADER.size or length > MAX_FRAME:
        raise BadFrame(f"frame length {length} out of range")
    return length


def decode(payload: bytes | memoryview) -> tuple[Header, object]:
    """Header and body of one frame's payload (without the length prefix)."""
    if len(payload) < HEADER.size:
        raise BadFrame("frame shorter than its header")
    signature, kind, mflags, port, flags, sender = HEADER.unpack_from(payload, 0)
    if signature != SIGNATURE:
        raise BadFrame("bad signature")
    if kind not in BODY_KIND:
        raise BadFrame(f"unknown message type {kind}")
    if not _NODE_ID.match(sender):
        raise BadFrame("bad sender node ID")
    reader = _Reader(payload, HEADER.size)
    body = _DECODERS[BODY_KIND[kind]](reader)
    if reader.pos != len(payload):
        raise BadFrame(f"{TYPE_NAMES[kind]}: {len(payload) - reader.pos} trailing bytes")
    return Header(kind, bytes(sender), port, flags, mflags), body


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise BadFrame("frame ends inside a field")
        chunk = bytes(self.data[self.pos:end])
        self.pos = end
        return chunk

    def unpack(self, layout: struct.Struct) -> tuple:
        return layout.unpack(self.take(layout.size))

    def count(self, layout: struct.Struct, limit: int, item_size: int) -> int:
        (number,) = self.unpack(layout)
        if number > limit or number * item_size > len(self.data) - self.pos:
            raise BadFrame(f"count {number} does not fit the frame")
        return number


def _decode_heartbeat(reader: _Reader) -> Heartbeat:
    gossip = []
    for _ in range(reader.count(U16, MAX_GOSSIP, GOSSIP_FIXED.size)):
        node_id, port, flags, ip_length = reader.unpack(GOSSIP_FIXED)
        if not _NODE_ID.match(node_id) or ip_length > MAX_IP_LEN:
            raise BadFrame("bad gossip entry")
        ip = reader.take(ip_length)
        if not ip.isascii():
            raise BadFrame("bad gossip IP")
        gossip.append(Gossip(node_id, ip.decode("ascii"), port, flags))
    return Heartbeat(gossip)


def _decode_fail(reader: _Reader) -> Fail:
    node_id = reader.take(NODE_ID_LEN)
    if not _NODE_ID.match(node_id):
        raise BadFrame("bad node ID in FAIL")
    return Fail(node_id)


def _decode_jobs(reader: _Reader) -> Jobs:
    number = reader.count(U32, MAX_FRAME, U32.size)
    data, pos, end = reader.data, reader.pos, len(reader.data)
    unpack_length = U32.unpack_from
    jobs = []
    for _ in range(number):
        if pos + 4 > end:
            raise BadFrame("frame ends inside a field")
        (length,) = unpack_length(data, pos)
        pos += 4
        if pos + length > end:
            raise BadFrame("frame ends inside a field")
        jobs.append(bytes(data[pos:pos + length]))
        pos += length
    reader.pos = pos
    return Jobs(jobs)


def _decode_job_ids(reader: _Reader) -> JobIds:
    block = reader.take(reader.count(U32, MAX_FRAME, ID_AUX.size) * ID_AUX.size)
    if not _JOB_ID_AUX_BLOCK.fullmatch(block):
        raise BadFrame("bad job ID")
    return JobIds(list(ID_AUX.iter_unpack(block)))


def _decode_queue_op(reader: _Reader) -> QueueOp:
    aux, length = reader.unpack(QUEUE_OP)
    if length > MAX_QUEUE_NAME:
        raise BadFrame("queue name too long")
    return QueueOp(reader.take(length), aux)


def _decode_epoch(reader: _Reader) -> Epoch:
    (epoch,) = reader.unpack(U64)
    others = []
    for _ in range(reader.count(U16, MAX_GOSSIP, NODE_EPOCH.size)):
        node_id, other = reader.unpack(NODE_EPOCH)
        if not _NODE_ID.match(node_id) or not other:
            raise BadFrame("bad node epoch")
        others.append((node_id, other))
    if not epoch:
        raise BadFrame("EPOCH 0")
    return Epoch(epoch, others)


_DECODERS = {Heartbeat: _decode_heartbeat, Fail: _decode_fail, Jobs: _decode_jobs,
             JobIds: _decode_job_ids, QueueOp: _decode_queue_op, Epoch: _decode_epoch}
