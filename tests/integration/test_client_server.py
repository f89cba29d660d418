"""The client's scans, server commands, pipelines, JSON bodies and error
classes against a real node, in every cell of the matrix (Client and
AsyncClient, RESP2 and RESP3, Python parser and hiredis); then the client
over TLS (`disques://`) and with AUTH in its URL, on nodes of their own.

Each error is one the server answers to a client call, mapped to the
class of its prefix with the server's text as its message; DEBUG ERROR
makes the server answer each prefix the client knows, to check the
mapping of those a lone node cannot reach otherwise.
"""

from __future__ import annotations

import select

import pytest
import redis
from redis._parsers import _HiredisParser
from redis.connection import SSLConnection

from disque_py.client import (
    BadIdError, CommandError, JobInfo, LeavingError, MaxlenError, NoAuthError, NoJobError,
    NoReplError, OOMError, PausedError, TooLateError,
)
from disque_py.client import errors
from disque_py.client.sync import TlsConnection
from disque_py.tools.pki import Pki
from tests.client_support import KINDS, connection_in_use, unique
from tests.support import HOST, ServerProcess, free_port, wait_for

pytestmark = pytest.mark.timeout(60)

UNKNOWN_ID = "D-00000000-K7vXjg68Hp5/31rEoNGo2pYA-05a1"
PASSWORD = "s3cret pass"


def first_page(view, *args) -> tuple[int, list]:
    cursor, items = view.execute_command(*args)
    return int(cursor), items


# ------------------------------------------------------------------ scans

def test_qscan_reads_every_page_and_filters_by_length(dq, view):
    prefix = unique("scan")
    long_queue = f"{prefix}-long"
    short = [f"{prefix}-{n}" for n in range(4)]
    for name in short:
        dq.add(name, b"one")
    for _ in range(3):
        dq.add(long_queue, b"of three")
    assert first_page(view, "QSCAN", 0, "COUNT", 1)[0] != 0          # more than a page
    assert set(short + [long_queue]) <= set(dq.qscan(count=1))
    assert [name for name in dq.qscan(count=1, minlen=3) if name.startswith(prefix)] \
        == [long_queue]
    assert set(name for name in dq.qscan(count=1, maxlen=1) if name.startswith(prefix)) \
        == set(short)


def test_jscan_reads_every_page_of_a_queue_and_filters_by_state(dq, view, queue):
    ids = [dq.add(queue, b"job %d" % n) for n in range(5)]
    [taken] = dq.get(queue)
    assert first_page(view, "JSCAN", 0, "COUNT", 1, "QUEUE", queue)[0] != 0
    assert set(dq.jscan(count=1, queue=queue)) == set(ids)
    assert list(dq.jscan(queue=queue, states=["active"])) == [taken.id]
    assert set(dq.jscan(count=2, queue=queue, states=["queued"])) == set(ids) - {taken.id}


def test_jscan_info_describes_each_job_as_show_does(dq, queue):
    ids = [dq.add(queue, b"job %d" % n, retry=30 + n) for n in range(4)]
    infos = list(dq.jscan_info(count=1, queue=queue))
    assert all(isinstance(info, JobInfo) for info in infos)
    assert sorted((info.id, info.body, info.retry) for info in infos) == \
        sorted((job_id, b"job %d" % n, 30 + n) for n, job_id in enumerate(ids))
    shown = dq.show(ids[0])
    [same] = [info for info in infos if info.id == ids[0]]
    assert (same.queue, same.state, same.ctime) == (shown.queue, shown.state, shown.ctime)
    assert 0 <= same.ttl - shown.ttl <= 1        # seconds left, read a moment apart


# ------------------------------------------------------------- the cells

def test_each_cell_speaks_its_protocol_through_its_parser(dq, flavour):
    reply = dq.execute_command("CONFIG", "GET", "maxmemory-policy")
    assert reply == ({b"maxmemory-policy": b"acks"} if flavour.protocol == 3
                     else [b"maxmemory-policy", b"acks"])
    connection = connection_in_use(dq)
    assert type(connection._parser) is flavour.parser
    assert connection.protocol == flavour.protocol


