"""Cluster membership with real processes: joining by a chain of CLUSTER
MEETs, IDs, CLUSTER NODES / INFO / HELLO views, failure detection after
kill -9 and recovery on restart (from nodes.conf, without a new MEET),
RESET, FORGET, LEAVING, SAVECONFIG, CONFIG SET cluster-node-timeout, a
garbage bus connection, and CLUSTER's error replies (Disque's exact text).

Nodes run with cluster-node-timeout 1000 ms, so failure detection is quick;
every deadline is twice that plus a margin for a loaded machine.
"""

from __future__ import annotations

import random
import re
import socket
import time

import pytest

from disque_py.formats import bus as msg
from tests.cluster.harness import (MARGIN_S, NODE_LINE, call, cluster_info, cluster_nodes,
                                   fail_deadline_s, hello, myid, nodes_by_id, poll)
from tests.support import HOST

HEX40 = re.compile(r"[0-9a-f]{40}\Z")


@pytest.fixture(scope="module")
def trio(make_cluster):
    return make_cluster(3)


@pytest.fixture(scope="module")
def five(make_cluster):
    return make_cluster(5)


def raw_reply(proc, *args) -> bytes:
    client = proc.raw()
    try:
        return client.call(*args)
    finally:
        client.close()


def messages_received(proc) -> int:
    return int(cluster_info(proc)["cluster_stats_messages_received"])


def assert_mesh_views(cluster) -> None:
    count = len(cluster)
    for proc in cluster:
        info = cluster_info(proc)
        assert info["cluster_state"] == "ok"
        assert info["cluster_known_nodes"] == str(count)
        assert info["cluster_reachable_nodes"] == str(count - 1)
        assert info["cluster_size"] == str(count)


# ------------------------------------------------------------------ joining

def test_a_chain_of_meets_makes_a_full_mesh_of_3(trio):
    assert trio.mesh_seconds < 8
    assert_mesh_views(trio)


def test_a_chain_of_meets_makes_a_full_mesh_of_5(five):
    assert five.mesh_seconds < 8
    assert_mesh_views(five)
    for proc in five:
        assert {line.id for line in cluster_nodes(proc)} == set(five.ids)


def test_node_ids_are_40_hex_and_differ_across_nodes(five):
    assert len(set(five.ids)) == 5
    for proc, node_id in zip(five, five.ids):
        assert HEX40.match(node_id)
        version, hello_id, _ = hello(proc)
        assert hello_id == node_id
        (mine,) = [line for line in cluster_nodes(proc) if "myself" in line.flags]
        assert mine.id == node_id


def test_cluster_nodes_lines_follow_disques_format(five):
    five.wait_full_mesh()
    for proc, node_id in zip(five, five.ids):
        text = call(proc, "CLUSTER", "NODES").decode()
        lines = text.split("\n")
        assert lines[-1] == "" and len(lines) == 6, repr(text)
        for line in lines[:-1]:
            assert NODE_LINE.match(line), line
        by_id = nodes_by_id(proc)
        mine = by_id[node_id]
        assert mine.flags == {"myself"}
        assert (mine.ip, mine.port, mine.link) == (HOST, proc.port, "connected")
        assert (mine.ping_sent, mine.pong_received) == (0, 0)
        for other, other_id in zip(five, five.ids):
            if other is proc:
                continue
            line = by_id[other_id]
            assert line.flags == {"noflags"}
            assert (line.ip, line.port, line.link) == (HOST, other.port, "connected")
            assert line.pong_received > 0


def test_hello_lists_every_node_with_priority_1(five):
    five.wait_full_mesh()
    for proc, node_id in zip(five, five.ids):
        version, hello_id, nodes = hello(proc)
        assert (version, hello_id) == (1, node_id)
        assert nodes == {nid: (HOST, other.port, 1) for nid, other in zip(five.ids, five)}


# ------------------------------------------------------------------ LEAVING

