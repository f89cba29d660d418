"""`disque-py cluster ...`: the operator's commands for a cluster of nodes.

  disque-py cluster create HOST:PORT HOST:PORT ...   PING every node, MEET the
      others from the first one (Disque's recommended way: gossip does the
      rest), then wait until every node knows and reaches every other.
  disque-py cluster status HOST:PORT                 the nodes one node knows,
      with jobs, queues and the longest queues of each node it can reach.
  disque-py cluster meet HOST:PORT PEER ...          one-shot CLUSTER MEET.

Owns talking to nodes as a client, and nothing of the server. Rules it keeps:
every reply is read with a short timeout, so a dead or paused node is
reported by name instead of hanging the tool; every failure is a
click.ClickException naming the node (exit status 1); hostnames are resolved
here, because CLUSTER MEET takes an IP address. redis-py is used through its
plain Connection (RESP2, no response callbacks: Disque's CLUSTER NODES is not
Redis's) and imported on first use, so `disque-server` does not pay for it.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import NamedTuple

import click

from disque_py.cluster.nodes import BUS_PORT_OFFSET, MAX_CLIENT_PORT

DEFAULT_CREATE_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 3.0
MESH_POLL_INTERVAL_S = 0.2
TOP_QUEUES = 10
SHORT_ID_LEN = 8
PASSWORD_ENVVAR = "DISQUE_PASSWORD"
# Nodes whose client port is not worth a connection attempt from `status`.
UNQUERIED_FLAGS = frozenset({"fail?", "fail", "handshake", "noaddr"})
MYSELF_FLAG = "myself"


# ------------------------------------------------------------ addresses

class NodeAddress(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class AddressType(click.ParamType):
    """HOST:PORT (or [IPv6]:PORT), with a port a Disque node can listen on."""

    name = "HOST:PORT"

    def convert(self, value, param, ctx) -> NodeAddress:
        if isinstance(value, NodeAddress):
            return value
        host, sep, port = value.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit():
            self.fail(f"{value!r} is not HOST:PORT", param, ctx)
        if not 0 < int(port) <= MAX_CLIENT_PORT:
            self.fail(f"{value!r}: the port must be 1-{MAX_CLIENT_PORT} (the cluster bus "
                      f"listens on port + {BUS_PORT_OFFSET})", param, ctx)
        return NodeAddress(host, int(port))


ADDRESS = AddressType()


def resolve_ip(address: NodeAddress) -> str:
    """The IP to MEET `address` at (IPv4 first: nodes commonly bind 0.0.0.0)."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise click.ClickException(f"cannot resolve {address}: {error.strerror}") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0])


# ------------------------------------------------------------ talking to a node

class NodeError(click.ClickException):
    """A node that cannot be reached, or that refused a command."""

    def __init__(self, address: NodeAddress, detail: str) -> None:
        super().__init__(f"{address}: {detail}")
        self.detail = detail


def _redis():
    # On first use: ~0.1 s that `disque-server`, which loads this module, should not pay.
    import redis
    import redis.backoff
    import redis.retry
    return redis


class NodeClient:
    """One connection to one node; `call` raises NodeError, never hangs."""

    def __init__(self, address: NodeAddress, password: str | None,
                 timeout: float = REPLY_TIMEOUT_S) -> None:
        redis = _redis()
        self.address = address
        self.timeout = timeout
        self._has_password = bool(password)
        self._conn = redis.Connection(
            host=address.host, port=address.port, password=password or None,
            socket_timeout=timeout, socket_connect_timeout=timeout, protocol=2,
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))

    def call(self, *args):
        return self.pipeline([args])[0]

    def pipeline(self, commands: list[tuple]) -> list:
        """Send every command, then read every reply."""
        if not commands:
            return []
        redis = _redis()
        try:
            self._conn.send_packed_command(self._conn.pack_commands(commands))
            return [self._conn.read_response() for _ in commands]
        except redis.RedisError as error:
            self._conn.disconnect()
            raise NodeError(self.address, self._describe(error, commands[0][0])) from None

    def _describe(self, error, command) -> str:
        exceptions = _redis().exceptions
        if isinstance(error, exceptions.TimeoutError):
            return f"no answer within {self.timeout:g}s (paused, overloaded or unreachable?)"
        if isinstance(error, exceptions.AuthenticationError):
            if not self._has_password:
                return (f"the node requires a password: pass --password or set "
                        f"{PASSWORD_ENVVAR} ({error})")
            return f"authentication failed: {error}"
        if isinstance(error, exceptions.ConnectionError):
            return f"cannot connect: {error}"
        return f"{command} failed: {error}"

    def close(self) -> None:
        self._conn.disconnect()


def text(value: bytes | str) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def parse_fields(reply: bytes) -> dict[str, str]:
    """`key:value` lines (CLUSTER INFO, INFO) as a dict; section titles skipped."""
    fields = {}
    for line in text(reply).splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            fields[key] = value
    return fields


