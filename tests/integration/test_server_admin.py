"""Server and admin commands against real processes: PING, TIME, COMMAND,
INFO, HELLO, AUTH, CLIENT, CONFIG, SHUTDOWN, DEBUG, MONITOR, the entry
points and their configuration, and third-party clients (redis-py in both
protocols, redis-cli).

Exact reply bytes are Disque 1.0-rc1's (confirmed against the original
server); where disque-py answers more than Disque (HELLO 2/3 for redis-py 8)
the test says so.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import hiredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support import HOST, RawClient, ServerProcess, encode_command, free_port, wait_for

SERVER_BIN = str(Path(sys.executable).with_name("disque-server"))
DISQUE_PY_BIN = str(Path(sys.executable).with_name("disque-py"))
NODE_ID = re.compile(rb"[0-9a-f]{40}\Z")
JOB_ID = re.compile(rb"D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}\Z")
INFO_SECTIONS = [("server", "Server"), ("clients", "Clients"), ("memory", "Memory"),
                 ("jobs", "Jobs"), ("queues", "Queues"), ("persistence", "Persistence"),
                 ("stats", "Stats"), ("cpu", "CPU")]
CLIENT_LINE = re.compile(
    r"id=(?P<id>\d+) addr=(?P<addr>\S+) fd=(?P<fd>-?\d+) name=(?P<name>\S*) "
    r"age=(?P<age>\d+) idle=(?P<idle>\d+) flags=(?P<flags>\S+) qbuf=\d+ qbuf-free=\d+ "
    r"obl=\d+ oll=\d+ omem=\d+ events=\S+ cmd=(?P<cmd>\S+)")


# ----------------------------------------------------------------- helpers

def parse(raw: bytes, protocol: int = 2):
    """A reply's raw bytes as Python values (hiredis; RESP3 maps -> dict)."""
    reader = hiredis.Reader(notEnoughData=Ellipsis)
    reader.feed(raw)
    value = reader.gets()
    assert value is not Ellipsis, raw
    assert reader.gets() is Ellipsis, f"more than one reply in {raw!r}"
    return value


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def info_text(client: RawClient, *section: str) -> str:
    raw = client.call("INFO", *section)
    header, _, body = raw.partition(b"\r\n")
    assert header.startswith(b"$")
    assert len(body) == int(header[1:]) + 2
    return body[:-2].decode()


