"""The chaos run's own network: a bridge, a network namespace per node, veth pairs.

Owns every network object a run makes, and nothing else. Made when a fault
needs real packets to drop (partition, netem) or `--netns` asks for it:

  bridge   dqc<tag>b in the root namespace at <subnet>.1: the checker's
           clients reach every node through it
  node i   namespace dqc-<tag>-<i>, with one end of a veth pair (eth0) at
           <subnet>.<i + 2>; the other end, dqc<tag>h<i>, is on the bridge
  relays   with `relays` (netem's delays), a delaying relay (relay.py) in
           each namespace and the rule that sends the node's bus connections
           through it (nft_rules.redirect_table)

The tag is random and the /24 is one of SUBNETS' that no address or route
of the host overlaps, chosen under a lock file every run takes (LOCK_PATH)
until its bridge holds the address: concurrent runs never share a name or
a subnet. Fault rules go into the node namespaces only (apply,
delete_table), never into the root namespace's ruleset. Rules kept:
`preflight` says in one message why namespaces cannot be made and what to
do; remove() deletes what claim() and create() made (relays by PID, then
veths, namespaces and the bridge), from any partial state, and is what the
run's cleanup calls on every way out.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import random
import secrets
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from disque_py.cluster.nodes import BUS_PORT_OFFSET
from disque_py.tools.chaos.nft_rules import redirect_table
from disque_py.tools.chaos.nodes import Launch
from disque_py.tools.chaos.relay import RELAY_MARK, RelayProcess

SUBNETS = ipaddress.ip_network("10.240.0.0/12")
PREFIX = 24
LOCK_PATH = os.path.join("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir(),
                         "disque-py-chaos-netns.lock")
NAME_PREFIX = "dqc"
INNER_LINK = "eth0"
COMMAND_TIMEOUT_S = 30.0
REDIRECT_TABLE = "dqc_relay"
NO_SUCH_TABLE = "No such file or directory"


class NetworkUnavailable(RuntimeError):
    """Namespaces cannot be made here; the message says why and what to do."""


def preflight() -> None:
    """NetworkUnavailable unless this process can make namespaces and rules."""
    if os.geteuid() != 0:
        raise NetworkUnavailable(
            "network faults run each node in its own network namespace, which needs root "
            "(CAP_NET_ADMIN and CAP_SYS_ADMIN): run disque-py chaos as root (sudo), or leave "
            "partition and netem out of --faults (and do not pass --netns)")
    for command, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(command) is None:
            raise NetworkUnavailable(
                f"network faults need `{command}`, which is not installed: apt-get install "
                f"{package} (make test installs it), or leave partition and netem out of "
                f"--faults")


def free_subnet(used: list, rng: random.Random) -> ipaddress.IPv4Network:
    """A /PREFIX of SUBNETS that overlaps none of `used` (networks)."""
    candidates = list(SUBNETS.subnets(new_prefix=PREFIX))
    rng.shuffle(candidates)
    for subnet in candidates:
        if not any(subnet.overlaps(network) for network in used):
            return subnet
    raise NetworkUnavailable(f"every /{PREFIX} of {SUBNETS} is in use on this host")


def networks_in_use() -> list:
    """The networks of the host's addresses and routes (the default route aside)."""
    found = []
    for args in (["-4", "-o", "addr"], ["-4", "route", "show", "table", "all"]):
        for word in _ip(*args).split():
            try:
                network = ipaddress.ip_network(word, strict=False)
            except ValueError:
                continue
            if network.prefixlen > 0:
                found.append(network)
    return found