def ping(address: NodeAddress, password: str | None) -> NodeClient:
    """A client to a node that has just answered PING; NodeError otherwise."""
    client = NodeClient(address, password)
    reply = client.call("PING")
    if reply not in (b"PONG", "PONG"):
        client.close()
        raise NodeError(address, f"unexpected reply to PING: {reply!r}")
    return client


password_option = click.option(
    "--password", envvar=PASSWORD_ENVVAR, show_envvar=True, default=None,
    help="The nodes' requirepass.")


@click.group()
def cluster() -> None:
    """Build and inspect a cluster of disque-py (or Disque) nodes."""


# ------------------------------------------------------------ meet

def meet_peer(client: NodeClient, peer: NodeAddress) -> None:
    click.echo(f"meeting {peer} ... ", nl=False)
    try:
        client.call("CLUSTER", "MEET", resolve_ip(peer), peer.port)
    except click.ClickException:
        click.echo("failed")
        raise
    click.echo("ok")


@cluster.command()
@click.argument("address", type=ADDRESS)
@click.argument("peers", nargs=-1, required=True, type=ADDRESS)
@password_option
def meet(address: NodeAddress, peers: tuple[NodeAddress, ...], password: str | None) -> None:
    """MEET peers from one node, once, without waiting.

    The node at ADDRESS sends CLUSTER MEET to each PEER; the handshakes go on
    in the background (`cluster status` shows them)."""
    client = ping(address, password)
    try:
        for peer in peers:
            meet_peer(client, peer)
    finally:
        client.close()


# ------------------------------------------------------------ create

class MeshView(NamedTuple):
    """What one node says of the cluster: CLUSTER INFO's counts, or an error."""

    address: NodeAddress
    known: int = 0
    reachable: int = 0
    error: str = ""

    def sees_everyone(self, size: int) -> bool:
        return not self.error and self.known == size and self.reachable == size - 1

    def describe(self, size: int) -> str:
        if self.error:
            return self.error
        line = f"knows {self.known} nodes, reaches {self.reachable}"
        if self.known > size:
            line += ": more than were listed, is it in another cluster? (see CLUSTER NODES)"
        return line


def mesh_view(client: NodeClient) -> MeshView:
    try:
        info = parse_fields(client.call("CLUSTER", "INFO"))
        return MeshView(client.address, int(info["cluster_known_nodes"]),
                        int(info["cluster_reachable_nodes"]))
    except NodeError as error:
        return MeshView(client.address, error=error.detail)
    except (KeyError, ValueError):
        return MeshView(client.address, error="CLUSTER INFO lacks the node counts")


def check_nodes(addresses: tuple[NodeAddress, ...], password: str | None) -> list[NodeClient]:
    """PING every node; fail naming every node that did not answer."""
    clients, failures = [], []
    for address in addresses:
        click.echo(f"checking {address} ... ", nl=False)
        try:
            clients.append(ping(address, password))
            click.echo("ok")
        except NodeError as error:
            click.echo("failed")
            failures.append(error.message)
    if failures:
        close_all(clients)
        raise click.ClickException("cannot build the cluster:\n  " + "\n  ".join(failures))
    return clients


def wait_for_full_mesh(clients: list[NodeClient], timeout: float) -> None:
    size = len(clients)
    deadline = time.monotonic() + timeout
    reported = None
    while True:
        views = [mesh_view(client) for client in clients]
        ready = sum(view.sees_everyone(size) for view in views)
        if ready == size:
            click.echo(f"full mesh: each of the {size} nodes knows and reaches every other")
            return
        if ready != reported:
            click.echo(f"waiting for a full mesh: {ready}/{size} nodes see everyone")
            reported = ready
        if time.monotonic() >= deadline:
            raise click.ClickException(mesh_timeout_message(views, timeout))
        time.sleep(MESH_POLL_INTERVAL_S)


def mesh_timeout_message(views: list[MeshView], timeout: float) -> str:
    size = len(views)
    lines = [f"no full mesh after {timeout:g}s; each node should know {size} nodes "
             f"and reach {size - 1}:"]
    lines += [f"  {view.address}: {view.describe(size)}" for view in views
              if not view.sees_everyone(size)]
    return "\n".join(lines)


def close_all(clients: list[NodeClient]) -> None:
    for client in clients:
        client.close()


def check_distinct(addresses: tuple[NodeAddress, ...]) -> None:
    seen: dict[tuple[str, int], NodeAddress] = {}
    for address in addresses:
        key = (resolve_ip(address), address.port)
        if key in seen:
            raise click.UsageError(f"{address} and {seen[key]} are the same node")
        seen[key] = address


@cluster.command()
@click.argument("addresses", nargs=-1, required=True, type=ADDRESS)
@click.option("--timeout", type=click.FloatRange(min=0), default=DEFAULT_CREATE_TIMEOUT_S,
              show_default=True, help="Seconds to wait for the full mesh.")
