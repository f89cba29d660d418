"""Where a client connects, and how: addresses, TLS, AUTH, protocol.

A URL names one node or several, comma separated:

    disque://host[:port][,host[:port]...][?option=value&...]
    disques://[user:]password@host:port,...        TLS (the ssl module)

A password is sent with AUTH (HELLO 3 AUTH under RESP3); Disque has no
users, so a user name in the URL is ignored.

Port 7711 by default; RESP2 unless `protocol=3` is given. The query
takes redis-py's connection options
(`socket_timeout`, `ssl_ca_certs`, `ssl_cert_reqs`, `protocol`, ...), as
redis-py reads them from its own URLs. Keyword arguments given to the
client add to the URL's and win over them; `nodes=` adds addresses.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from inspect import signature
from typing import Any
from urllib.parse import unquote

from redis.connection import AbstractConnection
from redis.connection import parse_url as redis_url_options

from disque_py.client.routing import RETRY_AFTER_S, SWITCH_AFTER_JOBS, Address

DEFAULT_PORT = 7711
MAX_PORT = 65535
SCHEMES = {"disque": "redis", "disques": "rediss"}
DEFAULT_URL = "disque://127.0.0.1:7711"
# RESP2 unless asked: Disque 1.0 speaks nothing else (redis-py 8's default,
# RESP3, opens each connection with a HELLO 3 it refuses), and the client's
# answers are the same under both.
DEFAULT_PROTOCOL = 2
# Disque has one database and no CLIENT SETINFO: redis-py must not send them.
# redis-py 8.1 turns SETINFO off with driver_info=None (its lib_name and
# lib_version are deprecated, and warn); older releases with those two.
_FIXED_OPTIONS: dict[str, Any] = (
    {"driver_info": None} if "driver_info" in signature(AbstractConnection.__init__).parameters
    else {"lib_name": None, "lib_version": None})
_NOT_CONNECTION_OPTIONS = ("host", "port", "db", "connection_class")


@dataclass
class Settings:
    """Addresses, whether to use TLS, and the options every connection takes."""

    addresses: list[Address]
    tls: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    # routing.py's: seconds a lost node is left aside, jobs between a
    # consumer's looks at which node produced them.
    retry_after: float = RETRY_AFTER_S
    switch_after: int = SWITCH_AFTER_JOBS

    def connection_options(self, address: Address) -> dict[str, Any]:
        """redis-py's Connection keyword arguments for one node."""
        return {**self.options, **_FIXED_OPTIONS, "host": address[0], "port": address[1]}


def parse_address(text: str) -> Address:
    """host, host:port, [v6], [v6]:port, or a bare IPv6 address (port 7711)."""
    text = text.strip()
    port: str | None = None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or rest[:1] not in ("", ":"):
            raise ValueError(f"bad node address {text!r}: an IPv6 one is [address]:port")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host = text
        if ":" in host and not _is_ipv6(host):
            raise ValueError(f"bad node address {text!r}: host:port, or [address]:port "
                             f"for IPv6")
    if not host:
        raise ValueError(f"no host in node address {text!r}")
    if port is None:
        return host, DEFAULT_PORT
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) <= MAX_PORT:
        raise ValueError(f"bad port in node address {text!r}: 1 to {MAX_PORT}")
    return host, int(port)


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def settings_from(url: str | None, nodes: Sequence[str | Address] | None,
                  options: dict[str, Any]) -> Settings:
    """The settings of a client made with this URL, these extra nodes and
    these connection options."""
    if url is None:
        url = "disque://" if nodes else DEFAULT_URL
    scheme, _, rest = url.partition("://")
    if scheme not in SCHEMES:
        raise ValueError(f"a client URL is disque://host:port[,host:port...] or "
                         f"disques://...; not {url!r}")
    rest, _, query = rest.partition("?")
    userinfo, _, hosts = rest.rpartition("@")
    hosts = hosts.split("/", 1)[0]
    url_options = redis_url_options(f"{SCHEMES[scheme]}://localhost?{query}" if query
                                    else f"{SCHEMES[scheme]}://localhost")
    for key in _NOT_CONNECTION_OPTIONS:
        url_options.pop(key, None)
    if userinfo:
        # Disque has no users, only requirepass: a user name is dropped, as
        # redis-py would send AUTH user password, which Disque refuses.
        user, has_password, password = userinfo.partition(":")
        url_options["password"] = unquote(password if has_password else user)
    addresses = [parse_address(host) for host in hosts.split(",") if host.strip()]
    for node in nodes or ():
        address = parse_address(node) if isinstance(node, str) else (node[0], int(node[1]))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ValueError(f"no node address in {url!r}")
    return Settings(addresses, tls=scheme == "disques",
                    options={"protocol": DEFAULT_PROTOCOL, **url_options, **options})
