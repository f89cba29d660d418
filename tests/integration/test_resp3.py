"""RESP3 after HELLO 3, over real sockets.

Exact bytes first (nulls, maps, sets, verbatim text, and the way back with
HELLO 2); then redis-py as users run it, with each of its parsers: the
pure-Python ones (what an environment without hiredis gets: RESP3 by
default in redis-py 8, RESP2 with protocol=2) and hiredis's, under both
protocols. Every call has a short socket timeout and no retries, so a reply
the parser cannot read fails the test instead of hanging it.
"""

from __future__ import annotations

import pytest
import redis
from redis._parsers import _HiredisParser, _RESP2Parser, _RESP3Parser
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support import HOST, wait_for

UNKNOWN_ID = "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1"
CLIENT_TIMEOUT_S = 5
RESP3_NULL = b"_\r\n"


def _hello3(raw) -> bytes:
    reply = raw.call("HELLO", "3")
    assert reply.startswith(b"%7\r\n$6\r\nserver\r\n$6\r\ndisque\r\n")
    return reply


# ------------------------------------------------------------ exact bytes

def test_nulls_are_resp2_until_hello_3_and_again_after_hello_2(server):
    raw = server.raw()
    assert raw.call("SHOW", UNKNOWN_ID) == b"$-1\r\n"
    _hello3(raw)
    assert raw.call("SHOW", UNKNOWN_ID) == RESP3_NULL
    hello2 = raw.call("HELLO", "2")
    assert hello2.startswith(b"*14\r\n$6\r\nserver\r\n")
    assert b"$5\r\nproto\r\n:2\r\n" in hello2
    assert raw.call("SHOW", UNKNOWN_ID) == b"$-1\r\n"
    assert raw.call("GETJOB", "NOHANG", "FROM", "q") == b"*-1\r\n"


def test_hello_3_reply_is_a_map_with_proto_3(server):
    reply = _hello3(server.raw())
    assert b"$5\r\nproto\r\n:3\r\n" in reply
    assert reply.endswith(b"$7\r\nmodules\r\n*0\r\n")


def test_null_bulk_and_null_array_replies_under_resp3(server):
    raw = server.raw()
    _hello3(raw)
    assert raw.call("CLIENT", "GETNAME") == RESP3_NULL
    assert raw.call("GETJOB", "NOHANG", "FROM", "q") == RESP3_NULL
    assert raw.call("QSTAT", "nosuch") == RESP3_NULL
    assert raw.call("COMMAND", "INFO", "nosuch") == b"*1\r\n" + RESP3_NULL


def test_a_parked_getjob_times_out_with_the_resp3_null(server):
    raw = server.raw()
    _hello3(raw)
    assert raw.call("GETJOB", "TIMEOUT", "50", "FROM", "q") == RESP3_NULL


def test_config_get_is_a_map(server):
    raw = server.raw()
    _hello3(raw)
    port = b"%d" % server.port
    assert raw.call("CONFIG", "GET", "port") == \
        b"%%1\r\n$4\r\nport\r\n$%d\r\n%b\r\n" % (len(port), port)
    assert raw.call("CONFIG", "GET", "no-such-directive") == b"%0\r\n"
    assert raw.call("CONFIG", "GET", "maxmemory*").startswith(b"%3\r\n")


def test_command_flags_are_a_set_and_acl_categories_follow(server):
    raw = server.raw()
    assert raw.call("COMMAND", "INFO", "ping") == \
        b"*1\r\n*6\r\n$4\r\nping\r\n:-1\r\n*2\r\n+readonly\r\n+fast\r\n:0\r\n:0\r\n:0\r\n"
    _hello3(raw)
    # Redis 6+'s shape: the ACL categories as a seventh field
    assert raw.call("COMMAND", "INFO", "ping") == \
        b"*1\r\n*7\r\n$4\r\nping\r\n:-1\r\n~2\r\n+readonly\r\n+fast\r\n:0\r\n:0\r\n:0\r\n" \
        b"~2\r\n+@read\r\n+@fast\r\n"


@pytest.mark.parametrize("argv", [("INFO", "server"), ("CLIENT", "LIST"), ("CLUSTER", "NODES"),
                                  ("CLUSTER", "INFO"), ("LATENCY", "DOCTOR")])
