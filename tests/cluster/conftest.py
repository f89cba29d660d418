"""Fixtures for multi-node scenarios: clusters of real processes on
loopback, joined by a chain of CLUSTER MEETs, killed with SIGKILL at the end
of their scope (and the nodes' logs shown if the mesh never forms)."""

from __future__ import annotations

import pytest

from tests.cluster.harness import Cluster


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
