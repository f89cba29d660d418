"""Shared fixtures: real servers on free loopback ports.

`server` is one process per test module, flushed before each test (fast);
`fresh_server` is a new process per test, for tests that change config or
kill the process. Both fail loudly, with the server log, if the server
cannot start: a missing install is a failure, never a skip.
"""

from __future__ import annotations

import pytest

from tests.support import ServerProcess


@pytest.fixture(scope="module")
def module_server(tmp_path_factory):
    proc = ServerProcess(tmp_path_factory.mktemp("disque")).start()
    yield proc
    proc.stop()


@pytest.fixture
def server(module_server):
    if not module_server.alive():
        module_server.start()
    module_server.client().execute_command("DEBUG", "FLUSHALL")
    yield module_server
    module_server._close_clients()


@pytest.fixture
def fresh_server(tmp_path):
    proc = ServerProcess(tmp_path / "node").start()
    yield proc
    proc.stop()


@pytest.fixture
def make_server(tmp_path):
    """Factory for servers with custom arguments or config text."""
    started = []

    def make(name: str = "node", **kwargs) -> ServerProcess:
        proc = ServerProcess(tmp_path / name, **kwargs)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        if proc.alive():
            proc.stop()
