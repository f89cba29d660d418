"""Moving a Disque 1.0-rc1 node to disque-py: Disque's upgrade path.

On the Disque node: CONFIG SET aof-enqueue-jobs-once yes, CONFIG REWRITE,
SHUTDOWN REWRITE-AOF. Then disque-py starts on the same config file and
directory: same node ID (nodes.conf), the same jobs with their queues,
counters and states, and the option turned off. With the AOF on, the file
is rewritten in disque-py's format at once and Disque's is kept beside it.

The Disque files are made by tests/persistence/disque_files.py (checked
byte for byte against files the real Disque wrote, in
tests/unit/test_disque_aof.py) with expire times from now.
"""

from __future__ import annotations

import time

from disque_py.persistence.aof_format import HEADER
from tests.persistence import disque_files
from tests.persistence.disque_files import ACTIVE, QUEUED, DisqueJob, new_job_id
from tests.persistence.helpers import aof_path, check_aof, refused_start, show_all
from tests.support import free_port, wait_for

NODE_ID = "ac62de303955b22bd7d90fc22bb35203e032b33a"
PEER_ID = "9e95b1e516d570ed993304123f6c5d079a1c2763"
BACKUP_SUFFIX = ".disque-1.0"
TTL_S = 3600


def _job(queue: bytes, body: bytes, retry: int = 300, holders=(NODE_ID,),
         **fields) -> DisqueJob:
    now = time.time()
    return DisqueJob(id=new_job_id(NODE_ID, TTL_S, retry), queue=queue, body=body,
                     etime=int(now) + TTL_S, ctime=int(now * 1000) * 1_000_000,
                     retry=retry, holders=[holder.encode() for holder in holders],
                     **fields)


def _disque_node(make_server, records: bytes, config: str):
    """A server whose directory holds what a Disque node left behind."""
    server = make_server(config_text=config)
    (server.dir / "nodes.conf").write_text(disque_files.nodes_conf_line(NODE_ID))
    aof_path(server).write_bytes(records)
    return server


def _states(server, jobs) -> dict[bytes, bytes | None]:
    shown = show_all(server, [job.id for job in jobs])
    return {job_id: None if fields is None else fields[b"state"]
            for job_id, fields in shown.items()}


def test_a_controlled_restart_of_disque_comes_back_as_disque_py(make_server):
    queued = [_job(b"q1", b"one"), _job(b"q1", b"at-most-once", retry=0),
              _job(b"q2", b"bin\x00\x01\xff", retry=120)]
    delivered = _job(b"q3", b"working", state=ACTIVE, nacks=1, deliveries=2)
    delayed = _job(b"q2", b"later", state=ACTIVE, delay=1800, flags=0)
    records = b"".join(disque_files.loadjob_record(job)
                       for job in [*queued, delivered, delayed])
    server = _disque_node(make_server, records, "appendonly yes\nappendfsync always\n"
                          "aof-enqueue-jobs-once yes\n").start()
    client = server.client()

    assert client.execute_command("CLUSTER", "MYID") == NODE_ID.encode()
    assert _states(server, queued) == {job.id: b"queued" for job in queued}
    assert _states(server, [delivered, delayed]) == {delivered.id: b"active",
                                                     delayed.id: b"active"}
    assert (client.execute_command("QLEN", "q1"), client.execute_command("QLEN", "q2"),
            client.execute_command("QLEN", "q3")) == (2, 1, 0)
    shown = show_all(server, [delivered.id, queued[2].id])
    assert shown[delivered.id][b"nacks"] == 1
    assert shown[delivered.id][b"additional-deliveries"] == 2
    assert shown[queued[2].id][b"body"] == b"bin\x00\x01\xff"
    assert shown[queued[2].id][b"retry"] == 120
    assert "aof-enqueue-jobs-once no" in server.config_path.read_text()

    # Disque's file is kept; the AOF is now ours, whole and valid.
    assert (server.dir / (aof_path(server).name + BACKUP_SUFFIX)).read_bytes() == records
    assert aof_path(server).read_bytes().startswith(HEADER)
    checked = check_aof(aof_path(server))
    assert checked.returncode == 0 and "AOF is valid" in checked.stdout, checked.stdout
    assert "written by Disque 1.0" in server.log_text()

    # From here it is an ordinary disque-py node: acks persist, crashes recover.
    assert client.execute_command("ACKJOB", queued[0].id) == 1
    server.kill()
    server.start()
    after = _states(server, [*queued, delivered])
    assert after[queued[0].id] is None
    assert after[queued[1].id] == b"active" and after[delivered.id] == b"active"