def test_a_closed_client_lets_its_connections_go_and_connects_again(make_client, view,
                                                                      module_server):
    connected = lambda: int(view.info("clients")["connected_clients"])    # noqa: E731
    before = connected()
    with make_client(f"disque://{HOST}:{module_server.port}") as client:
        assert client.ping()
        assert connected() == before + 1
    wait_for(lambda: connected() == before, message="the connection closed")
    assert client.ping()                                 # connects again when used
    same_nodes = make_client.from_settings(client.settings, serializer="json")
    assert same_nodes.routes.seeds == client.routes.seeds
    assert same_nodes.qpeek(unique(), 1) == [] and same_nodes.codec.loads(b"[1]") == [1]


# -------------------------------------------------------- server commands

def test_hello_lists_the_node_as_the_server_does(dq, view, module_server):
    hello = dq.hello()
    version, my_id, *nodes = view.execute_command("HELLO")
    assert (hello.version, hello.my_id) == (version, my_id.decode())
    assert [(node.id, node.host, node.port, node.priority) for node in hello.nodes] == \
        [(n[0].decode(), n[1].decode(), int(n[2]), int(n[3])) for n in nodes]
    assert hello.nodes[0].port == module_server.port and hello.nodes[0].priority == 1


def test_info_reads_each_section_as_name_and_text(dq, view):
    server = dq.info("server")
    expected = view.info("server")
    assert server.keys() == expected.keys()
    assert server["disque_version"] == str(expected["disque_version"])
    assert server["tcp_port"] == str(expected["tcp_port"])
    assert "registered_jobs" in dq.info() and "cmdstat_ping" in dq.info("commandstats")


def test_ping_is_true(dq):
    assert dq.ping() is True


def test_config_get_and_set_read_and_change_a_directive(dq, view):
    before = dq.config_get("maxmemory-samples")
    assert before == {key: str(value) for key, value in
                      view.config_get("maxmemory-samples").items()}
    try:
        assert dq.config_set("maxmemory-samples", 7) == "OK"
        assert dq.config_get("maxmemory-s*") == {"maxmemory-samples": "7"}
    finally:
        view.config_set("maxmemory-samples", before["maxmemory-samples"])


def test_execute_command_answers_redis_pys_reply_and_maps_errors(dq, flavour, queue):
    job_id = dq.add(queue, b"body")
    assert dq.execute_command("QLEN", queue) == 1
    assert dq.execute_command("GETJOB", "FROM", queue) == [[queue.encode(), job_id.encode(),
                                                            b"body"]]
    with pytest.raises(CommandError, match="wrong number of arguments"):
        dq.execute_command("QLEN")


# --------------------------------------------------------------- pipelines

def test_a_pipeline_keeps_answers_and_errors_in_order(dq, queue):
    with dq.pipeline() as pipe:
        pipe.add(queue, b"first")
        pipe.add(queue, b"bad", priority=99)
        pipe.qlen(queue)
        pipe.get(queue)
        pipe.show(UNKNOWN_ID)
    first, refused, length, jobs, unknown = pipe.results
    assert isinstance(refused, CommandError) and "PRIORITY" in str(refused)
    assert (length, [job.id for job in jobs], unknown) == (1, [first], None)


def test_a_pipeline_raises_its_first_error_when_asked_after_running_them_all(dq, queue):
    pipe = dq.pipeline()
    pipe.add(queue, b"kept")
    pipe.ack("not-a-job")
    pipe.add(queue, b"kept too")
    with pytest.raises(BadIdError):
        pipe.execute(raise_on_error=True)
    assert dq.qlen(queue) == 2
    assert dq.pipeline().execute() == []


# ------------------------------------------------------------------- bodies

def test_json_bodies_go_out_as_json_and_come_back_as_values(make_client, module_server, view,
                                                            queue):
    client = make_client(f"disque://{HOST}:{module_server.port}", serializer="json")
    body = {"to": "tom", "sizes": [1, 2.5], "urgent": True, "note": None}
    job_id = client.add(queue, body)
    assert shown_body(view, job_id) == b'{"to":"tom","sizes":[1,2.5],"urgent":true,"note":null}'
    assert client.show(job_id).body == body
    assert client.qpeek(queue, 1)[0].body == body
    assert client.get(queue)[0].body == body


