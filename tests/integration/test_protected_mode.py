"""Protected mode against real processes and a real non-loopback client.

The remote client lives in a network namespace made for this module
(`ip netns`, iproute2): a veth pair joins it to the host, the host end at
10.200.N.1 and the namespace end at 10.200.N.2, so a connection from the
namespace reaches the server from a non-loopback address. Namespace and
veth are deleted at the end, also when a test fails. Making a namespace
needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); without it these tests are
skipped and only tests/unit/test_protected_mode.py speaks for the rule.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

from disque_py.config.protected_mode import DENIED
from tests.support import HOST, ServerProcess, wait_for

# Run inside the namespace: connect, send argv[3] (hex), read until the
# server closes or argv[4] replies (lines) came, print what came and
# whether the server closed.
REMOTE_CLIENT = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
payload, replies = bytes.fromhex(sys.argv[3]), int(sys.argv[4])
deadline = time.monotonic() + 10
while True:
    try:
        sock = socket.create_connection((host, port), timeout=10)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
sock.sendall(payload)
data, closed = b"", False
while data.count(b"\r\n") < replies:
    chunk = sock.recv(65536)
    if not chunk:
        closed = True
        break
    data += chunk
if not closed:
    sock.settimeout(0.3)
    try:
        closed = sock.recv(1) == b""
    except socket.timeout:
        pass
sys.stdout.write(repr((data, closed)))
"""


class Namespace:
    def __init__(self) -> None:
        pid = os.getpid()
        self.name = f"dqpm{pid}"
        self.host_link, self.inner_link = f"dqh{pid}", f"dqn{pid}"
        subnet = f"10.200.{pid % 200 + 20}"
        self.host_ip, self.inner_ip = f"{subnet}.1", f"{subnet}.2"

    def create(self) -> None:
        for command in (
                ["netns", "add", self.name],
                ["link", "add", self.host_link, "type", "veth", "peer", "name", self.inner_link],
                ["link", "set", self.inner_link, "netns", self.name],
                ["addr", "add", f"{self.host_ip}/24", "dev", self.host_link],
                ["link", "set", self.host_link, "up"],
                ["-n", self.name, "addr", "add", f"{self.inner_ip}/24", "dev", self.inner_link],
                ["-n", self.name, "link", "set", self.inner_link, "up"],
                ["-n", self.name, "link", "set", "lo", "up"]):
            done = subprocess.run(["ip", *command], capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise OSError(f"ip {' '.join(command)}: {done.stderr.strip()}")

    def delete(self) -> None:
        # Deleting the namespace deletes its veth end, and with it the pair.
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.host_link], capture_output=True, timeout=30)

    def exec(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.name, *argv],
                              capture_output=True, timeout=60)

    def call(self, port: int, payload: bytes, replies: int = 1) -> tuple[bytes, bool]:
        """(reply bytes, whether the server closed) for payload sent from the namespace."""
        done = self.exec(sys.executable, "-c", REMOTE_CLIENT, self.host_ip, str(port),
                         payload.hex(), str(replies))
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return eval(done.stdout)        # the repr of a (bytes, bool) tuple we printed


@pytest.fixture(scope="module")
def netns():
    assert shutil.which("ip"), "ip is required (Debian package iproute2; `make test` installs it)"
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root: protected mode is only unit-tested")
    namespace = Namespace()
    try:
        namespace.create()
    except OSError as error:
        namespace.delete()
        pytest.skip(f"cannot make a network namespace here ({error})")
    yield namespace
    namespace.delete()


class UnboundServer(ServerProcess):
    """A server started with no --bind at all: it listens on every interface."""

    def command_line(self) -> list[str]:
        cmd = super().command_line()
        at = cmd.index("--bind")
        del cmd[at:at + 2]
        return cmd


@pytest.fixture(scope="module")
def unbound(tmp_path_factory):
    directory = tmp_path_factory.mktemp("unbound")
    proc = UnboundServer(directory, args=["--unixsocket", str(directory / "disque.sock")])
    try:
        proc.start()        # start() waits for PING on 127.0.0.1: loopback is served
        yield proc
    finally:
        proc.stop()


def info_stat(proc: ServerProcess, name: str) -> int:
    return proc.client().info("stats")[name]


def test_a_remote_client_is_denied_and_disconnected(netns, unbound):
    rejected = info_stat(unbound, "rejected_connections")
    assert netns.call(unbound.port, b"PING\r\n") == (DENIED, True)
    assert info_stat(unbound, "rejected_connections") == rejected + 1
    done = netns.exec("redis-cli", "-h", netns.host_ip, "-p", str(unbound.port), "PING")
    assert b"DENIED Disque is in protected mode" in done.stdout + done.stderr, done
    # Its own host is served, over loopback and over the Unix socket.
    assert unbound.client().ping()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(unbound.dir / "disque.sock"))
        sock.sendall(b"PING\r\n")
        assert sock.recv(64) == b"+PONG\r\n"


def test_config_set_from_loopback_opens_and_closes_it(netns, unbound):
    local = unbound.client()
    local.execute_command("CONFIG", "SET", "protected-mode", "no")
    try:
        assert netns.call(unbound.port, b"PING\r\n") == (b"+PONG\r\n", False)
    finally:
        local.execute_command("CONFIG", "SET", "protected-mode", "yes")
    assert netns.call(unbound.port, b"PING\r\n") == (DENIED, True)


def test_with_requirepass_a_remote_client_is_served(netns, tmp_path):
    proc = UnboundServer(tmp_path / "password", args=["--requirepass", "s3cret"])
    try:
        proc.start(wait=False)
        wait_for(lambda: proc.client(password="s3cret").ping(), timeout=20, message="PING")
        assert netns.call(proc.port, b"PING\r\n") == (b"-NOAUTH Authentication required.\r\n",
                                                      False)
        assert netns.call(proc.port, b"AUTH s3cret\r\nPING\r\n", 2) == (b"+OK\r\n+PONG\r\n",
                                                                         False)
    finally:
        proc.stop()


def test_with_an_explicit_bind_a_remote_client_is_served(netns, tmp_path):
    proc = ServerProcess(tmp_path / "bound", args=["--bind", HOST, netns.host_ip])
    try:
        proc.start()
        assert netns.call(proc.port, b"PING\r\n") == (b"+PONG\r\n", False)
    finally:
        proc.stop()