@password_option
def create(addresses: tuple[NodeAddress, ...], timeout: float, password: str | None) -> None:
    """Join nodes into one cluster; wait for a full mesh.

    Every node at ADDRESSES must answer PING. The first one MEETs every
    other, gossip introduces the rest, and the command returns once each node
    knows and reaches every other (or fails after --timeout seconds). Safe to
    run again on a cluster that is already built.
    """
    if len(addresses) < 2:
        raise click.UsageError("a cluster needs at least two nodes")
    check_distinct(addresses)
    clients = check_nodes(addresses, password)
    try:
        for peer in addresses[1:]:
            meet_peer(clients[0], peer)
        wait_for_full_mesh(clients, timeout)
    finally:
        close_all(clients)


# ------------------------------------------------------------ status

@dataclass
class QueueStats:
    jobs: str
    queues: str
    scanned: int                      # queues QSCAN returned
    longest: list[tuple[str, int]]


@dataclass
class NodeRow:
    node_id: str
    address: NodeAddress
    flags: list[str]
    link: str
    priority: str = "-"
    stats: QueueStats | None = None
    problem: str = ""

    @property
    def myself(self) -> bool:
        return MYSELF_FLAG in self.flags


def parse_cluster_nodes(reply: bytes, seen_from: NodeAddress) -> list[NodeRow]:
    """CLUSTER NODES lines: `id ip:port flags ping_sent pong_received link`."""
    rows = []
    for line in text(reply).splitlines():
        words = line.split()
        if len(words) < 6:
            continue
        host, _, port = words[1].rpartition(":")
        row = NodeRow(words[0], NodeAddress(host, int(port or 0)), words[2].split(","),
                      words[5])
        if row.myself:
            row.address = seen_from   # we know it answers there; it may not know its IP
        rows.append(row)
    rows.sort(key=lambda row: (not row.myself, row.address))
    return rows


def hello_priorities(client: NodeClient) -> dict[str, str]:
    """Node ID -> HELLO's priority (1 best ... 100 failing or leaving)."""
    reply = client.call("HELLO")
    return {text(entry[0]): text(entry[3]) for entry in reply[2:]}


def queue_stats(client: NodeClient) -> QueueStats:
    info = parse_fields(client.call("INFO"))
    names, cursor = [], b"0"
    while True:
        cursor, found = client.call("QSCAN", cursor, "BUSYLOOP")
        names += found
        if cursor in (b"0", 0):
            break
    lengths = client.pipeline([("QLEN", name) for name in names])
    longest = sorted(zip(map(text, names), lengths), key=lambda pair: (-pair[1], pair[0]))
    return QueueStats(info.get("registered_jobs", "?"), info.get("registered_queues", "?"),
                      len(names), longest[:TOP_QUEUES])


def fill_stats(row: NodeRow, client: NodeClient | None, password: str | None) -> None:
    """Ask the node in `row` for its queues, unless its flags say it is down."""
    unqueried = UNQUERIED_FLAGS.intersection(row.flags)
    if unqueried and not row.myself:
        row.problem = f"not queried ({','.join(sorted(unqueried))})"
        return
    own = client is None
    try:
        client = client or NodeClient(row.address, password)
        row.stats = queue_stats(client)
    except NodeError as error:
        row.problem = error.detail
    finally:
        if own and client is not None:
            client.close()


def format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
             for line in [header, *rows]]
    return "\n".join(lines)


def nodes_table(rows: list[NodeRow]) -> str:
    header = ["ID", "ADDRESS", "FLAGS", "LINK", "PRIORITY", "JOBS", "QUEUES"]
    cells = [[row.node_id[:SHORT_ID_LEN], str(row.address), ",".join(row.flags), row.link,
              row.priority, row.stats.jobs if row.stats else "-",
              row.stats.queues if row.stats else "-"] for row in rows]
    return format_table(header, cells)


def queues_section(row: NodeRow) -> str:
    title = f"queues on {row.address} ({row.node_id[:SHORT_ID_LEN]})"
    if row.stats is None:
        return f"{title}: {row.problem}"
    if not row.stats.longest:
        return f"{title}: none"
    cells = [[name, str(length)] for name, length in row.stats.longest]
    table = format_table(["QUEUE", "LENGTH"], cells)
    return f"{title}, longest {len(cells)} of {row.stats.scanned}:\n" + table


@cluster.command()
@click.argument("address", type=ADDRESS)
@password_option
def status(address: NodeAddress, password: str | None) -> None:
    """Show the nodes one node knows, and their queues.

    The node at ADDRESS lists the nodes it knows (CLUSTER NODES, HELLO); each
    one it can reach is asked for its jobs, queues and longest queues."""
    client = ping(address, password)
    try:
        rows = parse_cluster_nodes(client.call("CLUSTER", "NODES"), address)
        priorities = hello_priorities(client)
        for row in rows:
            row.priority = priorities.get(row.node_id, "-")
            fill_stats(row, client if row.myself else None, password)
    finally:
        client.close()
    click.echo(f"cluster seen by {address}: {len(rows)} node(s)\n")
    click.echo(nodes_table(rows))
    for row in rows:
        click.echo("\n" + queues_section(row))