def test_the_live_aof_of_a_disque_node_loads_with_its_deletions(make_server):
    kept, acked = _job(b"q", b"kept"), _job(b"q", b"acked")
    records = b"".join([disque_files.loadjob_record(kept), disque_files.loadjob_record(acked),
                        disque_files.deljob_record(acked.id)])
    server = _disque_node(make_server, records, "appendonly yes\n").start()
    # Without aof-enqueue-jobs-once jobs come back active, as in Disque: the
    # retry timer queues them again.
    assert _states(server, [kept, acked]) == {kept.id: b"active", acked.id: None}
    assert server.client().execute_command("QLEN", "q") == 0


def test_an_in_memory_disque_node_upgrades_and_its_file_is_left_alone(make_server):
    job = _job(b"q", b"body")
    records = disque_files.loadjob_record(job)
    server = _disque_node(make_server, records, "appendonly no\n"
                          "aof-enqueue-jobs-once yes\n").start()
    assert _states(server, [job]) == {job.id: b"queued"}
    assert aof_path(server).read_bytes() == records
    assert not (server.dir / (aof_path(server).name + BACKUP_SUFFIX)).exists()


def test_a_disque_aof_cut_by_a_crash_loses_only_its_last_record(make_server):
    first, torn = _job(b"q", b"first"), _job(b"q", b"torn")
    whole = disque_files.loadjob_record(first)
    server = _disque_node(make_server, whole + disque_files.loadjob_record(torn)[:-9],
                          "appendonly yes\n").start()
    assert _states(server, [first, torn]) == {first.id: b"active", torn.id: None}
    assert "short read while loading the AOF" in server.log_text()


def test_a_corrupt_disque_aof_stops_the_start_at_its_offset(make_server):
    good = disque_files.loadjob_record(_job(b"q", b"good"))
    bad = disque_files.resp_array(b"LOADJOB", disque_files.serialize(_job(b"q", b"x"))[:-2])
    server = _disque_node(make_server, good + bad + good, "appendonly yes\n")
    assert refused_start(server) != 0
    assert f"at byte offset {len(good)}" in server.log_text() + server.stderr_text()
    assert not (server.dir / (aof_path(server).name + BACKUP_SUFFIX)).exists()


def test_a_disque_cluster_moved_node_by_node_meets_again_and_collects_acks(make_server):
    """Both nodes of a Disque cluster restarted as disque-py: they reconnect
    from nodes.conf, and an ACKJOB on one removes the copy on the other."""
    ports = {NODE_ID: free_port(), PEER_ID: free_port()}
    job = _job(b"q", b"replicated", holders=(NODE_ID, PEER_ID), repl=2)
    config = "appendonly yes\naof-enqueue-jobs-once yes\n"
    servers = {}
    for node_id, state in ((NODE_ID, QUEUED), (PEER_ID, ACTIVE)):
        copy = DisqueJob(**{**job.__dict__, "state": state})
        server = servers[node_id] = make_server(node_id[:8], port=ports[node_id],
                                                config_text=config)
        (server.dir / "nodes.conf").write_text(disque_files.cluster_nodes_conf(
            (node_id, ports[node_id]),
            [(other, port) for other, port in ports.items() if other != node_id]))
        aof_path(server).write_bytes(disque_files.loadjob_record(copy))
        server.start()
    origin = servers[NODE_ID].client()
    wait_for(lambda: _link_state(origin, PEER_ID) == b"connected",
             message="the two moved nodes to meet again")
    assert _states(servers[PEER_ID], [job]) == {job.id: b"active"}
    got = origin.execute_command("GETJOB", "NOHANG", "FROM", "q")
    assert got[0][1] == job.id
    assert origin.execute_command("ACKJOB", job.id) == 1
    wait_for(lambda: _states(servers[PEER_ID], [job]) == {job.id: None},
             message="the peer's copy to be garbage-collected after the ACK")


def _link_state(client, node_id: str) -> bytes | None:
    for line in client.execute_command("CLUSTER", "NODES").splitlines():
        if line.startswith(node_id.encode()):
            return line.split()[-1]
    return None
