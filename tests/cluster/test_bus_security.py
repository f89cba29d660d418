"""The cluster bus against strangers, over real processes.

With `cluster-secret` set, nodes holding it form a cluster and replicate;
a node without it, or with another one, cannot join; a stranger's frames
(a hand-made MEET, PING, FAIL, DELJOB, SETACK, YOURJOBS, PAUSE, NEEDJOBS
claiming the node's own ID, a member's or an unknown one) close its link
before anything is applied, and each is counted in INFO. A member that
did authenticate cannot speak for another node. Whatever the secret: a
frame claiming the receiver's own ID is dropped, a half frame announcing
600 MB is refused at once, queue names in NEEDJOBS/PAUSE are bounded, and
links nobody vouched for are capped. A running cluster turns the secret on
without losing its mesh (accept, then require).

The data plane's frames (REPLJOB, GOTJOB) are taken in C once a link is
trusted (engine/net/link.pxi): on that path too a forged sender is
counted in frames_refused (the link stays), a length past the largest
frame in frames_too_large (the link closed), a stranger's REPLJOB or
GOTJOB before its first heartbeat closes its link, and none of them
leaves a copy; a member's own REPLJOB makes one.
"""

from __future__ import annotations

import socket
import time

import pytest

from disque_py.cluster import auth
from disque_py.engine import ACTIVE, IdGenerator, new_job, serialize_job
from disque_py.formats import bus as msg
from tests.cluster.harness import (MARGIN_S, Cluster, call, cluster_info, hello, info, poll, show)
from tests.support import CLUSTER_PORT_OFFSET, HOST, ServerProcess

SECRET = "correct horse battery staple"
NODE_TIMEOUT_MS = 1000
UNKNOWN_ID = b"f" * 40
JOB_ID = b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1"


def bus_counters(proc) -> dict[str, int]:
    fields = info(proc, "cluster")
    return {name: int(fields[f"cluster_bus_{name}"]) for name in
            ("auth_failures", "frames_refused", "links_refused", "frames_too_large")}


def heartbeat(kind: int, sender: bytes, port: int = 7000) -> bytes:
    return msg.encode(msg.Header(kind, sender, port, 0), msg.Heartbeat([]))


def frame(kind: int, sender: bytes, body) -> bytes:
    return msg.encode(msg.Header(kind, sender, 7000, 0), body)


