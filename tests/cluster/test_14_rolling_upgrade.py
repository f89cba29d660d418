"""A rolling upgrade: one node of the previous release in a cluster of this
one keeps serving plain jobs, gets jobs with options as plain copies, and
is then replaced by this release in place.

The previous release is PREVIOUS_RELEASE (the commit before start epochs
and job options), checked out with `git worktree add` outside the repo and
compiled there; its node runs with that tree first on PYTHONPATH, so it
imports its own disque_py. Nothing new on the bus may reach it: it would
refuse the frame and drop the link, which the mesh checks would show.

PRE_DEDUP_RELEASE (the commit before ADDJOB ... DEDUP) reads the job
options block up to version 2 (PRIORITY): a job with a DEDUP key and a
PRIORITY reaches it as a v2 copy (a v3 block it would not parse, and the
copy would be missing), the mesh stays whole, and the nodes of this release
still deduplicate. Each release is built once per run, only when a test
asks for it.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.cluster.harness import MARGIN_S, Cluster, call, poll, show
from tests.support import ServerProcess

PREVIOUS_RELEASE = "c3fe348"      # before start epochs and job options
PRE_DEDUP_RELEASE = "61dfdcd"     # options block up to v2 (PRIORITY), no DEDUP
REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 10 + MARGIN_S
OPTION_FIELDS = ["backoff", "max-deliveries", "deadletter", "dead-reason", "dead-from",
                 "priority", "dedup-key", "dedup-until"]

pytestmark = pytest.mark.timeout(600)


class PreviousRelease(ServerProcess):
    """A node of the release built in `tree`, same directory and port."""

    def __init__(self, proc: ServerProcess, tree: Path) -> None:
        super().__init__(proc.dir, port=proc.port, args=proc.args)
        self.tree = tree

    def command_line(self) -> list[str]:
        return ["env", f"PYTHONPATH={self.tree}"] + super().command_line()


def built_release(tmp_path_factory, release: str):
    """A worktree of `release`, its engine compiled in place; removed after."""
    tree = tmp_path_factory.mktemp(f"release-{release}") / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree),
                    release], check=True, capture_output=True)
    try:
        build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"],
                               cwd=tree, capture_output=True, text=True)
        assert build.returncode == 0, f"building {release} failed:\n{build.stderr}"
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory):
    yield from built_release(tmp_path_factory, PREVIOUS_RELEASE)


@pytest.fixture(scope="module")
def pre_dedup_tree(tmp_path_factory):
    yield from built_release(tmp_path_factory, PRE_DEDUP_RELEASE)


@pytest.fixture
def make_mixed(tmp_path):
    """make_mixed(tree): three nodes meshed, node 2 of the release in `tree`."""
    made = []

    def make(tree: Path) -> Cluster:
        cluster = Cluster(tmp_path / f"mixed{len(made)}", 3)
        cluster.procs[2] = PreviousRelease(cluster.procs[2], tree)
        made.append(cluster)
        cluster.start()
        cluster.meet_chain()
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def mixed(make_mixed, previous_tree):
    return make_mixed(previous_tree)


@pytest.fixture
def mixed_pre_dedup(make_mixed, pre_dedup_tree):
    return make_mixed(pre_dedup_tree)


def info_field(proc, section: str, name: str) -> str | None:
    for line in call(proc, "INFO", section).decode().split("\r\n"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    return None


def plain_jobs_flow(cluster, queue: str) -> None:
    """A REPLICATE 3 job added on each node is on all three, delivered on
    the next node, and one ACKJOB removes every copy."""
    for index, proc in enumerate(cluster):
        job_id = call(proc, "ADDJOB", queue, f"body-{index}", 5000, "REPLICATE", 3)
        assert all(show(other, job_id) is not None for other in cluster)
        consumer = cluster[(index + 1) % 3]
        [[_, got, _]] = call(consumer, "GETJOB", "TIMEOUT", int(DEADLINE_S * 1000),
                             "FROM", queue)
        assert got == job_id
        assert call(consumer, "ACKJOB", job_id) == 1
        poll(lambda: all(show(other, job_id) is None for other in cluster), DEADLINE_S,
             f"job added on node {index} acked everywhere")


def test_a_node_of_the_previous_release_serves_plain_jobs_then_is_upgraded(mixed):
    old = mixed[2]
    assert info_field(old, "stats", "total_jobs_dead_lettered") is None      # old code
    assert info_field(mixed[0], "stats", "total_jobs_dead_lettered") == "0"
    queue = f"upgrade-{uuid.uuid4().hex[:12]}"
    plain_jobs_flow(mixed, queue)
    # A job with options reaches the old node as a plain copy; nothing breaks.
    job_id = call(mixed[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3, "MAXDELIVERIES", 3)
    assert list(show(mixed[1], job_id))[-len(OPTION_FIELDS):] == OPTION_FIELDS
    assert list(show(old, job_id))[-1] == "body"
    assert call(mixed[1], "ACKJOB", job_id) == 1
    poll(lambda: all(show(proc, job_id) is None for proc in mixed), DEADLINE_S,
         "the job with options acked everywhere")
    assert mixed.is_full_mesh()
    # The upgrade: the same node (ID from nodes.conf), this release.
    old.stop()
    new = ServerProcess(old.dir, port=old.port, args=old.args).start()
    mixed.procs[2] = new
    mixed.wait_full_mesh(timeout=30)
    assert info_field(new, "stats", "total_jobs_dead_lettered") == "0"
    plain_jobs_flow(mixed, queue)
    poll(lambda: all(info_field(proc, "cluster", "rereplicate_peers_known_epoch") == "2"
                     for proc in mixed), DEADLINE_S, "every node knows the others' epochs")
    job_id = call(mixed[0], "ADDJOB", queue, "body", 5000, "REPLICATE", 3, "MAXDELIVERIES", 3)
    assert list(show(new, job_id))[-len(OPTION_FIELDS):] == OPTION_FIELDS


def test_a_node_without_dedup_gets_v2_copies_and_the_others_still_deduplicate(
        mixed_pre_dedup):
    cluster, old = mixed_pre_dedup, mixed_pre_dedup[2]
    assert info_field(old, "memory", "dedup_keys") is None                   # old code
    assert info_field(cluster[0], "memory", "dedup_keys") == "0"
    queue, other = (f"upgrade-{uuid.uuid4().hex[:12]}" for _ in range(2))
    # A copy made by ADDJOB (REPLJOB) and one taken by a consumer on the old
    # node (YOURJOBS): both in the options block the old node reads.
    copied = call(cluster[0], "ADDJOB", queue, "copied", 5000, "REPLICATE", 3,
                  "PRIORITY", 7, "DEDUP", "k1")
    moved = call(cluster[1], "ADDJOB", other, "moved", 5000, "REPLICATE", 1,
                 "PRIORITY", 9, "DEDUP", "k2")
    [[_, got, _]] = call(old, "GETJOB", "TIMEOUT", int(DEADLINE_S * 1000), "FROM", other)
    assert got == moved
    for job_id, priority in ((copied, 7), (moved, 9)):
        fields = show(old, job_id)
        assert list(fields)[-len(OPTION_FIELDS) + 2:] == OPTION_FIELDS[:-2]   # v2: no key
        assert fields["priority"] == priority
    fields = show(cluster[1], copied)
    assert list(fields)[-len(OPTION_FIELDS):] == OPTION_FIELDS
    assert (fields["priority"], fields["dedup-key"]) == (7, b"k1")
    # The nodes of this release still answer the first ID and make no job.
    before = [info_field(proc, "jobs", "registered_jobs") for proc in cluster]
    for proc in cluster.procs[:2]:
        assert call(proc, "ADDJOB", queue, "copied", 5000, "REPLICATE", 3,
                    "PRIORITY", 7, "DEDUP", "k1") == copied
    assert call(cluster[1], "ADDJOB", other, "moved", 5000, "REPLICATE", 1,
                "PRIORITY", 9, "DEDUP", "k2") == moved
    assert [info_field(proc, "jobs", "registered_jobs") for proc in cluster] == before
    # Nobody dropped a link over a frame it could not read.
    assert cluster.is_full_mesh()
    for proc in cluster:
        assert "Closing cluster bus link" not in proc.log_text()