def test_cluster_leaving_yes_propagates_to_every_node(five):
    five.wait_full_mesh()
    leaver, leaver_id = five[0], five.ids[0]
    others = five.procs[1:]
    try:
        assert raw_reply(leaver, "CLUSTER", "LEAVING") == b"+no\r\n"
        assert raw_reply(leaver, "CLUSTER", "LEAVING", "yes") == b"+OK\r\n"
        assert raw_reply(leaver, "CLUSTER", "LEAVING") == b"+yes\r\n"
        assert nodes_by_id(leaver)[leaver_id].flags == {"myself", "leaving"}
        poll(lambda: all("leaving" in five.flags_seen(proc, leaver_id) for proc in others),
             fail_deadline_s(), "every node to flag the leaver 'leaving'")
        for proc in others:
            assert hello(proc)[2][leaver_id][2] == 100
            assert cluster_info(proc)["cluster_size"] == "5"
        # A leaving node is no longer a target for replication.
        poll(lambda: all(cluster_info(proc)["cluster_reachable_nodes"] == "3"
                         for proc in others), fail_deadline_s(),
             "the leaver out of every node's reachable nodes")
    finally:
        assert raw_reply(leaver, "CLUSTER", "LEAVING", "no") == b"+OK\r\n"
    assert raw_reply(leaver, "CLUSTER", "LEAVING") == b"+no\r\n"
    poll(lambda: all(five.flags_seen(proc, leaver_id) == {"noflags"} for proc in others),
         fail_deadline_s(), "every node to clear the leaver's 'leaving' flag")
    for proc in others:
        assert hello(proc)[2][leaver_id][2] == 1


# ------------------------------------------------------------------ failure and restart

@pytest.fixture(scope="module")
def killed_pair(five):
    """Nodes 3 and 4 of the five, killed with SIGKILL (and when)."""
    five.wait_full_mesh()
    for proc in five.procs[3:]:
        proc.kill()
    return time.monotonic()


@pytest.fixture(scope="module")
def restarted_pair(five, killed_pair):
    """Nodes 3 and 4 started again on their directories and ports."""
    survivors, dead = five.procs[:3], five.ids[3:]
    poll(lambda: all(five.flags_seen(proc, node_id) == {"fail"}
                     for proc in survivors for node_id in dead),
         fail_deadline_s() + MARGIN_S, "the killed nodes flagged fail")
    for proc in five.procs[3:]:
        proc.start(wait=False)
    for proc in five.procs[3:]:
        proc.wait_ready()
    return time.monotonic()


def test_two_killed_nodes_are_flagged_fail_on_every_other_node_within_2x_timeout(
        five, killed_pair):
    survivors, dead = five.procs[:3], five.ids[3:]
    poll(lambda: all(five.flags_seen(proc, node_id) == {"fail"}
                     for proc in survivors for node_id in dead),
         fail_deadline_s(), "the killed nodes flagged fail on every survivor")
    assert time.monotonic() - killed_pair <= fail_deadline_s()
    for proc in survivors:
        info = cluster_info(proc)
        assert info["cluster_known_nodes"] == "5"
        assert info["cluster_size"] == "5"
        assert info["cluster_reachable_nodes"] == "2"
        lines = nodes_by_id(proc)
        for node_id in dead:
            assert lines[node_id].link == "disconnected"


def test_hello_gives_failed_nodes_a_worse_priority(five, killed_pair):
    survivors = five.procs[:3]
    dead = set(five.ids[3:])
    poll(lambda: all(hello(proc)[2][node_id][2] == 100
                     for proc in survivors for node_id in dead),
         fail_deadline_s(), "HELLO priority 100 for the killed nodes")
    for proc in survivors:
        for node_id, (_, _, priority) in hello(proc)[2].items():
            assert priority == (100 if node_id in dead else 1)


def test_restarted_nodes_clear_the_fail_flag_and_rejoin_without_a_meet(five, restarted_pair):
    # No CLUSTER MEET here: the restarted nodes know their peers from
    # nodes.conf and the survivors clear FAIL once they answer.
    five.wait_full_mesh(timeout=fail_deadline_s() + MARGIN_S)
    for proc in five:
        assert all(priority == 1 for _, _, priority in hello(proc)[2].values())


def test_a_restarted_node_keeps_its_id(five, restarted_pair):
    assert [myid(proc) for proc in five.procs[3:]] == five.ids[3:]
    for proc, node_id in zip(five.procs[3:], five.ids[3:]):
        conf = (proc.dir / "nodes.conf").read_text()
        assert f"{node_id} " in conf


# ------------------------------------------------------------------ RESET and FORGET