def info_fields(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def read_until_closed(client: RawClient, timeout: float = 5.0) -> tuple[bytes, bool]:
    client.sock.settimeout(timeout)
    data = client._pending
    client._pending = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = client.sock.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def local_addr(client: RawClient) -> str:
    host, port = client.sock.getsockname()[:2]
    return f"{host}:{port}"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISQUE_")}
    env.update(extra)
    return env


class Launched(ServerProcess):
    """A server started from an arbitrary command line and working directory."""

    def __init__(self, cmd: list[str], cwd: Path, port: int, log_path: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(cwd, port=port)
        self.cmd = [str(part) for part in cmd]
        self.cwd = Path(cwd)
        self.env = env if env is not None else clean_env()
        if log_path is not None:
            self.log_path = Path(log_path)

    def command_line(self) -> list[str]:
        return self.cmd

    def start(self, wait: bool = True) -> "Launched":
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=self.cwd, env=self.env)
        if wait:
            self.wait_ready()
        return self


@pytest.fixture
def launch():
    started: list[Launched] = []

    def make(cmd, cwd, port, **kwargs) -> Launched:
        proc = Launched(cmd, cwd, port, **kwargs)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        if proc.alive():
            proc.stop()


# ------------------------------------------------------- PING, TIME, COMMAND

def test_ping_and_ping_with_message(server):
    raw = server.raw()
    assert raw.call("PING") == b"+PONG\r\n"
    assert raw.call("PING", "hello") == bulk(b"hello")
    assert raw.call("PING", "") == bulk(b"")
    assert raw.call("PING", "a", "b") == b"-ERR wrong number of arguments for 'ping' command\r\n"
    assert server.client().ping() is True
    assert server.client(protocol=2).ping() is True


def test_time_is_unix_seconds_and_microseconds(server):
    raw = server.raw()
    before = time.time()
    reply = raw.call("TIME")
    after = time.time()
    match = re.fullmatch(rb"\*2\r\n\$\d+\r\n(\d+)\r\n\$\d+\r\n(\d+)\r\n", reply)
    assert match, reply
    seconds, micros = int(match.group(1)), int(match.group(2))
    assert 0 <= micros < 1_000_000
    assert before - 1 <= seconds + micros / 1e6 <= after + 1
    assert raw.call("TIME", "x") == b"-ERR wrong number of arguments for 'time' command\r\n"
    assert abs(server.client().time()[0] - time.time()) < 5


def test_command_lists_commands_and_count_matches(server):
    raw = server.raw()
    table = parse(raw.call("COMMAND"))
    names = {entry[0] for entry in table}
    for name in (b"addjob", b"getjob", b"ackjob", b"fastack", b"deljob", b"show", b"qlen",
                 b"qpeek", b"qscan", b"jscan", b"enqueue", b"dequeue", b"nack", b"working",
                 b"pause", b"auth", b"ping", b"info", b"hello", b"config", b"client",
                 b"debug", b"monitor", b"shutdown", b"time", b"command"):
        assert name in names
    for entry in table:
        assert len(entry) == 6 and isinstance(entry[1], int) and isinstance(entry[2], list)
    assert raw.call("COMMAND", "COUNT") == b":%d\r\n" % len(table)


def test_command_info_addjob_is_disques_entry(server):
    raw = server.raw()
    assert raw.call("COMMAND", "INFO", "addjob") == (
        b"*1\r\n*6\r\n$6\r\naddjob\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+fast\r\n"
        b":0\r\n:0\r\n:0\r\n")
    assert raw.call("COMMAND", "INFO", "GETJOB", "nosuch") == (
        b"*2\r\n*6\r\n$6\r\ngetjob\r\n:-2\r\n*2\r\n+write\r\n+fast\r\n:0\r\n:0\r\n:0\r\n"
        b"$-1\r\n")
    assert raw.call("COMMAND", "INFO") == b"*0\r\n"
    assert raw.call("COMMAND", "FOO") == b"-ERR Unknown subcommand or wrong number of arguments.\r\n"


# ------------------------------------------------------------------- INFO

def test_info_has_every_disque_section_in_order_with_exact_headers(server):
    raw = server.raw()
    text = info_text(raw)
    headers = _headers(text)
    expected = [f"# {title}" for _, title in INFO_SECTIONS]
    # Exactly Disque's sections: clients that parse INFO (disqueue-node's
    # parser drops the last line of the last section) see the same text.
    assert headers == expected, headers
    assert _headers(info_text(raw, "default")) == expected
    # Sections are separated by one blank line, as Disque writes them.
    assert "\r\n\r\n# Clients\r\n" in text
    assert text.startswith("# Server\r\n")


def _headers(text: str) -> list[str]:
    return [line for line in text.split("\r\n") if line.startswith("#")]


def test_info_all_adds_our_own_sections_after_disques(server):
    raw = server.raw()
    headers = _headers(info_text(raw, "all"))
    assert headers[:5] == [f"# {title}" for _, title in INFO_SECTIONS[:5]]
    assert "# Federation" in headers and "# Cluster" in headers


def test_info_has_disques_field_names(server):
    raw = server.raw()
    raw.call("ADDJOB", "infoq", "x", "0")
    fields = info_fields(info_text(raw))
    for name in ("disque_version", "tcp_port", "process_id", "run_id", "uptime_in_seconds",
                 "connected_clients", "blocked_clients", "used_memory", "used_memory_human",
                 "registered_jobs", "registered_queues", "aof_enabled", "aof_state",
                 "total_connections_received", "total_commands_processed",
                 "used_cpu_sys", "used_cpu_user"):
        assert name in fields, name
    assert fields["disque_version"] == "1.0-rc1"
    assert fields["tcp_port"] == str(server.port)
    assert fields["process_id"] == str(server.pid)
    assert re.fullmatch(r"[0-9a-f]{40}", fields["run_id"])
    assert int(fields["connected_clients"]) >= 1
    assert fields["blocked_clients"] == "0"
    assert int(fields["used_memory"]) > 0
    assert re.fullmatch(r"\d+(\.\d+)?[BKMG]", fields["used_memory_human"])
    assert fields["registered_jobs"] == "1"
    assert fields["registered_queues"] == "1"
    assert fields["aof_enabled"] == "0"
    assert fields["aof_state"] == "off"
    # redis-py parses the same text.
    parsed = server.client().info()
    assert parsed["tcp_port"] == server.port
    assert parsed["registered_jobs"] == 1


# INFO stats as Disque 1.0-rc1 lists it (ours adds total_jobs_created last).
DISQUE_STATS_FIELDS = ["total_connections_received", "total_commands_processed",
                       "instantaneous_ops_per_sec", "total_net_input_bytes",
                       "total_net_output_bytes", "instantaneous_input_kbps",
                       "instantaneous_output_kbps", "rejected_connections", "latest_fork_usec"]


def test_info_stats_has_disques_fields_in_order_and_live_rates(server):
    raw = server.raw()
    fields = list(info_fields(info_text(raw, "stats")))
    assert fields[:len(DISQUE_STATS_FIELDS)] == DISQUE_STATS_FIELDS
    assert re.fullmatch(r"[0-9a-f]{16}", info_fields(info_text(raw, "server"))["disque_build_id"])

    def rates_under_load():
        raw.send(encode_command("PING") * 200)
        for _ in range(200):
            raw.read_reply()
        stats = info_fields(info_text(raw, "stats"))
        if int(stats["instantaneous_ops_per_sec"]) > 0 and \
                float(stats["instantaneous_input_kbps"]) > 0 and \
                float(stats["instantaneous_output_kbps"]) > 0:
            return stats
        return None

    stats = wait_for(rates_under_load, message="instantaneous rates to show the load")
    assert re.fullmatch(r"\d+\.\d\d", stats["instantaneous_input_kbps"])
    assert stats["latest_fork_usec"] == "0"


CMDSTAT = re.compile(r"cmdstat_(\w+):calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d)")


def commandstats(raw: RawClient) -> dict[str, tuple[int, int, str]]:
    text = info_text(raw, "commandstats")
    lines = text.split("\r\n")
    assert lines[0] == "# Commandstats"
    stats = {}
    for line in filter(None, lines[1:]):
        name, calls, usec, per_call = CMDSTAT.fullmatch(line).groups()
        stats[name] = (int(calls), int(usec), per_call)
    return stats


def test_info_commandstats_counts_the_commands_that_ran_and_resetstat_clears_them(
        fresh_server):
    raw = fresh_server.raw()
    assert raw.call("CONFIG", "RESETSTAT") == b"+OK\r\n"     # the harness's PING
    for _ in range(3):
        assert raw.call("PING") == b"+PONG\r\n"
    job_id = raw.call("ADDJOB", "statq", "x", "0")[1:-2]
    assert raw.call("ACKJOB", job_id) == b":1\r\n"
    # Refused before their handler ran: not counted, as in Disque.
    assert raw.call("NOSUCH").startswith(b"-ERR unknown command")
    assert raw.call("QLEN").startswith(b"-ERR wrong number of arguments")
    stats = commandstats(raw)
    assert {name: calls for name, (calls, _, _) in stats.items()} == \
        {"config": 1, "ping": 3, "addjob": 1, "ackjob": 1}
    calls, usec, per_call = stats["ping"]
    assert per_call == f"{usec / calls:.2f}"
    assert "# Commandstats" in info_text(raw, "all")
    assert "# Commandstats" not in info_text(raw)
    assert raw.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    # CONFIG RESETSTAT and the INFO before it: only what ran after the reset.
    assert set(commandstats(raw)) == {"config"}


@pytest.mark.parametrize("section, title", INFO_SECTIONS)
def test_info_section_returns_only_that_section(server, section, title):
    raw = server.raw()
    for asked in (section, section.upper()):
        text = info_text(raw, asked)
        headers = [line for line in text.split("\r\n") if line.startswith("#")]
        assert headers == [f"# {title}"]
        assert text.startswith(f"# {title}\r\n")
        assert text.endswith("\r\n") and not text.endswith("\r\n\r\n")


def test_info_unknown_section_is_empty_and_two_args_is_syntax_error(server):
    raw = server.raw()
    assert raw.call("INFO", "nosuch") == b"$0\r\n\r\n"
    assert raw.call("INFO", "server", "clients") == b"-ERR syntax error\r\n"


# ------------------------------------------------------------------ HELLO

def test_bare_hello_is_disques_handshake(server):
    raw = server.raw()
    reply = raw.call("HELLO")
    match = re.fullmatch(
        rb"\*3\r\n:1\r\n\$40\r\n([0-9a-f]{40})\r\n"
        rb"\*4\r\n\$40\r\n([0-9a-f]{40})\r\n\$(\d+)\r\n([^\r]*)\r\n"
        rb"\$(\d+)\r\n(\d+)\r\n\$1\r\n1\r\n", reply)
    assert match, reply
    assert match.group(1) == match.group(2)
    assert int(match.group(3)) == len(match.group(4))
    assert match.group(6) == b"%d" % server.port
    value = server.client(protocol=2).execute_command("HELLO")
    assert value[0] == 1 and value[1] == match.group(1)
    assert value[2] == [match.group(1), match.group(4), b"%d" % server.port, b"1"]


def test_hello_3_answers_a_resp3_map_with_proto_3(server):
    raw = server.raw()
    reply = raw.call("HELLO", "3")
    assert reply.startswith(b"%")
    fields = parse(reply)
    assert isinstance(fields, dict)
    assert fields[b"proto"] == 3
    assert fields[b"version"] == b"1.0-rc1"
    assert isinstance(fields[b"id"], int)
    # The connection goes on working after the switch.
    assert raw.call("PING") == b"+PONG\r\n"


def test_hello_2_answers_a_flat_array_with_proto_2(server):
    raw = server.raw()
    reply = raw.call("HELLO", "2")
    assert reply.startswith(b"*")
    flat = parse(reply)
    assert isinstance(flat, list) and len(flat) % 2 == 0
    fields = dict(zip(flat[::2], flat[1::2]))
    assert fields[b"proto"] == 2
    assert fields[b"version"] == b"1.0-rc1"


def test_hello_with_unsupported_protocol_is_noproto(server):
    raw = server.raw()
    assert raw.call("HELLO", "4").startswith(b"-NOPROTO ")
    assert raw.call("HELLO", "1").startswith(b"-NOPROTO ")
    assert raw.call("PING") == b"+PONG\r\n"


@pytest.mark.parametrize("protocol", [None, 2, 3])
def test_redis_py_works_end_to_end(server, protocol):
    client = server.client(**({} if protocol is None else {"protocol": protocol}))
    assert client.ping() is True
    job_id = client.execute_command("ADDJOB", "rpq", "payload", "0")
    assert JOB_ID.match(job_id)
    assert client.execute_command("QLEN", "rpq") == 1
    jobs = client.execute_command("GETJOB", "FROM", "rpq")
    assert jobs == [[b"rpq", job_id, b"payload"]]
    assert client.execute_command("ACKJOB", job_id) == 1
    assert client.execute_command("SHOW", job_id) is None
    if protocol is None:
        # redis-py 8 speaks RESP3 unless told otherwise: the handshake worked.
        conn = client.connection_pool.get_connection()
        try:
            assert conn.protocol in (3, "3")
        finally:
            client.connection_pool.release(conn)


# ------------------------------------------------------------------- AUTH

class AuthServer(ServerProcess):
    """A server with requirepass: ready when it asks for authentication."""

    def wait_ready(self) -> None:
        def answers_noauth() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited: {self.stderr_text()}\n{self.log_text()}")
            client = RawClient(self.port, timeout=1)
            try:
                return client.call("PING") == b"-NOAUTH Authentication required.\r\n"
            finally:
                client.close()
        wait_for(answers_noauth, timeout=20, message="the server to ask for AUTH")


@pytest.fixture
def auth_server(tmp_path):
    proc = AuthServer(tmp_path / "auth", args=["--requirepass", "secret"]).start()
    yield proc
    proc.stop()


def test_every_command_but_auth_needs_authentication(auth_server):
    raw = auth_server.raw()
    noauth = b"-NOAUTH Authentication required.\r\n"
    for command in (["PING"], ["INFO"], ["HELLO"], ["TIME"], ["COMMAND"],
                    ["ADDJOB", "q", "x", "0"], ["GETJOB", "NOHANG", "FROM", "q"],
                    ["QLEN", "q"], ["CONFIG", "GET", "port"], ["CLIENT", "LIST"],
                    ["DEBUG", "FLUSHALL"], ["MONITOR"], ["SHUTDOWN"]):
        assert raw.call(*command) == noauth, command
    assert auth_server.alive()
    assert raw.call("AUTH", "wrong") == b"-ERR invalid password\r\n"
    assert raw.call("PING") == noauth
    assert raw.call("AUTH", "secret") == b"+OK\r\n"
    assert raw.call("PING") == b"+PONG\r\n"
    assert raw.call("QLEN", "q") == b":0\r\n"
    # A wrong password afterwards logs the client out again, as in Disque.
    assert raw.call("AUTH", "nope") == b"-ERR invalid password\r\n"
    assert raw.call("PING") == noauth


def test_auth_without_requirepass_is_refused(server):
    assert server.raw().call("AUTH", "x") == \
        b"-ERR Client sent AUTH, but no password is set\r\n"


@pytest.mark.parametrize("protocol", [2, None])
def test_redis_py_with_password_works(auth_server, protocol):
    kwargs = {} if protocol is None else {"protocol": protocol}
    no_retry = Retry(NoBackoff(), 0)   # redis-py would otherwise retry with backoff
    client = auth_server.client(password="secret", retry=no_retry, **kwargs)
    assert client.ping() is True
    job_id = client.execute_command("ADDJOB", "authq", "x", "0")
    assert client.execute_command("GETJOB", "FROM", "authq") == [[b"authq", job_id, b"x"]]
    with pytest.raises(redis.AuthenticationError):
        auth_server.client(password="wrong", retry=no_retry, **kwargs).ping()
    with pytest.raises(redis.AuthenticationError):
        auth_server.client(retry=no_retry, **kwargs).ping()


def test_hello_3_with_auth_option_authenticates_like_redis_py_8_sends_it(auth_server):
    # redis-py 8 with a password opens every connection with exactly this.
    raw = auth_server.raw()
    reply = raw.call("HELLO", "3", "AUTH", "default", "secret")
    assert reply.startswith(b"%"), reply
    assert parse(reply)[b"proto"] == 3
    assert raw.call("PING") == b"+PONG\r\n"
    other = auth_server.raw()
    assert other.call("HELLO", "3", "AUTH", "default", "wrong").startswith(b"-WRONGPASS ")
    assert other.call("PING") == b"-NOAUTH Authentication required.\r\n"


def test_hello_refused_for_want_of_auth_changes_nothing(auth_server):
    """HELLO's options apply only once the client is authenticated (Redis
    6+ reads them all, authenticates, then applies SETNAME)."""
    intruder = auth_server.raw()
    for options in (("SETNAME", "intruder"), ("SETNAME", "intruder2", "AUTH", "default", "no")):
        reply = intruder.call("HELLO", "2", *options)
        assert reply.startswith((b"-NOAUTH ", b"-WRONGPASS ")), reply
    assert intruder.call("PING") == b"-NOAUTH Authentication required.\r\n"
    admin = auth_server.raw()
    assert admin.call("AUTH", "secret") == b"+OK\r\n"
    entry = _client_entry(admin, local_addr(intruder))
    assert entry is not None and entry["name"] == "", entry
    # Authenticated in the same HELLO, the name is set.
    assert intruder.call("HELLO", "2", "SETNAME", "worker", "AUTH", "default",
                         "secret").startswith(b"*")
    assert _client_entry(admin, local_addr(intruder))["name"] == "worker"


# ----------------------------------------------------------------- CLIENT

def _client_lines(raw: RawClient) -> list[str]:
    reply = raw.call("CLIENT", "LIST")
    header, _, body = reply.partition(b"\r\n")
    assert header.startswith(b"$")
    text = body[:-2].decode()
    assert text.endswith("\n")
    return text[:-1].split("\n")


def _client_entry(raw: RawClient, addr: str) -> dict[str, str] | None:
    for line in _client_lines(raw):
        match = CLIENT_LINE.match(line)
        assert match, line
        if match["addr"] == addr:
            return match.groupdict()
    return None


def test_client_list_shows_disques_fields_for_every_client(server):
    me = server.raw()
    other = server.raw()
    assert other.call("CLIENT", "SETNAME", "worker-1") == b"+OK\r\n"
    mine = _client_entry(me, local_addr(me))
    assert mine is not None
    assert mine["cmd"] == "client"
    assert mine["name"] == ""
    assert mine["flags"] == "N"
    assert int(mine["id"]) > 0 and int(mine["fd"]) > 0
    theirs = _client_entry(me, local_addr(other))
    assert theirs is not None
    assert theirs["name"] == "worker-1"
    assert theirs["cmd"] == "client"
    assert theirs["id"] != mine["id"]


def test_client_setname_getname_and_bad_names(server):
    raw = server.raw()
    assert raw.call("CLIENT", "GETNAME") == b"$-1\r\n"
    assert raw.call("CLIENT", "SETNAME", "my-conn") == b"+OK\r\n"
    assert raw.call("CLIENT", "GETNAME") == bulk(b"my-conn")
    bad = b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
    for name in (b"a b", b"a\nb", b"caf\xc3\xa9", b"tab\there"):
        assert raw.call("CLIENT", "SETNAME", name) == bad, name
    assert raw.call("CLIENT", "GETNAME") == bulk(b"my-conn")
    assert raw.call("CLIENT", "SETNAME", "") == b"+OK\r\n"
    assert raw.call("CLIENT", "GETNAME") == b"$-1\r\n"
    assert raw.call("CLIENT", "FOO") == (
        b"-ERR Syntax error, try CLIENT (LIST | KILL ip:port | GETNAME | "
        b"SETNAME connection-name)\r\n")


def test_client_kill_old_form_by_address(server):
    killer = server.raw()
    victim = server.raw()
    assert victim.call("PING") == b"+PONG\r\n"
    assert killer.call("CLIENT", "KILL", local_addr(victim)) == b"+OK\r\n"
    assert read_until_closed(victim) == (b"", True)
    wait_for(lambda: _client_entry(killer, local_addr(victim)) is None)
    assert killer.call("CLIENT", "KILL", local_addr(victim)) == b"-ERR No such client\r\n"
    assert killer.call("CLIENT", "KILL", "1.2.3.4:5") == b"-ERR No such client\r\n"
    assert killer.call("PING") == b"+PONG\r\n"


def test_client_kill_new_form_by_id_addr_and_skipme(server):
    killer = server.raw()
    by_id, by_addr = server.raw(), server.raw()
    for client in (by_id, by_addr):
        assert client.call("PING") == b"+PONG\r\n"
    victim_id = _client_entry(killer, local_addr(by_id))["id"]
    my_id = _client_entry(killer, local_addr(killer))["id"]

    assert killer.call("CLIENT", "KILL", "ID", victim_id) == b":1\r\n"
    assert read_until_closed(by_id) == (b"", True)
    assert killer.call("CLIENT", "KILL", "ID", victim_id) == b":0\r\n"

    assert killer.call("CLIENT", "KILL", "ADDR", local_addr(by_addr), "ID", "1") == b":0\r\n"
    assert killer.call("CLIENT", "KILL", "ADDR", local_addr(by_addr)) == b":1\r\n"
    assert read_until_closed(by_addr) == (b"", True)

    # SKIPME yes (the default) spares the caller; SKIPME no does not.
    assert killer.call("CLIENT", "KILL", "ID", my_id) == b":0\r\n"
    assert killer.call("CLIENT", "KILL", "ID", my_id, "SKIPME", "yes") == b":0\r\n"
    assert killer.call("CLIENT", "KILL", "ID", "abc") == \
        b"-ERR value is not an integer or out of range\r\n"
    assert killer.call("CLIENT", "KILL", "foo", "bar") == b"-ERR syntax error\r\n"
    assert killer.call("CLIENT", "KILL", "TYPE", "master") == \
        b"-ERR Unknown client type 'master'\r\n"
    killer.send(encode_command("CLIENT", "KILL", "ID", my_id, "SKIPME", "no"))
    assert read_until_closed(killer) == (b":1\r\n", True)
    assert server.raw().call("PING") == b"+PONG\r\n"


# ----------------------------------------------------------------- CONFIG

def test_config_get_patterns(server):
    raw = server.raw()
    assert parse(raw.call("CONFIG", "GET", "port")) == [b"port", b"%d" % server.port]
    assert parse(raw.call("CONFIG", "GET", "*max*")) == [
        b"maxmemory", b"1073741824", b"maxmemory-samples", b"5", b"slowlog-max-len", b"128",
        b"maxclients", b"10000", b"maxmemory-policy", b"acks",
        b"dedup-max-keys", b"1000000"]            # beyond Disque
    assert parse(raw.call("CONFIG", "GET", "*append*")) == [
        b"no-appendfsync-on-rewrite", b"no", b"appendfsync", b"everysec", b"appendonly", b"no"]
    assert raw.call("CONFIG", "GET", "nosuch*") == b"*0\r\n"
    everything = parse(raw.call("CONFIG", "GET", "*"))
    names = everything[::2]
    assert len(names) == len(set(names)) > 20
    assert b"cluster-node-timeout" in names and b"dir" in names
    assert raw.call("CONFIG", "GET") == b"-ERR Wrong number of arguments for CONFIG GET\r\n"
    assert raw.call("CONFIG", "FOO") == \
        b"-ERR CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE\r\n"


def test_config_set_valid_values_take_effect(fresh_server):
    raw = fresh_server.raw()
    for name, value, shown in (("hz", "20", b"20"), ("timeout", "0", b"0"),
                               ("maxmemory", "100mb", b"104857600"),
                               ("loglevel", "warning", b"warning"),
                               ("cluster-node-timeout", "12345", b"12345"),
                               ("maxmemory-policy", "noeviction", b"noeviction")):
        assert raw.call("CONFIG", "SET", name, value) == b"+OK\r\n", name
        assert parse(raw.call("CONFIG", "GET", name)) == [name.encode(), shown]
    assert raw.call("CONFIG", "SET", "hz", "100000") == b"+OK\r\n"
    assert parse(raw.call("CONFIG", "GET", "hz")) == [b"hz", b"500"]   # clamped
    assert raw.call("CONFIG", "RESETSTAT") == b"+OK\r\n"


def test_config_set_invalid_values_get_disques_errors(fresh_server):
    raw = fresh_server.raw()
    cases = [
        (("nosuch", "1"), b"-ERR Unsupported CONFIG parameter: nosuch\r\n"),
        (("port", "1"), b"-ERR Unsupported CONFIG parameter: port\r\n"),
        (("maxclients", "abc"), b"-ERR Invalid argument 'abc' for CONFIG SET 'maxclients'\r\n"),
        (("timeout", "-1"), b"-ERR Invalid argument '-1' for CONFIG SET 'timeout'\r\n"),
        (("maxmemory-policy", "foo"),
         b"-ERR Invalid argument 'foo' for CONFIG SET 'maxmemory-policy'\r\n"),
        (("loglevel", "foo"), b"-ERR Invalid argument 'foo' for CONFIG SET 'loglevel'\r\n"),
    ]
    for args, error in cases:
        assert raw.call("CONFIG", "SET", *args) == error, args
    assert raw.call("config", "set", "hz") == b"-ERR Wrong number of arguments for CONFIG set\r\n"
    assert parse(raw.call("CONFIG", "GET", "maxclients")) == [b"maxclients", b"10000"]
    assert parse(raw.call("CONFIG", "GET", "loglevel")) == [b"loglevel", b"notice"]


def test_config_rewrite_without_config_file_is_refused(server):
    assert server.raw().call("CONFIG", "REWRITE") == \
        b"-ERR The server is running without a config file\r\n"


CONFIG_TEMPLATE = """\
# disque-py test configuration
# (this comment must survive CONFIG REWRITE)
port {port}
bind 127.0.0.1

# Data lives in an absolute directory; the log path is relative to it.
dir {data}
logfile server.log
# node timeout comment, kept too
cluster-node-timeout 5000
"""


def test_config_file_dir_logfile_and_rewrite_survive_a_restart(tmp_path, launch):
    home = tmp_path / "home"                 # the cwd the server is started from
    conf_dir = home / "some" / "dir"
    data = tmp_path / "data"
    for directory in (conf_dir, data):
        directory.mkdir(parents=True)
    port = free_port()
    conf = conf_dir / "disque.conf"
    conf.write_text(CONFIG_TEMPLATE.format(port=port, data=data))
    proc = launch([sys.executable, "-m", "disque_py", "some/dir/disque.conf"], home, port,
                  log_path=data / "server.log").start()

    raw = proc.raw()
    fields = info_fields(info_text(raw, "server"))
    assert fields["config_file"] == str(conf)
    assert parse(raw.call("CONFIG", "GET", "dir")) == [b"dir", str(data).encode()]
    # `dir` moved the process before the relative logfile was opened.
    wait_for(lambda: "ready to accept connections" in (data / "server.log").read_text(),
             message="the log inside dir")
    assert not (home / "server.log").exists()
    assert not (conf_dir / "server.log").exists()
    assert (data / "nodes.conf").exists()
    assert parse(raw.call("CONFIG", "GET", "cluster-node-timeout")) == \
        [b"cluster-node-timeout", b"5000"]

    assert raw.call("CONFIG", "SET", "cluster-node-timeout", "12345") == b"+OK\r\n"
    assert raw.call("CONFIG", "REWRITE") == b"+OK\r\n"
    text = conf.read_text()
    for comment in ("# disque-py test configuration",
                    "# (this comment must survive CONFIG REWRITE)",
                    "# Data lives in an absolute directory; the log path is relative to it.",
                    "# node timeout comment, kept too"):
        assert comment in text
    assert "cluster-node-timeout 12345" in text
    assert "cluster-node-timeout 5000" not in text
    lines = text.splitlines()
    assert lines.index("# node timeout comment, kept too") + 1 == \
        lines.index("cluster-node-timeout 12345")

    assert proc.stop() == 0
    proc.start()
    raw = proc.raw()
    assert parse(raw.call("CONFIG", "GET", "cluster-node-timeout")) == \
        [b"cluster-node-timeout", b"12345"]


def test_relative_dir_is_relative_to_the_process_cwd(tmp_path, launch):
    run_dir = tmp_path / "run"
    (run_dir / "data").mkdir(parents=True)
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    port = free_port()
    conf = conf_dir / "disque.conf"
    conf.write_text(f"port {port}\nbind 127.0.0.1\ndir data\nlogfile disque.log\n")
    proc = launch([SERVER_BIN, str(conf)], run_dir, port,
                  log_path=run_dir / "data" / "disque.log").start()
    raw = proc.raw()
    assert parse(raw.call("CONFIG", "GET", "dir")) == [b"dir", str(run_dir / "data").encode()]
    wait_for(lambda: (run_dir / "data" / "disque.log").exists())
    assert (run_dir / "data" / "nodes.conf").exists()
    assert not (conf_dir / "data").exists()


# ---------------------------------------------------------------- node ID

def _hello_id(proc: ServerProcess) -> bytes:
    return parse(proc.raw().call("HELLO"))[1]


def test_node_id_is_40_hex_stable_across_restart_and_unique(make_server):
    first = make_server("first").start()
    second = make_server("second").start()
    first_id = _hello_id(first)
    assert NODE_ID.match(first_id)
    assert first_id.decode() in (first.dir / "nodes.conf").read_text()
    assert _hello_id(second) != first_id
    assert first.stop() == 0
    first.start()
    assert _hello_id(first) == first_id


# --------------------------------------------------------------- SHUTDOWN

@pytest.mark.parametrize("command", [["SHUTDOWN"], ["SHUTDOWN", "NOSAVE"], ["shutdown", "save"]])
def test_shutdown_exits_0_without_a_reply(make_server, command):
    proc = make_server("shutdown").start()
    raw = proc.raw()
    raw.send(encode_command(*command))
    assert read_until_closed(raw) == (b"", True)
    assert proc.proc.wait(10) == 0
    assert "bye bye" in proc.log_text()


def test_shutdown_with_bad_argument_is_syntax_error_and_server_stays_up(server):
    raw = server.raw()
    assert raw.call("SHUTDOWN", "badarg") == b"-ERR syntax error\r\n"
    assert raw.call("SHUTDOWN", "nosave", "now") == b"-ERR syntax error\r\n"
    assert server.alive()
    assert raw.call("PING") == b"+PONG\r\n"


def test_sigterm_exits_0_and_logs_the_shutdown(make_server):
    proc = make_server("sigterm").start()
    client = proc.raw()
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(10) == 0
    assert client.is_closed()
    log = proc.log_text()
    assert "shutdown" in log.lower()
    assert "bye bye" in log


def test_sigterm_exits_0_when_the_log_directory_is_gone(make_server, tmp_path):
    # Disque drops a log line it cannot write; the shutdown must not fail on it.
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    proc = make_server("sigterm-no-log", args=["--logfile", str(log_dir / "disque.log")])
    proc.start()
    shutil.rmtree(log_dir)
    assert proc.raw().call("PING") == b"+PONG\r\n"
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(10) == 0
    assert "Traceback" not in proc.stderr_text()


# ------------------------------------------------------------------ DEBUG

def test_debug_sleep_blocks_other_clients(server):
    sleeper = server.raw()
    prober = server.raw()
    latencies: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            started = time.monotonic()
            assert prober.call("PING") == b"+PONG\r\n"
            latencies.append(time.monotonic() - started)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    wait_for(lambda: len(latencies) >= 5, message="the prober to run")
    started = time.monotonic()
    assert sleeper.call("DEBUG", "SLEEP", "0.2") == b"+OK\r\n"
    slept = time.monotonic() - started
    wait_for(lambda: len(latencies) >= 5 and time.monotonic() - started > slept)
    stop.set()
    thread.join(10)
    assert slept >= 0.19
    # Some PING sent during the sleep waited for most of it.
    assert max(latencies) >= 0.1, max(latencies)
    assert max(latencies) < 5


def test_debug_flushall_empties_jobs_and_queues(server):
    raw = server.raw()
    for i in range(10):
        raw.call("ADDJOB", "flushq%d" % (i % 3), "x", "0")
    assert info_fields(info_text(raw, "jobs"))["registered_jobs"] == "10"
    assert raw.call("DEBUG", "FLUSHALL") == b"+OK\r\n"
    assert info_fields(info_text(raw, "jobs"))["registered_jobs"] == "0"
    assert info_fields(info_text(raw, "queues"))["registered_queues"] == "0"
    assert raw.call("QLEN", "flushq0") == b":0\r\n"


def test_debug_unknown_subcommand_gets_disques_error(server):
    raw = server.raw()
    assert raw.call("DEBUG", "FOO") == \
        b"-ERR Unknown DEBUG subcommand or wrong number of arguments for 'FOO'\r\n"
    assert raw.call("DEBUG") == b"-ERR wrong number of arguments for 'debug' command\r\n"


# ---------------------------------------------------------------- MONITOR

def test_monitor_sees_other_clients_commands_in_disques_format(server):
    monitor = server.raw()
    assert monitor.call("MONITOR") == b"+OK\r\n"
    worker = server.raw()
    before = time.time()
    assert JOB_ID.match(worker.call("addjob", "q", "body", "0")[1:-2])
    assert worker.call("PING") == b"+PONG\r\n"
    line = monitor.read_reply()
    match = re.fullmatch(rb'\+(\d+)\.(\d{6}) \[([^\]]+)\] "addjob" "q" "body" "0"\r\n', line)
    assert match, line
    assert match.group(3).decode() == local_addr(worker)
    stamp = int(match.group(1)) + int(match.group(2)) / 1e6
    assert before - 2 <= stamp <= time.time() + 2
    assert re.fullmatch(rb'\+\d+\.\d{6} \[[^\]]+\] "PING"\r\n', monitor.read_reply())
    worker.call("PING", 'say "hi"\n')
    assert monitor.read_reply().endswith(b'"PING" "say \\"hi\\"\\n"\r\n')


# ------------------------------------------------------------ entry points

def _assert_serving(proc: ServerProcess, data_dir: Path) -> None:
    raw = proc.raw()
    assert raw.call("PING") == b"+PONG\r\n"
    assert info_fields(info_text(raw, "server"))["tcp_port"] == str(proc.port)
    assert (data_dir / "nodes.conf").exists()


def test_python_dash_m_disque_py_runs_the_server(tmp_path, launch):
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    proc = launch([sys.executable, "-m", "disque_py", "--port", port, "--bind", HOST,
                   "--dir", data], tmp_path, port).start()
    _assert_serving(proc, data)
    assert info_fields(info_text(proc.raw(), "server"))["config_file"] == ""


def test_disque_server_binary_runs_the_server(tmp_path, launch):
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    proc = launch([SERVER_BIN, "--port", port, "--bind", HOST, "--dir", data],
                  tmp_path, port).start()
    _assert_serving(proc, data)


def test_disque_py_server_subcommand_with_options(tmp_path, launch):
    data = tmp_path / "made-by-cli"
    port = free_port()
    proc = launch([DISQUE_PY_BIN, "server", "--port", port, "--bind", HOST, "--dir", data],
                  tmp_path, port).start()
    _assert_serving(proc, data)


def test_disque_py_server_reads_environment_variables(tmp_path, launch):
    data = tmp_path / "from-env"
    port = free_port()
    env = clean_env(DISQUE_PORT=str(port), DISQUE_BIND=HOST, DISQUE_DIR=str(data))
    proc = launch([DISQUE_PY_BIN, "server"], tmp_path, port, env=env).start()
    _assert_serving(proc, data)
    assert parse(proc.raw().call("CONFIG", "GET", "bind")) == [b"bind", HOST.encode()]


@pytest.mark.parametrize("cmd", [[SERVER_BIN, "--version"], [SERVER_BIN, "-v"],
                                 [sys.executable, "-m", "disque_py", "--version"]])
def test_version_flag_prints_disque_version(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=clean_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Disque server v=1.0-rc1")


@pytest.mark.parametrize("text, line, directive, message", [
    ("# comment\nfoo bar\n", 2, "foo", "Bad directive or wrong number of arguments"),
    ("# comment\n\nport 7000\nmaxclients 0\n", 4, "maxclients", "Invalid max clients limit"),
    ("port 7000\nloglevel loud\n", 2, "loglevel", "Invalid log level"),
])
def test_bad_config_exits_nonzero_naming_file_line_and_directive(tmp_path, text, line,
                                                                 directive, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    result = subprocess.run([SERVER_BIN, str(conf)], capture_output=True, text=True,
                            timeout=30, cwd=tmp_path, env=clean_env())
    assert result.returncode != 0
    assert str(conf) in result.stderr
    assert f"line {line}" in result.stderr
    assert directive in result.stderr
    assert message in result.stderr
    assert "FATAL CONFIG FILE ERROR" in result.stderr


# --------------------------------------------------------------- redis-cli

def test_redis_cli_ping_and_info(server):
    ping = subprocess.run(["redis-cli", "-h", HOST, "-p", str(server.port), "PING"],
                          capture_output=True, text=True, timeout=30)
    assert ping.returncode == 0, ping.stderr
    assert ping.stdout == "PONG\n"
    info = subprocess.run(["redis-cli", "-h", HOST, "-p", str(server.port), "INFO"],
                          capture_output=True, text=True, timeout=30)
    assert info.returncode == 0, info.stderr
    assert "# Server" in info.stdout
    assert f"tcp_port:{server.port}" in info.stdout
    assert "registered_jobs:0" in info.stdout