def shown_body(view, job_id) -> bytes:
    reply = view.execute_command("SHOW", job_id)
    return reply[reply.index(b"body") + 1]


# ------------------------------------------------------------------ errors

def _paused(dq, queue):
    dq.pause(queue, "in")
    dq.add(queue, b"refused")


def _too_long(dq, queue):
    dq.add(queue, b"one", maxlen=1)
    dq.add(queue, b"two", maxlen=1)


# What a client call the server refuses raises: the class of the prefix.
REFUSALS = {
    "BADID": (lambda dq, queue: dq.ack("not-a-job"), BadIdError, "Invalid Job ID format"),
    "NOJOB": (lambda dq, queue: dq.working(UNKNOWN_ID), NoJobError, "Job not known"),
    "NOREPL": (lambda dq, queue: dq.add(queue, b"body", replicate=2), NoReplError,
               "Not enough reachable nodes"),
    "PAUSED": (_paused, PausedError, "paused"),
    "MAXLEN": (_too_long, MaxlenError, "longer than the specified MAXLEN"),
    "ERR-syntax": (lambda dq, queue: dq.execute_command("GETJOB", "COUNT"), CommandError,
                   "syntax error"),
    "ERR-range": (lambda dq, queue: dq.add(queue, b"body", priority=10), CommandError,
                  "PRIORITY"),
}


@pytest.mark.parametrize("prefix", REFUSALS)
def test_each_refusal_raises_the_class_of_its_prefix(dq, queue, prefix):
    call, cls, words = REFUSALS[prefix]
    with pytest.raises(cls, match=words) as caught:
        call(dq, queue)
    assert type(caught.value) is cls
    assert not str(caught.value).startswith(prefix.split("-")[0])      # the text after it
    assert isinstance(caught.value.__cause__, redis.ResponseError)


@pytest.mark.parametrize("flavour", KINDS, ids=lambda flavour: flavour.id)
def test_working_past_half_the_ttl_is_too_late(dq, queue):
    """Once per kind: TOOLATE reads as BADID does in every parser, and
    half a TTL is at least half a second to wait."""
    job_id = dq.add(queue, b"body", ttl=2, retry=1)

    def too_late():
        try:
            dq.working(job_id)
        except TooLateError as error:
            return error
        return None
    assert "Half of job TTL" in str(wait_for(too_late, timeout=5, message="TOOLATE"))


def test_a_leaving_node_refuses_a_consumer_with_leaving(dq, view, queue):
    assert view.execute_command("CLUSTER", "LEAVING", "yes") == b"OK"
    try:
        with pytest.raises(LeavingError, match="leaving the cluster"):
            dq.get(queue)
    finally:
        view.execute_command("CLUSTER", "LEAVING", "no")
    assert dq.get(queue, nohang=True) == []


def test_a_full_dedup_table_is_an_oom_error(dq, view, queue):
    keys = int(view.info("memory")["dedup_keys"])
    [_, limit] = view.execute_command("CONFIG", "GET", "dedup-max-keys")
    view.execute_command("CONFIG", "SET", "dedup-max-keys", keys + 1)
    try:
        dq.add(queue, b"fits", dedup=unique("key"))
        with pytest.raises(OOMError, match="dedup"):
            dq.add(queue, b"does not", dedup=unique("key"))
    finally:
        view.execute_command("CONFIG", "SET", "dedup-max-keys", limit)


@pytest.mark.parametrize("prefix", sorted(errors._BY_PREFIX))
def test_every_known_prefix_maps_to_its_class(dq, prefix):
    with pytest.raises(errors._BY_PREFIX[prefix]) as caught:
        dq.execute_command("DEBUG", "ERROR", f"{prefix} told by the server")
    assert type(caught.value) is errors._BY_PREFIX[prefix]
    assert str(caught.value) == "told by the server"


def test_an_unknown_prefix_is_a_command_error_that_keeps_it(dq):
    with pytest.raises(CommandError) as caught:
        dq.execute_command("DEBUG", "ERROR", "NEWKIND something new")
    assert str(caught.value) == "NEWKIND something new"


