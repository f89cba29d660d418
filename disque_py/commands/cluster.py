"""CLUSTER MEET | NODES | MYID | INFO | SAVECONFIG | FORGET | RESET | LEAVING."""

from __future__ import annotations

from disque_py.cluster.nodes import HANDSHAKE, MYSELF
from disque_py.formats.bus import NODE_ID_LEN
from disque_py.commands.args import parse_int
from disque_py.base.errors import CommandError
from disque_py.base.replies import (CANNOT_FORGET_MYSELF, INVALID_NODE_ADDRESS, INVALID_NODE_ID,
                                    INVALID_TCP_PORT, NODES_CONF_NOT_SAVED, SYNTAX_ERROR,
                                    UNKNOWN_NODE, WRONG_LEAVING_ARG, WRONG_SUBCOMMAND)
from disque_py.formats.resp import OK, Raw, Verbatim



def cluster(server, session, argv):
    """CLUSTER subcommand [arguments]"""
    handler = _SUBCOMMANDS.get((argv[1].lower(), len(argv)))
    if handler is None:
        raise CommandError(WRONG_SUBCOMMAND)
    return handler(server, argv)


def _meet(server, argv):
    port = parse_int(argv[3])
    if port is None:
        raise CommandError(INVALID_TCP_PORT % argv[3].decode("latin-1"))
    if not server.cluster.meet(argv[2].decode("latin-1"), port):
        raise CommandError(INVALID_NODE_ADDRESS
                           % (argv[2].decode("latin-1"), argv[3].decode("latin-1")))
    return OK


def link_state(node) -> str:
    """CLUSTER NODES's link field: our link to the node is up (to ourselves, always)."""
    return "connected" if node.linked or node.flags & MYSELF else "disconnected"


def _nodes(server, argv):
    lines = []
    for node in server.cluster.membership.nodes.values():
        lines.append(f"{node.id.decode()} {node.ip}:{node.port} {node.flag_names} "
                     f"{node.ping_sent} {node.pong_received} {link_state(node)}\n")
    return Verbatim("".join(lines).encode())


def _myid(server, argv):
    return server.node.id


def _info(server, argv):
    return Verbatim("".join(f"{key}:{value}\r\n"
                            for key, value in server.cluster.info_fields()).encode())


def _saveconfig(server, argv):
    try:
        server.cluster.save_config()
    except OSError as error:
        raise CommandError(NODES_CONF_NOT_SAVED % error.strerror) from None
    return OK


def _forget(server, argv):
    node_id = argv[2]
    if len(node_id) != NODE_ID_LEN:
        raise CommandError(INVALID_NODE_ID)
    membership = server.cluster.membership
    node = membership.nodes.get(node_id)
    if node is None:
        raise CommandError(UNKNOWN_NODE % node_id.decode("latin-1"))
    if node is membership.myself:
        raise CommandError(CANNOT_FORGET_MYSELF)
    server.cluster.forget(node)
    return OK


def _reset(server, argv):
    mode = argv[2].lower() if len(argv) == 3 else b"soft"
    if mode not in (b"hard", b"soft"):
        raise CommandError(SYNTAX_ERROR)
    server.cluster.reset(hard=mode == b"hard")
    return OK


def _leaving(server, argv):
    membership = server.cluster.membership
    if len(argv) == 2:
        return Raw(b"+yes\r\n" if membership.leaving else b"+no\r\n")
    answer = argv[2].lower()
    if answer not in (b"yes", b"no"):
        raise CommandError(WRONG_LEAVING_ARG)
    server.cluster.set_leaving(answer == b"yes")
    return OK


def hello_nodes(server) -> list:
    """HELLO's node list: [id, ip, port, priority] for every node past handshake."""
    if server.cluster is None:
        return [[server.node.id, server.announce_ip.encode(), b"%d" % server.port, b"1"]]
    return [[node.id, node.ip.encode(), b"%d" % node.port, b"%d" % node.priority]
            for node in server.cluster.membership.nodes.values()
            if not node.flags & HANDSHAKE]


_SUBCOMMANDS = {
    (b"meet", 4): _meet,
    (b"nodes", 2): _nodes,
    (b"myid", 2): _myid,
    (b"info", 2): _info,
    (b"saveconfig", 2): _saveconfig,
    (b"forget", 3): _forget,
    (b"reset", 2): _reset,
    (b"reset", 3): _reset,
    (b"leaving", 2): _leaving,
    (b"leaving", 3): _leaving,
}