def job_from(producer_id: bytes, body: bytes = b"injected") -> tuple[bytes, bytes]:
    """A new job's ID, and its bytes as producer_id's REPLJOB carries them."""
    now_ms = int(time.time() * 1000)
    job_id = IdGenerator(producer_id).next_id(3600, 60)
    job = new_job(job_id, b"q", body, ACTIVE, 2, 0, 60, now_ms * 1_000_000,
                  now_ms // 1000 + 3600, (producer_id,))
    return job_id, serialize_job(job, now_ms // 1000)


def repljob(sender: bytes, job: bytes) -> bytes:
    return frame(msg.REPLJOB, sender, msg.Jobs([job]))


def gotjob(sender: bytes, job_id: bytes) -> bytes:
    return frame(msg.GOTJOB, sender, msg.JobIds([(job_id, 0)]))


def forged_frames(target_id: bytes, member_id: bytes, job: bytes) -> dict[str, bytes]:
    """What a stranger tries, by name (`job`: a job's bytes for REPLJOB)."""
    return {
        "PING as the target itself": heartbeat(msg.PING, target_id),
        "PING as a member": heartbeat(msg.PING, member_id),
        "PING as an unknown node": heartbeat(msg.PING, UNKNOWN_ID),
        "MEET": heartbeat(msg.MEET, UNKNOWN_ID),
        "FAIL of a member": frame(msg.FAIL, member_id, msg.Fail(member_id)),
        "DELJOB": frame(msg.DELJOB, member_id, msg.JobIds([(JOB_ID, 0)])),
        "SETACK": frame(msg.SETACK, member_id, msg.JobIds([(JOB_ID, 2)])),
        "PAUSE": frame(msg.PAUSE, member_id, msg.QueueOp(b"q", 3)),
        "NEEDJOBS": frame(msg.NEEDJOBS, member_id, msg.QueueOp(b"q", 10)),
        "REPLJOB": repljob(member_id, job),
        "GOTJOB": gotjob(member_id, JOB_ID),
    }


def send_and_wait_close(port: int, data: bytes, timeout: float = 5 + MARGIN_S) -> bool:
    """Write `data` to a bus port; True if the node closed the link."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except ConnectionError:
            return True
        return link_closed(sock, timeout)   # a PONG may come first


class Member:
    """The test holding the secret: a link that authenticates, then sends
    what it likes."""

    def __init__(self, bus_port: int, secret: str, claimed_id: bytes) -> None:
        self.sock = socket.create_connection((HOST, bus_port), timeout=10)
        connector = auth.Connector(secret.encode(), claimed_id, auth.MODE_REQUIRE)
        self.sock.sendall(connector.hello())
        challenge = self._read_frame()
        proof, authenticated = connector.on_challenge(challenge)
        assert authenticated
        self.sock.sendall(proof)

    def _read_frame(self) -> bytes:
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = self.sock.recv(4096)
            assert chunk, "the node closed the link"
            data += chunk
        return data[4:4 + int.from_bytes(data[:4], "big")]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def secured(tmp_path):
    """Two nodes holding the secret, joined; one job replicated on both."""
    cluster = Cluster(tmp_path, 2, NODE_TIMEOUT_MS, ["--cluster-secret", SECRET]).start()
    try:
        cluster.meet_chain()
        job_id = call(cluster[0], "ADDJOB", "q", "body", "5000", "REPLICATE", "2", "RETRY", "60")
        yield cluster, job_id
    finally:
        cluster.stop()


def test_nodes_holding_the_secret_form_a_cluster_and_replicate(secured):
    cluster, job_id = secured
    assert show(cluster[1], job_id)["state"] == b"active"
    assert info(cluster[0], "cluster")["cluster_bus_auth"] == "require"
    assert all(count == 0 for count in bus_counters(cluster[0]).values())


@pytest.mark.parametrize("their_secret", [None, "another secret"])
def test_a_node_without_the_secret_cannot_join(secured, tmp_path, their_secret):
    cluster, _ = secured
    args = ["--cluster-node-timeout", str(NODE_TIMEOUT_MS)]
    if their_secret:
        args += ["--cluster-secret", their_secret]
    stranger = ServerProcess(tmp_path / "stranger", args=args).start()
    try:
        assert call(stranger, "CLUSTER", "MEET", HOST, cluster[0].port) == b"OK"
        assert call(cluster[1], "CLUSTER", "MEET", HOST, stranger.port) == b"OK"
        poll(lambda: bus_counters(cluster[0])["auth_failures"] >= 1
             and bus_counters(cluster[1])["auth_failures"] >= 1, 5 + MARGIN_S,
             "both members to refuse the stranger")
        poll(lambda: cluster_info(cluster[1])["cluster_known_nodes"] == "2", 5 + MARGIN_S,
             "the member's handshake with the stranger to be dropped")
        for member in cluster:
            assert cluster_info(member)["cluster_size"] == "2"
            assert len(hello(member)[2]) == 2
        assert cluster_info(stranger)["cluster_size"] == "1"
    finally:
        stranger.stop()


def test_every_forged_frame_from_a_stranger_closes_its_link_and_changes_nothing(secured):
    cluster, job_id = secured
    target = cluster[0]
    bus_port = target.port + CLUSTER_PORT_OFFSET
    target_id, member_id = cluster.ids[0].encode(), cluster.ids[1].encode()
    before = bus_counters(target)
    injected_id, injected = job_from(member_id)
    forged = forged_frames(target_id, member_id, injected)
    for name, data in forged.items():
        assert send_and_wait_close(bus_port, data), f"{name}: the link stayed open"
    assert bus_counters(target)["auth_failures"] == before["auth_failures"] + len(forged)
    assert show(target, job_id)["state"] == b"queued"
    assert show(target, injected_id) is None
    assert call(target, "PAUSE", "q", "state") == b"none"
    assert cluster.is_full_mesh()
    assert cluster_info(target)["cluster_known_nodes"] == "2"


def test_a_member_cannot_speak_for_another_node_nor_for_the_receiver(secured):
    cluster, job_id = secured
    target = cluster[0]
    bus_port = target.port + CLUSTER_PORT_OFFSET
    target_id, member_id = cluster.ids[0].encode(), cluster.ids[1].encode()
    member = Member(bus_port, SECRET, member_id)
    try:
        before = bus_counters(target)["frames_refused"]
        member.sock.sendall(frame(msg.DELJOB, UNKNOWN_ID, msg.JobIds([(job_id, 0)]))
                            + frame(msg.PAUSE, target_id, msg.QueueOp(b"q", 3))
                            + frame(msg.FAIL, UNKNOWN_ID, msg.Fail(member_id)))
        poll(lambda: bus_counters(target)["frames_refused"] == before + 3, 5 + MARGIN_S,
             "the three forged frames to be counted")
        assert show(target, job_id) is not None
        assert call(target, "PAUSE", "q", "state") == b"none"
        assert "fail" not in cluster.flags_seen(target, cluster.ids[1])
    finally:
        member.close()


def test_on_the_fast_path_a_member_cannot_speak_for_another_node_nor_for_the_receiver(secured):
    cluster, _ = secured
    target = cluster[0]
    bus_port = target.port + CLUSTER_PORT_OFFSET
    target_id, member_id = cluster.ids[0].encode(), cluster.ids[1].encode()
    as_target, as_unknown, as_member, own = (job_from(member_id, body) for body in
                                             (b"as target", b"as unknown", b"as member", b"own"))
    member = Member(bus_port, SECRET, member_id)
    impostor = Member(bus_port, SECRET, UNKNOWN_ID)     # authenticated, as a node nobody knows
    try:
        before = bus_counters(target)
        member.sock.sendall(repljob(target_id, as_target[1]) + gotjob(target_id, as_target[0])
                            + repljob(UNKNOWN_ID, as_unknown[1]))
        impostor.sock.sendall(repljob(member_id, as_member[1]))
        poll(lambda: bus_counters(target)["frames_refused"] == before["frames_refused"] + 4,
             5 + MARGIN_S, "the four forged frames to be counted")
        member.sock.sendall(repljob(member_id, own[1]))
        poll(lambda: show(target, own[0]) is not None, 5 + MARGIN_S,
             "the member's own REPLJOB to make its copy")
        assert show(target, own[0])["state"] == b"active"
        for job_id, _ in (as_target, as_unknown, as_member):
            assert show(target, job_id) is None
        assert bus_counters(target) == {**before, "frames_refused": before["frames_refused"] + 4}
    finally:
        member.close()
        impostor.close()


def test_on_the_fast_path_a_frame_past_the_largest_is_refused_and_counted(secured):
    cluster, _ = secured
    target = cluster[0]
    member = Member(target.port + CLUSTER_PORT_OFFSET, SECRET, cluster.ids[1].encode())
    try:
        before = bus_counters(target)
        member.sock.sendall(msg.LENGTH.pack(msg.MAX_FRAME + 1) + b"DqP1" + b"x" * 1000)
        assert link_closed(member.sock)
        assert bus_counters(target) == {**before,
                                         "frames_too_large": before["frames_too_large"] + 1}
    finally:
        member.close()


def link_closed(sock: socket.socket, timeout: float = 5 + MARGIN_S) -> bool:
    """True once the node closed the link (whatever it sent before)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def test_a_half_frame_of_600_mb_is_refused_at_once(secured):
    cluster, _ = secured
    target = cluster[0]
    before = bus_counters(target)["frames_too_large"]
    huge = msg.LENGTH.pack(600 * 1024 * 1024) + b"DqP1" + b"x" * 60_000
    assert send_and_wait_close(target.port + CLUSTER_PORT_OFFSET, huge)
    assert bus_counters(target)["frames_too_large"] == before + 1
    assert target.rss_bytes() < 200 * 1024 * 1024


def test_links_nobody_vouched_for_are_capped(secured):
    cluster, _ = secured
    target = cluster[0]
    sockets = [socket.create_connection((HOST, target.port + CLUSTER_PORT_OFFSET))
               for _ in range(40)]
    try:
        poll(lambda: bus_counters(target)["links_refused"] >= 8, 5 + MARGIN_S,
             "links beyond the cap to be refused")
        assert call(target, "PING") == b"PONG"
        assert cluster.is_full_mesh()
    finally:
        for sock in sockets:
            sock.close()


# ------------------------------------------------------------ without a secret

@pytest.fixture
def plain(tmp_path):
    cluster = Cluster(tmp_path, 2, NODE_TIMEOUT_MS).start()
    try:
        cluster.meet_chain()
        yield cluster
    finally:
        cluster.stop()


def test_without_a_secret_a_frame_claiming_the_receivers_own_id_is_dropped(plain):
    target = plain[0]
    target_id = plain.ids[0].encode()
    before = bus_counters(target)["frames_refused"]
    with socket.create_connection((HOST, target.port + CLUSTER_PORT_OFFSET)) as sock:
        sock.sendall(heartbeat(msg.PING, UNKNOWN_ID) + heartbeat(msg.PING, target_id))
        poll(lambda: bus_counters(target)["frames_refused"] == before + 1, 5 + MARGIN_S,
             "the frame claiming the node's own ID to be counted")
    assert info(plain[0], "cluster")["cluster_bus_auth"] == "off"


@pytest.mark.parametrize("kind", ["REPLJOB", "GOTJOB"])
def test_a_strangers_job_frame_before_any_heartbeat_closes_its_link(plain, kind):
    target = plain[0]
    member_id = plain.ids[1].encode()
    job_id, job = job_from(member_id)
    data = repljob(member_id, job) if kind == "REPLJOB" else gotjob(member_id, job_id)
    before = bus_counters(target)
    assert send_and_wait_close(target.port + CLUSTER_PORT_OFFSET, data)
    assert show(target, job_id) is None
    assert bus_counters(target) == before


def test_without_a_secret_job_frames_claiming_the_receivers_own_id_are_dropped(plain):
    target = plain[0]
    target_id = plain.ids[0].encode()
    job_id, job = job_from(target_id)
    before = bus_counters(target)
    with socket.create_connection((HOST, target.port + CLUSTER_PORT_OFFSET)) as sock:
        sock.sendall(heartbeat(msg.PING, UNKNOWN_ID) + repljob(target_id, job)
                     + gotjob(target_id, job_id))
        poll(lambda: bus_counters(target)["frames_refused"] == before["frames_refused"] + 2,
             5 + MARGIN_S, "the two frames claiming the node's own ID to be counted")
        sock.sendall(msg.LENGTH.pack(msg.MAX_FRAME + 1))
        assert link_closed(sock)
    assert show(target, job_id) is None
    assert bus_counters(target) == {**before, "frames_refused": before["frames_refused"] + 2,
                                    "frames_too_large": before["frames_too_large"] + 1}


def test_a_length_below_the_shortest_frame_closes_a_trusted_link_uncounted(plain):
    target = plain[0]
    before = bus_counters(target)
    with socket.create_connection((HOST, target.port + CLUSTER_PORT_OFFSET)) as sock:
        sock.sendall(heartbeat(msg.PING, UNKNOWN_ID) + msg.LENGTH.pack(4) + b"DqP1")
        assert link_closed(sock)
    assert bus_counters(target) == before


def test_queue_names_in_needjobs_and_pause_are_bounded(plain):
    target = plain[0]
    long_name = b"q" * (1024 * 1024)
    assert send_and_wait_close(target.port + CLUSTER_PORT_OFFSET,
                               heartbeat(msg.PING, UNKNOWN_ID) +
                               frame(msg.PAUSE, UNKNOWN_ID, msg.QueueOp(long_name, 3)))
    assert call(target, "QSCAN", "BUSYLOOP")[1] == []


# ------------------------------------------------------------ turning it on

def test_a_running_cluster_turns_the_secret_on_without_losing_its_mesh(tmp_path):
    cluster = Cluster(tmp_path, 3, NODE_TIMEOUT_MS).start()
    try:
        cluster.meet_chain()
        for proc in cluster:                       # the window: send it, accept without
            assert call(proc, "CONFIG", "SET", "cluster-secret-mode", "accept") == b"OK"
            assert call(proc, "CONFIG", "SET", "cluster-secret", SECRET) == b"OK"
        cluster.wait_full_mesh(timeout=10 + MARGIN_S)
        for proc in cluster:                       # then require it
            assert call(proc, "CONFIG", "SET", "cluster-secret-mode", "require") == b"OK"
        cluster.wait_full_mesh(timeout=10 + MARGIN_S)
        job_id = call(cluster[0], "ADDJOB", "q", "x", "5000", "REPLICATE", "3")
        assert all(show(proc, job_id) is not None for proc in cluster)
        assert all(info(proc, "cluster")["cluster_bus_auth"] == "require" for proc in cluster)
    finally:
        cluster.stop()
