"""Shared fixtures: real servers on free loopback ports.

`server` is one process per test module, flushed before each test (fast);
`fresh_server` is a new process per test, for tests that change config or
kill the process. `make_cluster` / `fresh_cluster` start several nodes on
loopback joined by a chain of CLUSTER MEETs, killed with SIGKILL at the end
of their scope (the nodes' logs shown if the mesh never forms). Both fail loudly, with the server log, if the server
cannot start: a missing install is a failure, never a skip.
"""

from __future__ import annotations

import os

import pytest

from tests.cluster.harness import Cluster
from tests.support import ServerProcess


@pytest.fixture(autouse=True)
def _working_directory_kept():
    """A test that leaves the process in another directory (Config's `dir`
    chdirs, as Disque's does) breaks every later one that starts a Python
    from the checkout (Spark's workers, `-m tests...`): it fails, here."""
    before = os.getcwd()
    yield
    after = os.getcwd()
    if after != before:
        os.chdir(before)
        pytest.fail(f"the test left the working directory in {after}: "
                    f"use monkeypatch.chdir before a config with `dir`")


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


def _joined(base_dir, count: int, **kwargs) -> Cluster:
    cluster = Cluster(base_dir, count, **kwargs)
    try:
        cluster.start()
        cluster.meet_chain()
    except BaseException as error:
        logs = cluster.logs()
        cluster.stop()
        raise AssertionError(f"cluster of {count} did not form: {error}\n{logs}") from error
    return cluster


@pytest.fixture(scope="module")
def make_cluster(tmp_path_factory):
    """Factory (module scope): make_cluster(count, **kwargs) -> joined Cluster."""
    made = []

    def make(count: int, **kwargs) -> Cluster:
        cluster = _joined(tmp_path_factory.mktemp("cluster"), count, **kwargs)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def fresh_cluster(tmp_path):
    """Factory (test scope): fresh_cluster(count, **kwargs) -> joined Cluster."""
    made = []

    def make(count: int, **kwargs) -> Cluster:
        cluster = _joined(tmp_path / f"cluster{len(made)}", count, **kwargs)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()
