"""TLS for clients (tls-port and the tls-* directives) against real processes.

The certificates are made by disque_py/tools/pki.py (Debian's openssl) in the test's
temporary directory: a CA, a server certificate for 127.0.0.1 and client
certificates. Clients are redis-py (ssl=True), redis-cli --tls and
Python's ssl module.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess

import pytest
import redis

from disque_py.tools.pki import Pki
from tests.support import HOST, ServerProcess, encode_command, free_port, wait_for


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    authority = Pki(tmp_path_factory.mktemp("pki"))
    authority.server = authority.issue("server")
    authority.client = authority.issue("client")
    rogue = Pki(tmp_path_factory.mktemp("rogue-pki"), "rogue-ca")
    authority.rogue_client = rogue.issue("rogue-client")
    return authority


def tls_args(pki, tls_port: int, *extra: str, cert=None, key=None) -> list[str]:
    return ["--tls-port", str(tls_port),
            "--tls-cert-file", str(cert or pki.server.cert),
            "--tls-key-file", str(key or pki.server.key),
            "--tls-ca-cert-file", str(pki.ca), *extra]


class TlsServer(ServerProcess):
    def __init__(self, directory, pki, *extra: str, **kwargs) -> None:
        self.tls_port = free_port()
        super().__init__(directory, args=tls_args(pki, self.tls_port, *extra, **kwargs))
        self.pki = pki

    def tls_client(self, cert=True, leaf=None, **kwargs) -> redis.Redis:
        leaf = leaf or (self.pki.client if cert else None)
        extra = {"ssl_certfile": str(leaf.cert), "ssl_keyfile": str(leaf.key)} if leaf else {}
        client = redis.Redis(host=HOST, port=self.tls_port, ssl=True,
                             ssl_ca_certs=str(self.pki.ca), socket_timeout=10,
                             **extra, **kwargs)
        self._clients.append(client)
        return client


@pytest.fixture(scope="module")
def node(pki, tmp_path_factory):
    """tls-auth-clients at its default (yes), tcp-keepalive on (sockets of TLS
    connections are reached through uvloop's SSL transport)."""
    proc = TlsServer(tmp_path_factory.mktemp("tls-node"), pki, "--tcp-keepalive", "60")
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def launch():
    """launch(proc, wait=True) starts proc; every one is stopped after the test."""
    started = []

    def start(proc: ServerProcess, wait: bool = True) -> ServerProcess:
        started.append(proc)
        return proc.start(wait=wait)

    yield start
    for proc in started:
        proc.stop()


def redis_cli(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    assert shutil.which("redis-cli"), "redis-cli is required (Debian package redis-tools)"
    return subprocess.run(["redis-cli", *args], capture_output=True, timeout=30, input=input)


def cli_tls_args(proc: TlsServer, cert: bool = True) -> list[str]:
    args = ["-h", HOST, "-p", str(proc.tls_port), "--tls", "--cacert", str(proc.pki.ca)]
    if cert:
        args += ["--cert", str(proc.pki.client.cert), "--key", str(proc.pki.client.key)]
    return args


def peer_common_name(proc: TlsServer) -> str:
    """The CN of the certificate a new TLS connection is shown."""
    context = ssl.create_default_context(cafile=str(proc.pki.ca))
    context.load_cert_chain(str(proc.pki.client.cert), str(proc.pki.client.key))
    with socket.create_connection((HOST, proc.tls_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=HOST) as tls:
            tls.sendall(b"PING\r\n")
            assert tls.recv(64) == b"+PONG\r\n"
            subject = dict(item[0] for item in tls.getpeercert()["subject"])
            return subject["commonName"]


# --------------------------------------------------------------------------
# Clients over TLS


def test_redis_py_over_tls_runs_the_job_cycle(node):
    client = node.tls_client()
    job_id = client.execute_command("ADDJOB", "tls-queue", "over tls", 0)
    [(queue, got_id, body)] = client.execute_command("GETJOB", "FROM", "tls-queue")
    assert (queue, got_id, body) == (b"tls-queue", job_id, b"over tls")
    assert client.execute_command("ACKJOB", job_id) == 1
    assert client.execute_command("QLEN", "tls-queue") == 0


def test_large_pipelines_and_bodies_cross_tls_intact(node):
    client = node.tls_client()
    body = bytes(range(256)) * 4096                      # 1 MiB, every byte value
    pipe = client.pipeline(transaction=False)
    for n in range(500):
        pipe.execute_command("ADDJOB", "tls-bulk", b"%d" % n, 0)
    for n in range(8):
        pipe.execute_command("ADDJOB", "tls-big", body + b"%d" % n, 0)
    ids = pipe.execute()
    assert len(set(ids)) == 508
    # 8 MiB in one reply: past the output high-water mark (writing pauses).
    jobs = client.execute_command("GETJOB", "COUNT", 8, "FROM", "tls-big")
    assert [got for _, _, got in jobs] == [body + b"%d" % n for n in range(8)]
    assert client.execute_command("QLEN", "tls-bulk") == 500


def _tls_memory_client(node):
    """A TLS client over memory buffers: it decides what each TCP send holds."""
    context = ssl.create_default_context(cafile=str(node.pki.ca))
    context.load_cert_chain(str(node.pki.client.cert), str(node.pki.client.key))
    sock = socket.create_connection((HOST, node.tls_port), timeout=10)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=HOST)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(outgoing.read())
            incoming.write(sock.recv(65536))
    sock.sendall(outgoing.read())
    return sock, tls, incoming, outgoing


def test_a_pipeline_sent_with_the_tls_close_gets_its_replies(node):
    # The commands and the client's close_notify in one TCP send: the node
    # reads both in one turn, and the replies it kept for the turn's end
    # must leave before the TLS transport shuts down.
    assert node.raw().call("PING") == b"+PONG\r\n"     # another client answered last
    sock, tls, incoming, outgoing = _tls_memory_client(node)
    tls.write(encode_command("PING", "a") + encode_command("PING", "b"))
    with pytest.raises(ssl.SSLWantReadError):
        tls.unwrap()                                       # queues close_notify
    sock.sendall(outgoing.read())
    received = b""
    while chunk := sock.recv(65536):
        incoming.write(chunk)
    try:
        while part := tls.read(65536):
            received += part
    except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
        pass
    sock.close()
    assert received == b"$1\r\na\r\n$1\r\nb\r\n"


def test_the_plain_port_keeps_working_beside_tls(node):
    plain, tls = node.client(), node.tls_client()
    job_id = plain.execute_command("ADDJOB", "mixed", "from plain", 0)
    [(_, got_id, body)] = tls.execute_command("GETJOB", "FROM", "mixed")
    assert (got_id, body) == (job_id, b"from plain")
    assert plain.execute_command("ACKJOB", job_id) == 1


def test_tls_clients_are_listed_with_their_socket(node):
    client = node.tls_client()
    client.execute_command("CLIENT", "SETNAME", "tls-one")
    line = next(line for line in client.execute_command("CLIENT", "LIST").decode().splitlines()
                if "name=tls-one" in line)
    fields = dict(item.split("=", 1) for item in line.split())
    assert int(fields["fd"]) > 0 and fields["addr"].startswith("127.0.0.1:")


def test_redis_cli_tls(node):
    done = redis_cli(*cli_tls_args(node), "ADDJOB", "cli-tls", "hello", "0")
    assert done.returncode == 0 and done.stdout.startswith(b"D-"), done
    job_id = done.stdout.strip().decode()
    done = redis_cli(*cli_tls_args(node), "GETJOB", "FROM", "cli-tls")
    assert done.stdout.split() == [b"cli-tls", job_id.encode(), b"hello"], done
    done = redis_cli(*cli_tls_args(node), "ACKJOB", job_id)
    assert done.stdout.strip() == b"1", done


def test_a_client_without_a_certificate_is_refused(node):
    with pytest.raises(redis.ConnectionError):
        node.tls_client(cert=False).ping()
    with pytest.raises(redis.ConnectionError):
        node.tls_client(leaf=node.pki.rogue_client).ping()     # signed by another CA
    done = redis_cli(*cli_tls_args(node, cert=False), "PING")
    assert b"PONG" not in done.stdout
    assert node.alive() and node.tls_client().ping()


def test_plaintext_on_the_tls_port_gets_no_reply(node):
    with socket.create_connection((HOST, node.tls_port), timeout=10) as sock:
        sock.sendall(b"PING\r\n")
        reply = b""
        try:
            while chunk := sock.recv(4096):
                reply += chunk
        except ConnectionResetError:
            pass
        assert b"PONG" not in reply


def test_auth_clients_no_accepts_clients_without_a_certificate(pki, tmp_path, launch):
    proc = launch(TlsServer(tmp_path / "no", pki, "--tls-auth-clients", "no"))
    assert proc.tls_client(cert=False).ping()
    assert proc.tls_client().ping()             # a certificate is not checked, nor harmful
    done = redis_cli(*cli_tls_args(proc, cert=False), "PING")
    assert done.stdout.strip() == b"PONG", done
    assert proc.client().execute_command("CONFIG", "GET", "tls-auth-clients") == \
        {b"tls-auth-clients": b"no"}                # redis-py 8 speaks RESP3: a map


def test_auth_clients_optional_checks_a_certificate_when_one_is_shown(pki, tmp_path, launch):
    proc = launch(TlsServer(tmp_path / "optional", pki, "--tls-auth-clients", "optional"))
    assert proc.tls_client(cert=False).ping()
    assert proc.tls_client().ping()
    with pytest.raises(redis.ConnectionError):
        proc.tls_client(leaf=pki.rogue_client).ping()


def test_port_0_serves_tls_clients_only(pki, tmp_path, launch):
    proc = TlsServer(tmp_path / "tls-only", pki)
    proc.args += ["--port", "0"]                    # after --port N: it wins
    launch(proc, wait=False)
    client = proc.tls_client()
    wait_for(lambda: client.ping(), timeout=20, message="TLS PING")
    with pytest.raises(OSError):
        socket.create_connection((HOST, proc.port), timeout=2).close()
    assert client.execute_command("CONFIG", "GET", "port") == {b"port": b"0"}


# --------------------------------------------------------------------------
# Start-up errors and CONFIG SET


@pytest.mark.parametrize("which, expected", [
    ("missing-cert", "tls-cert-file '{missing}': can't open it (No such file or directory)"),
    ("wrong-key", "tls-key-file '{client_key}' is not the key of tls-cert-file"),
    ("no-ca", "tls-auth-clients is 'yes' but tls-ca-cert-file is not set"),
])
def test_bad_tls_files_stop_start_up_with_a_clear_message(pki, tmp_path, launch, which,
                                                         expected):
    missing = tmp_path / "nowhere" / "server.crt"
    tls_port = free_port()
    args = {
        "missing-cert": tls_args(pki, tls_port, cert=missing),
        "wrong-key": tls_args(pki, tls_port, key=pki.client.key),
        "no-ca": ["--tls-port", str(tls_port), "--tls-cert-file", str(pki.server.cert),
                  "--tls-key-file", str(pki.server.key)],
    }[which]
    proc = launch(ServerProcess(tmp_path / "bad", args=args), wait=False)
    assert proc.proc.wait(30) == 1
    log = proc.log_text()
    assert "Failed to configure TLS: " + expected.format(
        missing=missing, client_key=pki.client.key) in log, log
    assert "ready to accept connections" not in log


def test_config_set_reloads_the_tls_files(pki, tmp_path, launch):
    own = tmp_path / "certs"
    own.mkdir()
    cert, key = own / "node.crt", own / "node.key"
    shutil.copy(pki.server.cert, cert)
    shutil.copy(pki.server.key, key)
    proc = launch(TlsServer(tmp_path / "reload", pki, cert=cert, key=key))
    before = proc.tls_client()
    assert before.ping() and peer_common_name(proc) == "server"
    plain = proc.client()
    # A file that cannot be loaded is refused; the old ones stay in use.
    with pytest.raises(redis.ResponseError, match="tls-cert-file '/nowhere.crt'"):
        plain.execute_command("CONFIG", "SET", "tls-cert-file", "/nowhere.crt")
    assert plain.execute_command("CONFIG", "GET", "tls-cert-file") == \
        {b"tls-cert-file": str(cert).encode()}
    # Rotation: new files at the same paths, then a SET of either reloads both.
    rotated = pki.issue("server-rotated")
    shutil.copy(rotated.cert, cert)
    shutil.copy(rotated.key, key)
    assert plain.execute_command("CONFIG", "SET", "tls-cert-file", str(cert)) == b"OK"
    assert peer_common_name(proc) == "server-rotated"
    assert before.ping()                        # open connections keep going
    # A new CA: clients it signed get in, the old CA's do not any more.
    other = Pki(tmp_path / "other-ca", "other-ca")
    newcomer = other.issue("newcomer")
    assert plain.execute_command("CONFIG", "SET", "tls-ca-cert-file",
                                 str(other.ca)) == b"OK"
    assert proc.tls_client(leaf=newcomer).ping()
    with pytest.raises(redis.ConnectionError):
        proc.tls_client().ping()
