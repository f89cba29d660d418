"""Fuzz target: one cluster bus frame, decoded and taken by a node.

The bytes are a frame's payload (what follows its 4-byte length, which the
transport checks: cluster/bus.py). formats/bus.py decodes it; a job message
goes to a node that knows the sender, as the cluster service hands it on
(node.on_peer_message), and the node's timers run once; REPLJOB and
YOURJOBS carry jobs in the engine's wire format (engine/model/wire.pxi),
which the engine parses there. Heartbeats, FAIL and EPOCH are decoded but
not applied: membership needs links this driver does not have.

The same bytes also go, as one frame, through a bus link's compiled fast
path (engine/net/link.pxi) into a fresh node that knows the sender: it
takes the frame in C, or hands it to on_frame unchanged.

The contract: decode returns a message or raises BadFrame, nothing else;
a message encodes back to the very bytes it came from; a node takes any
message without an exception (the handlers tolerate unknown jobs, jobs in
any state, duplicates); each job's bytes unpack or are a ValueError, and a
job that unpacks packs and unpacks to the same fields; the fast path
never takes a frame the codec refuses, and one it does not take reaches
on_frame byte for byte.
"""

from __future__ import annotations

from disque_py.base.clock import FakeClock
from disque_py.engine import BusOutbox, pack_job, unpack_job
from disque_py.formats import bus
from disque_py.node.node import Node
from tests.engine.links import RecordingLink

NODE_ID = b"9bfa56e329abf3577408e45419d642cac8154459"
PEER_ID = b"0f9b3c6b4f4dfd2ac9b0fa72c7c0e5a0f3e2d1c4"
START_MS = 1_700_000_000_000
MEMBERSHIP_TYPES = (bus.PING, bus.PONG, bus.MEET, bus.FAIL, bus.EPOCH)


def decode(payload: bytes):
    """The decoded message, or None for a BadFrame; any other exception
    escapes (a finding)."""
    try:
        return bus.decode(payload)
    except bus.BadFrame:
        return None


def check_job_bytes(data: bytes) -> None:
    try:
        fields = unpack_job(data)
    except ValueError:
        return
    again = unpack_job(pack_job(*fields))
    assert again == fields, f"a job changed through pack and unpack: {fields} -> {again}"


def new_node() -> Node:
    node = Node(NODE_ID, FakeClock(START_MS, seed=7), id_seed=b"fuzz-bus")
    node.set_cluster_view(2, {PEER_ID}, 2, [PEER_ID], False)
    return node


def check(data: bytes) -> None:
    check_fast_path(data)
    message = decode(data)
    if message is None:
        return
    header, body = message
    assert bus.encode(header, body) == bus.LENGTH.pack(len(data)) + data, \
        "the message does not encode back to its bytes"
    if header.type in MEMBERSHIP_TYPES:
        return
    if isinstance(body, bus.Jobs):
        for job in body.jobs:
            check_job_bytes(job)
    node = new_node()
    node.on_peer_message(PEER_ID, header.type, header.mflags, body)
    node.tick()
    node.take_effects()


def check_fast_path(data: bytes) -> None:
    node = new_node()
    node.bus_out = BusOutbox()
    link = RecordingLink(core=node, fast=True)
    link.data_received(bus.LENGTH.pack(len(data)) + data)
    if link.fast_reads:
        assert decode(data) is not None, "the fast path took a frame the codec refuses"
        assert not link.frames
    elif len(data) >= 5:
        assert link.frames == [data], "a frame the fast path left did not reach on_frame whole"
    node.tick()
    node.bus_out.take(0)
    node.take_effects()