def test_text_replies_are_verbatim(server, argv):
    raw = server.raw()
    plain = raw.call(*argv)
    assert plain.startswith(b"$")
    _hello3(raw)
    reply = raw.call(*argv)
    header, _, rest = reply.partition(b"\r\n")
    assert header[:1] == b"=" and rest.startswith(b"txt:")
    assert int(header[1:]) == len(rest) - 2


def test_show_fields_keep_their_array_shape_with_resp3_nulls(server):
    raw = server.raw()
    _hello3(raw)
    job_id = raw.call("ADDJOB", "q", "body", "0", "RETRY", "0")[1:-2]
    reply = raw.call("SHOW", job_id)
    assert reply.startswith(b"*30\r\n$2\r\nid\r\n")
    # at-most-once and queued: no next requeue
    assert b"$19\r\nnext-requeue-within\r\n_\r\n" in reply


def test_disque_hello_keeps_its_array_shape(server):
    raw = server.raw()
    _hello3(raw)
    assert raw.call("HELLO").startswith(b"*3\r\n:1\r\n$40\r\n")


def test_getjob_replies_are_the_same_bytes_under_both_protocols(server):
    raw2, raw3 = server.raw(), server.raw()
    _hello3(raw3)
    for raw in (raw2, raw3):
        raw.call("ADDJOB", "q", "body", "0")
    first, second = (raw.call("GETJOB", "WITHCOUNTERS", "FROM", "q") for raw in (raw2, raw3))
    assert first[:5] == second[:5] == b"*1\r\n*"
    assert first.replace(first[22:62], b"ID") == second.replace(second[22:62], b"ID")


# ------------------------------------------------------------ redis-py

PARSERS = {
    "python-resp3": (_RESP3Parser, None),     # redis-py 8 without hiredis: HELLO 3
    "python-resp2": (_RESP2Parser, 2),
    "hiredis-resp3": (_HiredisParser, 3),
    "hiredis-resp2": (_HiredisParser, 2),
}


def _client(port: int, parser: str, **kwargs) -> redis.Redis:
    parser_class, protocol = PARSERS[parser]
    options = dict(host=HOST, port=port, parser_class=parser_class,
                   socket_timeout=CLIENT_TIMEOUT_S, **kwargs)
    if protocol is not None:
        options["protocol"] = protocol
    return redis.Redis(connection_pool=redis.ConnectionPool(**options),
                       retry=Retry(NoBackoff(), 0))


@pytest.fixture(params=sorted(PARSERS))
def parser(request):
    return request.param


@pytest.fixture
def client(server, parser):
    client = _client(server.port, parser)
    yield client
    client.close()


def test_the_connection_speaks_the_protocol_asked_for(client, parser):
    expected = 2 if parser.endswith("resp2") else 3
    hello = client.execute_command("HELLO", expected)
    proto = hello[b"proto"] if isinstance(hello, dict) else hello[hello.index(b"proto") + 1]
    assert proto == expected


def test_job_lifecycle(client):
    job_id = client.execute_command("ADDJOB", "q", "payload", 0)
    assert isinstance(job_id, bytes) and job_id.startswith(b"D-")
    assert client.execute_command("QLEN", "q") == 1
    [[queue, got_id, body]] = client.execute_command("GETJOB", "FROM", "q")
    assert (queue, got_id, body) == (b"q", job_id, b"payload")
    assert client.execute_command("WORKING", job_id) > 0
    assert client.execute_command("NACK", job_id) == 1
    [[_, _, _, _, nacks, _, deliveries]] = client.execute_command(
        "GETJOB", "WITHCOUNTERS", "FROM", "q")
    assert (nacks, deliveries) == (1, 0)
    assert client.execute_command("ACKJOB", job_id) == 1
    assert client.execute_command("SHOW", job_id) is None
    assert client.execute_command("FASTACK", job_id) == 0
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is None
    assert client.execute_command("GETJOB", "TIMEOUT", 20, "FROM", "q") is None