def test_cluster_reset_hard_gives_a_new_id_and_forgets_peers(fresh_cluster):
    cluster = fresh_cluster(3)
    node, old_id = cluster[0], cluster.ids[0]
    assert call(node, "CLUSTER", "RESET", "HARD") == b"OK"
    new_id = myid(node)
    assert HEX40.match(new_id) and new_id != old_id
    info = cluster_info(node)
    assert (info["cluster_known_nodes"], info["cluster_size"],
            info["cluster_reachable_nodes"]) == ("1", "1", "0")
    (line,) = cluster_nodes(node)
    assert (line.id, line.flags) == (new_id, {"myself"})
    assert hello(node)[1] == new_id
    poll(lambda: new_id in (cluster.nodes_conf(0).read_text()), 5, "nodes.conf with the new ID")
    assert old_id not in cluster.nodes_conf(0).read_text()
    # The peers still ping the old ID and get answers from a new one: they
    # mark the old entry noaddr; their pings (not MEETs) never re-add them.
    poll(lambda: all("noaddr" in cluster.flags_seen(peer, old_id) for peer in cluster.procs[1:]),
         fail_deadline_s(), "peers to flag the reset node's old ID noaddr")
    assert cluster_info(node)["cluster_known_nodes"] == "1"


def test_cluster_reset_soft_keeps_the_id_and_forgets_peers(fresh_cluster):
    cluster = fresh_cluster(3)
    node, node_id = cluster[0], cluster.ids[0]
    assert call(node, "CLUSTER", "RESET", "SOFT") == b"OK"
    assert myid(node) == node_id
    (line,) = cluster_nodes(node)
    assert (line.id, line.flags) == (node_id, {"myself"})
    # Peers keep pinging it; a PING from an unknown node adds nobody.
    before = messages_received(node)
    poll(lambda: messages_received(node) >= before + 6, fail_deadline_s(),
         "more pings from the peers")
    assert cluster_info(node)["cluster_known_nodes"] == "1"
    assert call(node, "CLUSTER", "RESET") == b"OK"           # soft is the default
    assert myid(node) == node_id


def test_cluster_forget_removes_a_node_and_gossip_does_not_bring_it_back(fresh_cluster):
    cluster = fresh_cluster(3)
    node, forgotten_id = cluster[0], cluster.ids[2]
    assert call(node, "CLUSTER", "FORGET", forgotten_id) == b"OK"
    assert forgotten_id not in nodes_by_id(node)
    assert cluster_info(node)["cluster_known_nodes"] == "2"
    # Node 1 gossips about node 2 in every heartbeat and node 2 keeps
    # pinging us: for a good many messages the forgotten node stays out.
    before = messages_received(node)

    def many_messages_and_still_forgotten():
        lines = cluster_nodes(node)
        assert forgotten_id not in {line.id for line in lines}
        assert not any(line.port == cluster[2].port for line in lines), lines
        return messages_received(node) >= before + 12

    poll(many_messages_and_still_forgotten, 3 * fail_deadline_s(), "a dozen bus messages")
    assert cluster_info(node)["cluster_known_nodes"] == "2"
    assert forgotten_id in nodes_by_id(cluster[1])


def test_cluster_forget_of_an_unknown_node_is_an_error(trio):
    assert raw_reply(trio[0], "CLUSTER", "FORGET", "a" * 40) == \
        b"-ERR Unknown node " + b"a" * 40 + b"\r\n"


# ------------------------------------------------------------------ SAVECONFIG

def test_cluster_saveconfig_writes_nodes_conf(trio):
    trio.wait_full_mesh()
    path = trio.nodes_conf(1)
    path.unlink()
    assert call(trio[1], "CLUSTER", "SAVECONFIG") == b"OK"
    lines = path.read_text().splitlines()
    # One line per node, then this node's start epoch (node/healing.py).
    node_lines = [line for line in lines if not line.startswith("vars ")]
    assert len(node_lines) == 3
    assert [line.split()[:2] for line in lines if line.startswith("vars ")] == \
        [["vars", "start-epoch"]]
    by_id = {}
    for line in node_lines:
        match = NODE_LINE.match(line)
        assert match, line
        by_id[match["id"]] = match
    assert set(by_id) == set(trio.ids)
    assert by_id[trio.ids[1]]["flags"] == "myself"
    for proc, node_id in zip(trio, trio.ids):
        assert (by_id[node_id]["ip"], int(by_id[node_id]["port"])) == (HOST, proc.port)