# ---------------------------------------------------------- TLS and AUTH

@pytest.fixture(scope="module")
def tls_node(tmp_path_factory):
    """A node whose TLS port asks clients for a certificate of its CA."""
    pki = Pki(tmp_path_factory.mktemp("pki"))
    pki.server, pki.client = pki.issue("server"), pki.issue("client")
    tls_port = free_port()
    node = ServerProcess(tmp_path_factory.mktemp("tls-node"), args=[
        "--tls-port", str(tls_port), "--tls-cert-file", str(pki.server.cert),
        "--tls-key-file", str(pki.server.key), "--tls-ca-cert-file", str(pki.ca)])
    node.tls_port, node.pki = tls_port, pki
    try:
        yield node.start()
    finally:                                   # a node that never answered stops too
        node.stop()


def test_a_disques_url_runs_the_job_cycle_over_tls(make_client, tls_node):
    pki = tls_node.pki
    client = make_client(f"disques://{HOST}:{tls_node.tls_port}?ssl_ca_certs={pki.ca}",
                         ssl_certfile=str(pki.client.cert), ssl_keyfile=str(pki.client.key))
    queue = unique()
    job_id = client.add(queue, b"over tls")
    [job] = client.get(queue)
    assert (job.id, job.body) == (job_id, b"over tls")
    assert client.ack(job_id) == 1
    assert client.routes.current == (HOST, tls_node.tls_port)       # not the plain port


def _ticket_pending(connection_class, tls_node):
    """A fresh hiredis connection of that class, once the TLS 1.3 session
    ticket the server sends after the handshake has reached its socket."""
    pki = tls_node.pki
    connection = connection_class(
        host=HOST, port=tls_node.tls_port, ssl_ca_certs=str(pki.ca),
        ssl_certfile=str(pki.client.cert), ssl_keyfile=str(pki.client.key),
        parser_class=_HiredisParser, protocol=2, lib_name=None, lib_version=None)
    connection.connect()
    readable, _, _ = select.select([connection._sock], [], [], 10)
    assert readable, "no session ticket came"
    return connection


def test_a_fresh_tls_connection_with_a_session_ticket_pending_is_ready(tls_node):
    """redis-py 8.1's hiredis parser takes the ticket for unread data (its
    pool then drops the connection, and after a second one raises
    ConnectionError: the client took the node for lost, now and then)."""
    connection = _ticket_pending(TlsConnection, tls_node)
    try:
        assert connection.can_read() is False
        connection.send_command("PING")
        assert connection.read_response() == b"PONG"
    finally:
        connection.disconnect()
    plain = _ticket_pending(SSLConnection, tls_node)
    try:
        assert plain.can_read() is True, "redis-py reads TLS now: TlsConnection can go"
    finally:
        plain.disconnect()


@pytest.fixture(scope="module")
def locked_node(tmp_path_factory):
    node = ServerProcess(tmp_path_factory.mktemp("locked"))
    try:
        node.start()
        assert node.raw().call("CONFIG", "SET", "requirepass", PASSWORD) == b"+OK\r\n"
        yield node
    finally:
        node.stop()


@pytest.mark.parametrize("userinfo", [":s3cret%20pass", "default:s3cret%20pass"])
def test_the_password_in_the_url_opens_a_locked_node(make_client, locked_node, userinfo):
    client = make_client(f"disque://{userinfo}@{HOST}:{locked_node.port}")
    queue = unique()
    job_id = client.add(queue, b"body")
    assert client.get(queue)[0].id == job_id


def test_no_password_on_a_locked_node_is_a_noauth_error(make_client, locked_node):
    client = make_client(f"disque://{HOST}:{locked_node.port}")
    with pytest.raises(NoAuthError):
        client.ping()


def test_a_wrong_password_is_refused_as_the_server_words_it(make_client, flavour, locked_node):
    """RESP3 connections authenticate with HELLO 3 AUTH (-WRONGPASS),
    RESP2 ones with AUTH (-ERR invalid password)."""
    client = make_client(f"disque://:wrong@{HOST}:{locked_node.port}")
    expected = errors.WrongPassError if flavour.protocol == 3 else CommandError
    with pytest.raises(expected):
        client.ping()