def test_queue_commands(client):
    ids = [client.execute_command("ADDJOB", "q", "job%d" % n, 0) for n in range(3)]
    assert [job[1] for job in client.execute_command("QPEEK", "q", 2)] == ids[:2]
    assert client.execute_command("DEQUEUE", ids[0]) == 1
    assert client.execute_command("ENQUEUE", ids[0]) == 1
    assert client.execute_command("DELJOB", ids[2]) == 1
    qstat = client.execute_command("QSTAT", "q")
    assert qstat[0:2] == [b"name", b"q"] and qstat[qstat.index(b"len") + 1] == 2
    assert client.execute_command("QSTAT", "nosuch") is None
    cursor, queues = client.execute_command("QSCAN", "COUNT", 100)
    assert queues == [b"q"]
    cursor, jobs = client.execute_command("JSCAN", "QUEUE", "q", "COUNT", 100)
    assert sorted(jobs) == sorted(ids[:2])
    cursor, infos = client.execute_command("JSCAN", "QUEUE", "q", "COUNT", 100, "REPLY", "all")
    assert {info[info.index(b"id") + 1] for info in infos} == set(ids[:2])
    assert client.execute_command("PAUSE", "q", "in") == b"in"
    assert client.execute_command("PAUSE", "q", "state") == b"in"
    assert client.execute_command("PAUSE", "q", "none") == b"none"


def test_show_returns_every_field_with_nones(client):
    job_id = client.execute_command("ADDJOB", "q", "b", 0, "RETRY", 0)
    shown = client.execute_command("SHOW", job_id)
    fields = dict(zip(shown[0::2], shown[1::2]))
    assert fields[b"id"] == job_id and fields[b"state"] == b"queued"
    assert fields[b"next-requeue-within"] is None
    assert fields[b"body"] == b"b"


def test_hello_lists_this_node(client, server):
    version, my_id, *nodes = client.execute_command("HELLO")
    assert version == 1 and len(my_id) == 40
    assert nodes == [[my_id, HOST.encode(), b"%d" % server.port, b"1"]]


def test_config_commands(client, server):
    assert client.config_get("port") == {"port": str(server.port)}
    assert client.config_get("no-such-directive") == {}
    assert client.config_set("slowlog-max-len", 64) is True
    assert client.config_get("slowlog-max-len") == {"slowlog-max-len": "64"}
    assert client.config_resetstat() is True


def test_info_client_and_time(client):
    info = client.info()
    assert info["disque_version"] == "1.0-rc1"
    assert "registered_jobs" in client.info("jobs")
    assert client.client_getname() is None
    assert client.client_setname("worker-1") is True
    assert client.client_getname() in ("worker-1", b"worker-1")   # per redis-py callback set
    assert any(entry["name"] == "worker-1" for entry in client.client_list())
    assert client.execute_command("CLIENT", "REPLY", "ON") == b"OK"
    seconds, micros = client.time()
    assert seconds > 1_600_000_000 and 0 <= micros < 1_000_000
    assert client.ping() is True


def test_command_table(client):
    table = client.command()
    assert table["addjob"]["arity"] == -4
    assert set(table["getjob"]["flags"]) == {"write", "fast"}
    assert client.command_count() == len(table)


def test_slowlog_and_latency(client):
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("latency-monitor-threshold", 1)
    try:
        client.execute_command("DEBUG", "SLEEP", "0.01")
        entries = client.slowlog_get(5)
        assert any(b"DEBUG" in entry["command"] for entry in entries)
        assert client.slowlog_len() >= 1
        assert client.slowlog_reset() is True
        latest = {entry[0]: entry for entry in client.latency_latest()}
        _, _, last, highest = latest[b"command"]
        assert highest >= last >= 1
        assert client.latency_history("command")[0][1] >= 1
        assert client.execute_command("LATENCY", "GRAPH", "command").startswith(b"command")
        assert b"Dave" in client.execute_command("LATENCY", "DOCTOR") or \
            client.execute_command("LATENCY", "DOCTOR")
        assert client.latency_reset() >= 1      # command, and any other event past 1 ms
    finally:
        client.config_set("slowlog-log-slower-than", 10000)
        client.config_set("latency-monitor-threshold", 0)


