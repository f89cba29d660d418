"""A cluster whose bus runs over mutual TLS (`tls-cluster yes`), over real
processes: it forms, replicates, detects a killed node and queues its jobs
again elsewhere, with the cluster secret on top; a node whose certificate
another CA signed cannot join."""

from __future__ import annotations

import pytest

from tests.cluster.harness import (MARGIN_S, Cluster, call, cluster_info, fail_deadline_s,
                                   poll, show)
from tests.cluster.test_bus_security import SECRET, bus_counters
from disque_py.tools.pki import Pki
from tests.support import HOST, ServerProcess

NODE_TIMEOUT_MS = 1000


def tls_cluster_args(pki: Pki, leaf) -> list[str]:
    return ["--tls-cluster", "yes", "--tls-cert-file", str(leaf.cert),
            "--tls-key-file", str(leaf.key), "--tls-ca-cert-file", str(pki.ca)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_cluster(tmp_path, pki):
    leaf = pki.issue("cluster-node")
    cluster = Cluster(tmp_path, 3, NODE_TIMEOUT_MS,
                      tls_cluster_args(pki, leaf) + ["--cluster-secret", SECRET]).start()
    try:
        cluster.meet_chain()
        yield cluster
    finally:
        cluster.stop()


def test_a_tls_cluster_replicates_and_fails_over(tls_cluster):
    cluster = tls_cluster
    job_id = call(cluster[0], "ADDJOB", "q", "over tls", "5000", "REPLICATE", "2", "RETRY", "1")
    holders = [i for i in range(3) if show(cluster[i], job_id) is not None]
    assert 0 in holders and len(holders) == 2
    other = next(i for i in holders if i != 0)
    cluster[0].kill()
    poll(lambda: "fail" in cluster.flags_seen(cluster[other], cluster.ids[0]),
         fail_deadline_s(NODE_TIMEOUT_MS), "the killed node to be flagged FAIL")
    poll(lambda: show(cluster[other], job_id)["state"] == b"queued", 5 + MARGIN_S,
         "the surviving copy to be queued again")
    [[queue, got, body]] = call(cluster[other], "GETJOB", "FROM", "q")
    assert (got, body) == (job_id, b"over tls")
    assert all(count == 0 for count in bus_counters(cluster[other]).values())


def test_a_node_whose_certificate_another_ca_signed_cannot_join(tls_cluster, tmp_path):
    cluster = tls_cluster
    other_ca = Pki(tmp_path / "other-ca", name="other-ca")
    stranger = ServerProcess(tmp_path / "stranger", args=[
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--cluster-secret", SECRET,
        *tls_cluster_args(other_ca, other_ca.issue("stranger"))]).start()
    try:
        assert call(stranger, "CLUSTER", "MEET", HOST, cluster[0].port) == b"OK"
        poll(lambda: cluster_info(stranger)["cluster_known_nodes"] == "1",
             5 + MARGIN_S, "the stranger's handshake to be given up")
        assert all(cluster_info(proc)["cluster_size"] == "3" for proc in cluster)
    finally:
        stranger.stop()