def test_a_failed_nodes_conf_save_is_shown_retried_and_logged_once(fresh_server):
    """A full disk under nodes.conf (DEBUG NODES-CONF-FAULT fails the next
    saves once their temporary file exists): the node keeps serving, leaves
    no temporary file, says so in INFO and once in its log, CLUSTER
    SAVECONFIG answers Disque's error, and the cron saves the change once
    the disk works again."""
    node = fresh_server
    path = node.dir / "nodes.conf"
    before = path.read_text()
    failures = 5     # the change's save, SAVECONFIG's, then three cron retries
    assert call(node, "DEBUG", "NODES-CONF-FAULT", "enospc", failures) == b"OK"
    assert call(node, "CLUSTER", "LEAVING", "yes") == b"OK"
    poll(lambda: cluster_info(node)["cluster_config_save_ok"] == "0", 5, "the failed save")
    assert cluster_info(node)["cluster_config_save_error"] == "No space left on device"
    assert "cluster_config_save_ok:0" in call(node, "INFO", "cluster").decode()
    assert raw_reply(node, "CLUSTER", "SAVECONFIG") == \
        b"-ERR error saving the cluster node config: No space left on device\r\n"
    assert path.read_text() == before
    assert sorted(p.name for p in node.dir.iterdir() if p.name.startswith("nodes.conf")) == \
        ["nodes.conf"], "a temporary file was left behind"
    assert call(node, "PING") == b"PONG"
    poll(lambda: cluster_info(node)["cluster_config_save_ok"] == "1", 10 + MARGIN_S,
         "the cron to save once the faults are used up")
    assert cluster_info(node)["cluster_config_save_error"] == ""
    myself = next(line for line in path.read_text().splitlines() if "myself" in line)
    assert "leaving" in myself.split()[2], myself
    log = node.log_text()
    assert log.count("Cannot save the cluster config") == 1, log
    assert log.count("Cluster config saved again") == 1, log
    assert node.alive()


# ------------------------------------------------------------------ CONFIG SET

def test_config_set_cluster_node_timeout_takes_effect_at_once(fresh_cluster):
    slow_ms, fast_ms = 30_000, 500
    cluster = fresh_cluster(3, node_timeout_ms=slow_ms)
    for proc in cluster:
        assert call(proc, "CONFIG", "SET", "cluster-node-timeout", str(fast_ms)) == b"OK"
        assert call(proc, "CONFIG", "GET", "cluster-node-timeout") == \
            [b"cluster-node-timeout", str(fast_ms).encode()]
    cluster[2].kill()
    killed = time.monotonic()
    victim = cluster.ids[2]
    # With the old 30 s timeout nothing would be flagged for 30 s or more.
    poll(lambda: all(cluster.flags_seen(proc, victim) == {"fail"} for proc in cluster.procs[:2]),
         fail_deadline_s(fast_ms), "fail flagged under the new, shorter timeout")
    assert time.monotonic() - killed < slow_ms / 1000


# ------------------------------------------------------------------ a garbage bus connection

def _framed(payload: bytes) -> bytes:
    return msg.LENGTH.pack(len(payload)) + payload


def _garbage_frames() -> dict[str, bytes]:
    rng = random.Random(20240611)
    sender = b"0" * 40
    good_header = msg.HEADER.pack(msg.SIGNATURE, msg.PING, 0, 7711, 0, sender)
    random_payload = bytes(rng.randrange(256) for _ in range(300))
    return {
        "random-bytes": b"\xff\xfe" + bytes(rng.randrange(256) for _ in range(500)),
        "oversized-length": msg.LENGTH.pack(msg.MAX_FRAME + 1) + b"x" * 64,
        "undersized-length": msg.LENGTH.pack(3) + b"abc",
        "wrong-signature": _framed(msg.HEADER.pack(b"RCmb", msg.PING, 0, 7711, 0, sender)
                                   + b"\x00\x00"),
        "random-framed-payload": _framed(b"XX" + random_payload),
        "unknown-type": _framed(msg.HEADER.pack(msg.SIGNATURE, 200, 0, 7711, 0, sender)),
        "bad-sender-id": _framed(msg.HEADER.pack(msg.SIGNATURE, msg.PING, 0, 7711, 0,
                                                 b"Z" * 40) + b"\x00\x00"),
        "truncated-gossip": _framed(good_header + b"\x00\x05" + b"1" * 20),
    }