def test_monitor_feed_is_status_lines_under_resp3(server):
    # Disque's feed has no database number, so redis-py's monitor() helper,
    # which parses Redis's "[db addr]", cannot read it (nor Disque's own).
    watcher = server.raw()
    _hello3(watcher)
    assert watcher.call("MONITOR") == b"+OK\r\n"
    server.raw().call("QLEN", "watched")
    line = watcher.read_reply()
    assert line.startswith(b"+") and line.endswith(b'] "QLEN" "watched"\r\n')


def test_cluster_commands(make_server, parser):
    node, peer = make_server("node").start(), make_server("peer").start()
    client = _client(node.port, parser)
    my_id = client.execute_command("CLUSTER", "MYID")
    assert len(my_id) == 40
    assert client.execute_command("CLUSTER", "LEAVING") == b"no"
    assert b"myself" in client.execute_command("CLUSTER", "NODES")
    assert b"cluster_state" in client.execute_command("CLUSTER", "INFO") or \
        client.execute_command("CLUSTER", "INFO")
    assert client.execute_command("CLUSTER", "MEET", HOST, peer.port) == b"OK"
    wait_for(lambda: len(client.execute_command("HELLO")) == 4, timeout=30,
             message="the peer to join")
    peer_id = client.execute_command("HELLO")[3][0]
    assert client.execute_command("CLUSTER", "FORGET", peer_id) == b"OK"
    client.close()


def test_auth_through_hello(make_server, parser):
    node = make_server("secured").start()
    assert node.raw().call("CONFIG", "SET", "requirepass", "s3cret") == b"+OK\r\n"
    denied = _client(node.port, parser)
    with pytest.raises((redis.AuthenticationError, redis.ResponseError), match="uthenticat"):
        denied.execute_command("QLEN", "q")
    denied.close()
    client = _client(node.port, parser, password="s3cret")
    assert client.execute_command("QLEN", "q") == 0
    assert client.execute_command("AUTH", "s3cret") in (True, b"OK")   # per callback set
    client.close()


def test_admin_commands_that_change_the_server(make_server, parser):
    node = make_server("admin", args=["--appendonly", "yes"]).start()
    client = _client(node.port, parser)
    client.execute_command("ADDJOB", "q", "x", 0)
    assert client.execute_command("DEBUG", "FLUSHALL") == b"OK"
    assert client.execute_command("QLEN", "q") == 0
    assert client.bgrewriteaof() in (True, b"Background append only file rewriting started")
    victim = _client(node.port, parser)
    victim.client_setname("victim")
    assert client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes") >= 1
    assert client.execute_command("CLIENT", "PAUSE", 10) == b"OK"
    victim.close()
    client.shutdown()       # redis-py returns once the connection drops
    wait_for(lambda: not node.alive(), message="the node to stop after SHUTDOWN")
    client.close()


def test_dedup_answers_and_info_fields_of_this_stop(client):
    hits = client.info("stats")["total_dedup_hits"]      # the module's node counts on
    first = client.execute_command("ADDJOB", "q", "x", 0, "DEDUP", "k1")
    assert client.execute_command("ADDJOB", "q", "y", 0, "DEDUP", "k1") == first
    persistence = client.info("persistence")
    assert persistence["loading"] == 0 and "loading_loaded_jobs" not in persistence
    assert client.info("stats")["total_dedup_hits"] == hits + 1


def test_the_spark_source_reads_and_acks_through_every_parser(server, client):
    from disque_py.spark.stream_reader import DisqueStreamReader
    ids = {client.execute_command("ADDJOB", "src", f"body{i}", 0) for i in range(3)}
    node = f"{HOST}:{server.port}"
    reader = DisqueStreamReader({"queues": "src", "nodes": node})
    reader._clients[node] = client        # the reader's connection, with this parser
    rows, end = reader.read(reader.initialOffset())
    rows = list(rows)
    assert {row[1].encode() for row in rows} == ids
    assert {(row[0], row[3], row[4]) for row in rows} == {("src", 0, 0)}
    assert sorted(row[2] for row in rows) == [b"body0", b"body1", b"body2"]
    reader.commit(end)
    assert client.info("jobs")["registered_jobs"] == 0