class NetworkLab:
    def __init__(self, nodes: int, directory: Path, relays: bool, seed: int) -> None:
        self.count = nodes
        self.directory = Path(directory)
        self.with_relays = relays
        self.seed = seed
        self.tag = ""
        self.subnet: ipaddress.IPv4Network | None = None
        self.made_links: list[str] = []
        self.made_namespaces: list[str] = []
        self.relays: list[RelayProcess] = []

    # ---------------------------------------------------------- names

    @property
    def bridge(self) -> str:
        return f"{NAME_PREFIX}{self.tag}b"

    def namespace(self, index: int) -> str:
        return f"{NAME_PREFIX}-{self.tag}-{index}"

    def host_link(self, index: int) -> str:
        return f"{NAME_PREFIX}{self.tag}h{index}"

    def address(self, index: int) -> str:
        return str(self.subnet.network_address + index + 2)

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def launch(self, index: int) -> Launch:
        return Launch(host=self.address(index), prefix=("ip", "netns", "exec",
                                                        self.namespace(index)))

    def describe(self) -> str:
        return (f"namespaces {self.namespace(0)}..{self.count - 1} on {self.subnet} "
                f"(bridge {self.bridge} at {self.gateway})"
                + (", bus links through delaying relays" if self.with_relays else ""))

    # ---------------------------------------------------------- making it

    def claim(self) -> None:
        """Choose the tag and subnet and make the bridge (the claim), under the lock."""
        preflight()
        rng = random.SystemRandom()
        with _locked(LOCK_PATH):
            self.subnet = free_subnet(networks_in_use(), rng)
            self.tag = secrets.token_hex(3)
            self._make_link(self.bridge, ["link", "add", self.bridge, "type", "bridge"])
            _ip("addr", "add", f"{self.gateway}/{PREFIX}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")

    def create(self, client_ports: list[int]) -> None:
        """The namespaces and veths (and relays); the nodes' client ports name
        their bus ports, which the relays' redirect needs."""
        for index in range(self.count):
            self._make_node(index)
        if self.with_relays:
            for index in range(self.count):
                self._start_relay(index, client_ports)

    def _make_node(self, index: int) -> None:
        namespace, link = self.namespace(index), self.host_link(index)
        try:
            _ip("netns", "add", namespace)
        except NetworkUnavailable as error:
            raise NetworkUnavailable(
                f"cannot make network namespace {namespace} ({error}): network faults need "
                "a kernel and privileges that allow network namespaces, veth pairs and "
                "bridges (an unprivileged container does not)") from None
        self.made_namespaces.append(namespace)
        self._make_link(link, ["link", "add", link, "type", "veth", "peer", "name", INNER_LINK,
                               "netns", namespace])
        _ip("link", "set", link, "master", self.bridge, "up")
        _ip("-n", namespace, "addr", "add", f"{self.address(index)}/{PREFIX}",
            "dev", INNER_LINK)
        _ip("-n", namespace, "link", "set", INNER_LINK, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")

    def _make_link(self, name: str, args: list[str]) -> None:
        _ip(*args)
        self.made_links.append(name)

    def _start_relay(self, index: int, client_ports: list[int]) -> None:
        relay = RelayProcess(self.namespace(index), self.directory / f"relay{index}.log",
                             self.seed + index)
        self.relays.append(relay)
        relay.start()
        targets = [(self.address(other), port + BUS_PORT_OFFSET)
                   for other, port in enumerate(client_ports) if other != index]
        self.apply(index, redirect_table(REDIRECT_TABLE, targets, relay.port, RELAY_MARK))

    # ---------------------------------------------------------- rules

    def apply(self, index: int, script: str) -> None:
        """Load an nft script into node `index`'s namespace."""
        _run(["ip", "netns", "exec", self.namespace(index), "nft", "-f", "-"], script)

    def delete_table(self, index: int, family: str, name: str) -> None:
        """Remove a table from node `index`'s namespace; one already gone is fine."""
        try:
            _run(["ip", "netns", "exec", self.namespace(index), "nft", "delete", "table",
                  family, name])
        except NetworkUnavailable as error:
            if NO_SUCH_TABLE not in str(error):
                raise

    def tables(self, index: int) -> list[str]:
        """`family name` of every table in node `index`'s namespace."""
        out = _run(["ip", "netns", "exec", self.namespace(index), "nft", "list", "tables"])
        return [line.removeprefix("table ").strip() for line in out.splitlines() if line]

    def relay(self, index: int) -> RelayProcess:
        return self.relays[index]

    # ---------------------------------------------------------- removing it

    def remove(self) -> list[str]:
        """Delete everything made, relays first; what could not be deleted."""
        for relay in self.relays:
            relay.stop()
        self.relays.clear()
        left = []
        # A veth goes with its namespace only once the kernel frees it (late,
        # while sockets linger): each host end is deleted, taking its pair,
        # before the bridge, the first link made.
        for link in reversed(self.made_links):
            left += _attempt("link", "del", link)
        for namespace in self.made_namespaces:
            left += _attempt("netns", "del", namespace)
        self.made_links.clear()
        self.made_namespaces.clear()
        return left


def _ip(*args: str) -> str:
    return _run(["ip", *args])


def _run(argv: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise NetworkUnavailable(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def _attempt(*args: str) -> list[str]:
    """`ip ARGS`, ignored if it fails because the object is gone already."""
    try:
        _ip(*args)
    except NetworkUnavailable as error:
        if "Cannot find device" not in str(error) and "No such file" not in str(error):
            return [str(error)]
    except subprocess.TimeoutExpired:
        return [f"ip {' '.join(args)} timed out"]
    return []


@contextmanager
def _locked(path: str):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
