"""Which queues the dashboard marks as dead-letter queues: no sockets, steps driven by hand.

Jobs are made by dispatching ADDJOB as a client would; the walk that
learns the DEADLETTER names is stepped by the test, as the dashboard's
task steps it once a second. Over real sockets:
tests/integration/test_dashboard_http.py.
"""

from __future__ import annotations

import pytest

from disque_py.config import Config
from disque_py.server.state import ServerState
from disque_py.web.dashboard.deadletters import DeadLetterQueues

JOBS = 40


@pytest.fixture
def server(node):
    return ServerState(node, Config())


@pytest.fixture
def call(server):
    session = server.new_session()

    def run(*args):
        return server.commands.dispatch(server, session, [str(a).encode() for a in args])

    return run


def marked(dead_letters: DeadLetterQueues, node, name: bytes) -> bool:
    return dead_letters.is_dead_letter_queue(node.queues.get(name))


def walk_whole_table(dead_letters: DeadLetterQueues) -> int:
    """Steps until the walk is back at its start; how many it took."""
    steps = 1
    while not dead_letters.step():
        steps += 1
    return steps


def test_a_name_is_known_while_a_job_names_it_and_forgotten_a_walk_after(node, call):
    dead_letters = DeadLetterQueues(node)
    call("PAUSE", "failed", "in")                      # the queue exists, empty
    reply = call("ADDJOB", "work", "x", 0, "MAXDELIVERIES", 2, "DEADLETTER", "failed")
    job_id = reply[1:-2].decode()             # a hot command: its reply comes encoded
    assert not marked(dead_letters, node, b"failed")
    walk_whole_table(dead_letters)
    assert marked(dead_letters, node, b"failed")
    assert not marked(dead_letters, node, b"work")
    assert call("DELJOB", job_id) == 1
    walk_whole_table(dead_letters)
    assert not marked(dead_letters, node, b"failed")


def test_the_name_rule_needs_no_walk(node, call):
    dead_letters = DeadLetterQueues(node)
    for name in ("work:dead", "work:deadline"):
        call("PAUSE", name, "in")
    assert marked(dead_letters, node, b"work:dead")
    assert not marked(dead_letters, node, b"work:deadline")


def test_a_step_walks_a_bounded_slice_of_the_jobs(node, call):
    for i in range(JOBS):
        call("ADDJOB", f"q{i}", "x", 0, "MAXDELIVERIES", 2, "DEADLETTER", f"dlq{i}")
    dead_letters = DeadLetterQueues(node, step_jobs=5)
    assert walk_whole_table(dead_letters) > 1
    call("PAUSE", f"dlq{JOBS - 1}", "in")
    assert marked(dead_letters, node, f"dlq{JOBS - 1}".encode())
