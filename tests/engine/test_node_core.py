"""NodeCore alone, with its hooks unwired: a lone node's commands run in the
engine with no node layer above it, and the engine's calls upward are the
declared ones (NodeHooks; the cpdef hooks of ServerCore and ConnectionBase).

The commands run through run_hot, the entry point the command table uses
(engine/net/hot.pxi), on a fake clock: no sockets, no sleeps."""

from __future__ import annotations

import pytest

from disque_py.base.clock import FakeClock
from disque_py.base.errors import DisqueError
from disque_py.base.scantable import ScanTable
from disque_py.engine import (ACKED, AOF_GONE, AOF_JOB, HOT_COMMANDS, QUEUED, RECORD_OK,
                              ConnectionBase, HookNotWired, NodeCore, NodeHooks, ServerCore,
                              SessionCore, aof_record_at, run_hot)

NODE_ID = b"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


@pytest.fixture
def node() -> NodeCore:
    core = NodeCore()
    core.init_core(NODE_ID, FakeClock(seed=3), b"node-core-tests", ScanTable(16))
    return core


def run(node: NodeCore, *argv) -> bytes:
    """One hot command, as the command table runs it: its encoded reply."""
    words = [arg if isinstance(arg, bytes) else str(arg).encode() for arg in argv]
    try:
        reply = run_hot(HOT_COMMANDS[words[0].decode().lower()], node, SessionCore(), words)
    except DisqueError as error:        # the command table answers these (error.wire())
        return error.wire()
    assert isinstance(reply, bytes), f"{argv[0]} parked"
    return reply


def added(node: NodeCore, queue: bytes = b"q", body: bytes = b"body", *options) -> bytes:
    reply = run(node, "ADDJOB", queue, body, 0, *options)
    assert reply.startswith(b"+D-")
    return reply[1:-2]


# ------------------------------------------------------------------ a lone node

def test_addjob_getjob_ackjob_on_a_lone_node(node):
    job_id = added(node)
    assert node.lookup(job_id).state == QUEUED
    assert run(node, "QLEN", "q") == b":1\r\n"
    assert run(node, "GETJOB", "NOHANG", "FROM", "q") == \
        b"*1\r\n*3\r\n$1\r\nq\r\n$40\r\n" + job_id + b"\r\n$4\r\nbody\r\n"
    assert run(node, "ACKJOB", job_id) == b":1\r\n"
    assert node.lookup(job_id) is None          # the only copy: acked and gone at once


def test_nack_queues_a_job_again_and_counts_it(node):
    job_id = added(node)
    run(node, "GETJOB", "FROM", "q")
    assert run(node, "NACK", job_id) == b":1\r\n"
    job = node.lookup(job_id)
    assert job.state == QUEUED and job.nacks == 1


def test_errors_are_disques(node):
    assert run(node, "ADDJOB", "q", "body", 0, "REPLICATE", 2) == \
        b"-NOREPL Not enough reachable nodes for the requested replication level\r\n"
    assert run(node, "ACKJOB", "nope") == b"-BADID Invalid Job ID format.\r\n"
    assert run(node, "GETJOB", "NOHANG") == b"-ERR syntax error\r\n"


def taken_records(node: NodeCore) -> list[tuple[int, bytes]]:
    """(kind, job ID) of each record the node's AofLog gives, in order."""
    data, pos, found = node.aof.take(), 0, []
    while pos < len(data):
        status, kind, payload, pos = aof_record_at(data, pos, len(data))
        assert status == RECORD_OK, payload
        found.append((kind, payload[:40]))
    return found


def test_the_aof_records_are_noted_in_the_log_and_taken_once(node):
    run(node, "ADDJOB", "q", "off", 0)
    assert not node.aof.has_records             # the AOF off: nothing noted
    node.aof_enabled = True
    job_id = added(node)
    run(node, "ACKJOB", job_id)
    assert node.aof.has_records and not node.take_effects()
    assert taken_records(node) == [(AOF_JOB, job_id), (AOF_GONE, job_id)]
    assert not node.aof.has_records and node.aof.take() == b""


def test_a_reply_waits_for_the_batch_of_the_records_noted_before_it(node):
    log = node.aof
    assert log.reply_gen() == 0                 # nothing noted: nothing to wait for
    node.aof_enabled = True
    added(node)
    assert log.reply_gen() == 1                 # this turn's records: the next batch
    log.take()
    log.written_gen = 1                         # written (the writer's part)...
    assert log.reply_gen() == 1                 # ...not released yet (appendfsync always)
    log.released_gen = 1
    assert log.reply_gen() == 0
    added(node)
    log.drop()                                  # the AOF turned off: the records go
    assert not log.has_records and log.reply_gen() == 0 and log.take() == b""


# ------------------------------------------------------------------ the hooks

def test_a_path_that_needs_the_node_layer_names_the_missing_hook(node):
    with pytest.raises(HookNotWired, match="block"):
        run(node, "GETJOB", "TIMEOUT", 100, "FROM", "empty")


def test_every_hook_is_given_when_the_hooks_are_built():
    slots = dict.fromkeys(NodeHooks.slot_names(), print)
    NodeHooks(**slots)
    missing = dict(slots)
    del missing["end_promise_round"]
    with pytest.raises(TypeError, match="end_promise_round"):
        NodeHooks(**missing)
    with pytest.raises(TypeError, match="no_such_hook"):
        NodeHooks(**slots, no_such_hook=print)


def test_the_node_calls_its_hooks(node):
    called = []
    slots = {name: (lambda *args, name=name: called.append(name))
             for name in NodeHooks.slot_names()}
    node.hooks = NodeHooks(**slots)
    node.has_peers = True
    run(node, "GETJOB", "NOHANG", "FROM", "empty")     # no job here: ask the peers
    assert called == ["need_jobs"]


def test_a_server_layer_subclass_must_override_every_hook():
    class Incomplete(ConnectionBase):
        def run_commands(self, commands, started, replies):
            pass

    with pytest.raises(TypeError, match="park"):
        Incomplete()

    class NoFlush(ServerCore):
        def aof_accepts(self):
            return True

        def command_took(self, command, argv, seconds):
            pass

    with pytest.raises(TypeError, match="schedule_flush"):
        NoFlush()


def test_acked_is_a_state_every_part_agrees_on(node):
    job_id = added(node, b"q", b"body", "REPLICATE", 1)
    node.acknowledge(node.lookup(job_id))
    assert node.lookup(job_id).state == ACKED