GARBAGE = _garbage_frames()


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("name", list(GARBAGE))
def test_a_garbage_bus_connection_is_closed_and_the_node_keeps_working(trio, name):
    trio.wait_full_mesh()
    node = trio[0]
    with socket.create_connection((HOST, trio.bus_port(0)), timeout=5) as sock:
        sock.sendall(GARBAGE[name])
        assert _closed_by_peer(sock, 5.0), f"{name}: the bus kept the connection open"
    assert call(node, "PING") == b"PONG"
    before = messages_received(node)
    poll(lambda: messages_received(node) >= before + 4, fail_deadline_s(),
         "the node to keep exchanging messages with its peers")
    trio.wait_full_mesh(timeout=fail_deadline_s())


def test_a_valid_frame_from_a_stranger_gets_a_pong_and_adds_nobody(trio):
    trio.wait_full_mesh()
    stranger = b"1" * 40
    ping = msg.encode(msg.Header(msg.PING, stranger, 7799, 0), msg.Heartbeat())
    with socket.create_connection((HOST, trio.bus_port(0)), timeout=5) as sock:
        sock.sendall(ping)
        data = b""
        while len(data) < 4 or len(data) < 4 + msg.frame_length(data[:4]):
            chunk = sock.recv(4096)
            assert chunk, "the node closed the link instead of answering PING"
            data += chunk
    header, body = msg.decode(data[4:4 + msg.frame_length(data[:4])])
    assert header.type == msg.PONG
    assert header.sender.decode() == trio.ids[0]
    assert stranger.decode() not in nodes_by_id(trio[0])


# ------------------------------------------------------------------ error replies

ERRORS = [
    (("CLUSTER", "FOO"), b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER", "NODES", "x"), b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER", "MEET", HOST), b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER", "RESET", "a", "b"), b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER", "FORGET"), b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER", "MYID", "x"), b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER", "LEAVING", "yes", "no"),
     b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n"),
    (("CLUSTER",), b"-ERR wrong number of arguments for 'cluster' command\r\n"),
    (("CLUSTER", "MEET", HOST, "abc"), b"-ERR Invalid TCP port specified: abc\r\n"),
    (("CLUSTER", "MEET", HOST, "12abc"), b"-ERR Invalid TCP port specified: 12abc\r\n"),
    (("CLUSTER", "MEET", HOST, "99999999999999999999"),
     b"-ERR Invalid TCP port specified: 99999999999999999999\r\n"),
    (("CLUSTER", "MEET", HOST, "-1"), b"-ERR Invalid node address specified: 127.0.0.1:-1\r\n"),
    (("CLUSTER", "MEET", HOST, "0"), b"-ERR Invalid node address specified: 127.0.0.1:0\r\n"),
    (("CLUSTER", "MEET", HOST, "55536"),
     b"-ERR Invalid node address specified: 127.0.0.1:55536\r\n"),
    (("CLUSTER", "MEET", "not-an-ip", "7711"),
     b"-ERR Invalid node address specified: not-an-ip:7711\r\n"),
    (("CLUSTER", "MEET", "999.1.1.1", "7711"),
     b"-ERR Invalid node address specified: 999.1.1.1:7711\r\n"),
    (("CLUSTER", "MEET", "", "7711"), b"-ERR Invalid node address specified: :7711\r\n"),
    (("CLUSTER", "FORGET", "abc"), b"-ERR Invalid node identifier\r\n"),
    (("CLUSTER", "FORGET", "A" * 40), b"-ERR Unknown node " + b"A" * 40 + b"\r\n"),
    (("CLUSTER", "LEAVING", "maybe"),
     b"-ERR Wrong argument for CLUSTER LEAVING. Use 'yes' or 'no'\r\n"),
    (("CLUSTER", "RESET", "medium"), b"-ERR syntax error\r\n"),
]


@pytest.mark.parametrize("args, expected", ERRORS, ids=lambda value: (
    " ".join(value) if isinstance(value, tuple) else None))
def test_cluster_error_replies_match_disque(trio, args, expected):
    assert raw_reply(trio[0], *args) == expected


def test_cluster_forget_myself_is_refused_with_disques_text(trio):
    assert raw_reply(trio[0], "CLUSTER", "FORGET", trio.ids[0]) == \
        b"-ERR I tried hard but I can't forget myself...\r\n"


def test_cluster_errors_leave_the_node_table_unchanged(trio):
    trio.wait_full_mesh()
    before = {line.id for line in cluster_nodes(trio[0])}
    for args, _ in ERRORS:
        raw_reply(trio[0], *args)
    assert {line.id for line in cluster_nodes(trio[0])} == before
    assert raw_reply(trio[0], "CLUSTER", "LEAVING") == b"+no\r\n"
