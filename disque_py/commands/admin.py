"""Server commands: AUTH, PING, INFO, HELLO, TIME, COMMAND, CONFIG, CLIENT,
SHUTDOWN, DEBUG, MONITOR.

HELLO has two faces. Bare, it is Disque's handshake: [1, my-id, [id, ip,
port, priority] ...]. With a protocol version it answers the way Redis 6+
clients expect (redis-py 8 opens every connection with HELLO 3): a map
whose proto field echoes the version asked for, and from then on the
connection's replies are RESP3 (HELLO 2 goes back to RESP2). Reply values
say which replies change shape (resp.py's Map, SetReply, Verbatim, nulls).
"""

from __future__ import annotations

import hmac
import re
import time

from disque_py import DISQUE_VERSION
from disque_py.commands import info as info_sections
from disque_py.commands.args import c_string, int_or_error, parse_int, parse_timeout
from disque_py.commands.cluster import hello_nodes
from disque_py.commands.context import NO_REPLY, REPLY_OFF, REPLY_SKIP_NEXT, compiled
from disque_py.base.disk_faults import FAULT_CODES
from disque_py.base.errors import CommandError, NoAuthError, NoProtoError, WrongPassError
from disque_py.base.replies import (BAD_CLIENT_NAME, CLIENT_SYNTAX, COMMAND_USAGE, CONFIG_ARITY,
                                    CONFIG_SUBCOMMANDS, DEBUG_USAGE, HELLO_BAD_OPTION,
                                    HELLO_NEEDS_AUTH, INVALID_PASSWORD, NOAUTH_MESSAGE,
                                    NO_PASSWORD_SET, NO_SUCH_CLIENT, PROTOCOL_NOT_INTEGER,
                                    REWRITE_IN_PROGRESS, REWRITE_NOT_STARTED, SYNTAX_ERROR,
                                    UNKNOWN_CLIENT_TYPE, UNRECOGNIZED_OPTION, UNSUPPORTED_PROTOCOL,
                                    WRONG_PASS)
from disque_py.formats.resp import OK, Map, Raw, SetReply, Verbatim

HELLO_FORMAT_VERSION = 1
SHUTDOWN_MODES = (b"nosave", b"save", b"rewrite-aof")
_STRTOD = re.compile(rb"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def auth(server, session, argv):
    """AUTH password"""
    password = server.requirepass
    if not password:
        raise CommandError(NO_PASSWORD_SET)
    session.authenticated = hmac.compare_digest(argv[1], password)
    if not session.authenticated:
        raise CommandError(INVALID_PASSWORD)
    return OK


# PING [message]
ping = compiled("ping")


def info(server, session, argv):
    """INFO [section]"""
    if len(argv) > 2:
        raise CommandError(SYNTAX_ERROR)
    section = argv[1].decode("latin-1").lower() if len(argv) == 2 else "default"
    return Verbatim(info_sections.render(server, section).encode())


def time_(server, session, argv):
    """TIME"""
    now_us = time.time_ns() // 1000
    return [b"%d" % (now_us // 1_000_000), b"%d" % (now_us % 1_000_000)]


def hello(server, session, argv):
    """HELLO, or HELLO protover [AUTH user pass] [SETNAME name]"""
    if len(argv) == 1:
        if server.requirepass and not session.authenticated:
            raise NoAuthError(NOAUTH_MESSAGE)
        return _disque_hello(server)
    protover = parse_int(argv[1])
    if protover is None:
        raise CommandError(PROTOCOL_NOT_INTEGER)
    if protover not in (2, 3):
        raise NoProtoError(UNSUPPORTED_PROTOCOL)
    _hello_options(server, session, argv[2:])
    session.resp3 = protover == 3     # this reply is the first in the new protocol
    return Map([b"server", b"disque", b"version", DISQUE_VERSION.encode(), b"proto", protover,
                b"id", session.id, b"mode", b"cluster", b"role", b"master", b"modules", []])


def _hello_options(server, session, options: list[bytes]) -> None:
    """Read every option first, then authenticate, then apply the rest, as
    Redis 6+ does: a HELLO refused for want of AUTH changes nothing (not
    the client's name either)."""
    password = name = None
    i = 0
    while i < len(options):
        option = options[i].lower()
        if option == b"auth" and i + 2 < len(options):
            password = options[i + 2]
            i += 3
        elif option == b"setname" and i + 1 < len(options):
            name = options[i + 1]
            _check_client_name(name)
            i += 2
        else:
            raise CommandError(HELLO_BAD_OPTION % options[i].decode("latin-1"))
    if password is not None:
        if not server.requirepass:
            raise CommandError(NO_PASSWORD_SET)
        if not hmac.compare_digest(password, server.requirepass):
            raise WrongPassError(WRONG_PASS)
        session.authenticated = True
    if server.requirepass and not session.authenticated:
        raise NoAuthError(HELLO_NEEDS_AUTH)
    if name is not None:
        session.name = name


def _disque_hello(server) -> list:
    return [HELLO_FORMAT_VERSION, server.node.id] + hello_nodes(server)


def command(server, session, argv):
    """COMMAND | COMMAND INFO name ... | COMMAND COUNT"""
    table = server.commands.commands
    resp3 = session.resp3
    if len(argv) == 1:
        return [_command_entry(cmd, resp3) for cmd in table.values()]
    sub = argv[1].lower()
    if sub == b"info":
        return [_command_entry(server.commands.lookup(name), resp3) for name in argv[2:]]
    if sub == b"count" and len(argv) == 2:
        return len(table)
    raise CommandError(COMMAND_USAGE)


def _command_entry(cmd, resp3: bool):
    """Disque's six fields; RESP3 clients (Redis 6+ clients) also get the
    ACL categories that Redis 6 added as a seventh."""
    if cmd is None:
        return None
    entry = [cmd.name, cmd.arity, SetReply(cmd.flag_names), 0, 0, 0]
    if resp3:
        entry.append(SetReply(cmd.acl_categories))
    return entry


def config(server, session, argv):
    """CONFIG GET pattern | SET name value | REWRITE | RESETSTAT"""
    sub = argv[1].lower()
    expected = {b"get": 3, b"set": 4, b"rewrite": 2, b"resetstat": 2}.get(sub)
    if expected is None:
        raise CommandError(CONFIG_SUBCOMMANDS)
    if len(argv) != expected:
        raise CommandError(CONFIG_ARITY % argv[1].decode("latin-1"))
    if sub == b"get":
        return Map(server.config.get_matching(argv[2]))
    if sub == b"set":        # Disque reads both as C strings: a NUL ends them
        server.config.set(c_string(argv[2]), c_string(argv[3]))
        return OK
    if sub == b"rewrite":
        server.config.rewrite()
        return OK
    server.stats.reset()
    server.commands.reset_stats()
    return OK


def client(server, session, argv):
    """CLIENT LIST | KILL ... | SETNAME name | GETNAME | REPLY ON|OFF|SKIP |
    PAUSE ms | SETINFO attr value"""
    sub = argv[1].lower()
    argc = len(argv)
    if sub == b"reply" and argc == 3:
        return _client_reply(session, argv[2].lower())
    if sub == b"pause" and argc == 3:
        server.pause_clients(parse_timeout(argv[2]))
        return OK
    if sub == b"list" and argc == 2:
        return Verbatim("".join(_client_line(server, other) + "\n"
                                for other in server.clients.values()).encode())
    if sub == b"kill":
        return _client_kill(server, session, argv)
    if sub == b"setname" and argc == 3:
        _set_client_name(session, argv[2])
        return OK
    if sub == b"getname" and argc == 2:
        return session.name or None
    if sub == b"setinfo" and argc == 4:
        attribute = argv[2].lower()
        if attribute not in (b"lib-name", b"lib-ver"):
            raise CommandError(UNRECOGNIZED_OPTION % argv[2].decode("latin-1"))
        if attribute == b"lib-name":
            session.lib_name = argv[3]
        else:
            session.lib_ver = argv[3]
        return OK
    raise CommandError(CLIENT_SYNTAX)


def _client_reply(session, mode: bytes):
    """ON answers OK; OFF and SKIP answer nothing (their own reply is the
    first one they drop)."""
    if mode == b"on":
        session.reply_flags = 0
        return OK
    if mode == b"off":
        session.reply_flags |= REPLY_OFF
    elif mode == b"skip":
        if not session.reply_flags & REPLY_OFF:
            session.reply_flags |= REPLY_SKIP_NEXT
    else:
        raise CommandError(SYNTAX_ERROR)
    return NO_REPLY


def _set_client_name(session, name: bytes) -> None:
    _check_client_name(name)
    session.name = name


def _check_client_name(name: bytes) -> None:
    if any(c < 33 or c > 126 for c in name):
        raise CommandError(BAD_CLIENT_NAME)


def _client_line(server, s) -> str:
    now = time.monotonic()
    flags = ("O" if s.monitor else "") + ("b" if s.waiting else "") + \
        ("c" if s.kill_requested else "")
    command_name = s.last_command.name.decode("latin-1") if s.last_command else "NULL"
    conn = s.conn
    qbuf = conn.input_buffered() if conn is not None else 0
    omem = conn.output_buffered() if conn is not None else 0
    return (f"id={s.id} addr={s.addr} fd={s.fd} name={s.name.decode('latin-1')} "
            f"age={int(now - s.created)} idle={int(now - s.last_interaction)} "
            f"flags={flags or 'N'} qbuf={qbuf} qbuf-free=0 obl=0 oll=0 omem={omem} "
            f"events=r cmd={command_name} "
            f"lib-name={s.lib_name.decode('latin-1')} lib-ver={s.lib_ver.decode('latin-1')}")


def _client_kill(server, session, argv):
    if len(argv) == 3:
        targets = [s for s in server.clients.values() if s.addr == argv[2].decode("latin-1")]
        if not targets:
            raise CommandError(NO_SUCH_CLIENT)
        for target in targets:
            server.request_kill(target)
        return OK
    if len(argv) < 3 or len(argv) % 2:
        raise CommandError(SYNTAX_ERROR)
    client_id, addr, skipme = 0, None, True
    for i in range(2, len(argv), 2):
        option, value = argv[i].lower(), argv[i + 1]
        if option == b"id":
            client_id = int_or_error(value)
        elif option == b"type":
            if value.lower() != b"normal":
                raise CommandError(UNKNOWN_CLIENT_TYPE % value.decode("latin-1"))
        elif option == b"addr":
            addr = value.decode("latin-1")
        elif option == b"skipme" and value.lower() in (b"yes", b"no"):
            skipme = value.lower() == b"yes"
        else:
            raise CommandError(SYNTAX_ERROR)
    killed = 0
    for target in list(server.clients.values()):
        if (addr is not None and target.addr != addr) or (client_id and target.id != client_id):
            continue
        if target is session and skipme:
            continue
        server.request_kill(target)
        killed += 1
    return killed


def shutdown(server, session, argv):
    """SHUTDOWN [NOSAVE|SAVE|REWRITE-AOF]"""
    if len(argv) > 2:
        raise CommandError(SYNTAX_ERROR)
    mode = argv[1].lower() if len(argv) == 2 else b"save"
    if mode not in SHUTDOWN_MODES:
        raise CommandError(SYNTAX_ERROR)
    server.shutdown_request = (mode.decode(), session)
    return NO_REPLY


def bgrewriteaof(server, session, argv):
    """BGREWRITEAOF"""
    persistence = server.persistence
    writer = persistence.writer if persistence is not None else None
    if writer is not None and writer.rewrite_in_progress:
        raise CommandError(REWRITE_IN_PROGRESS)
    if persistence is None or not persistence.start_rewrite():
        return CommandError(REWRITE_NOT_STARTED)
    return "Background append only file rewriting started"


def monitor(server, session, argv):
    """MONITOR"""
    if session.monitor:
        return NO_REPLY
    session.monitor = True
    server.monitors.append(session)
    return OK


def debug(server, session, argv):
    """DEBUG SLEEP seconds | FLUSHALL | ERROR message"""
    sub = argv[1].lower()
    if sub == b"flushall":        # extra arguments are ignored, as in Disque
        server.node.flush_all()
        return OK
    if sub == b"sleep" and len(argv) == 3:
        time.sleep(max(_strtod(argv[2]), 0.0))   # blocks everything, as in Disque
        return OK
    if sub == b"aof-fault" and len(argv) in (3, 4):
        return _aof_fault(server, argv)
    if sub == b"nodes-conf-fault" and len(argv) in (3, 4):
        return _nodes_conf_fault(server, argv)
    if sub == b"error" and len(argv) == 3:
        return Raw(b"-" + argv[2].replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
    raise CommandError(DEBUG_USAGE % argv[1].decode("latin-1"))


def _aof_fault(server, argv):
    """DEBUG AOF-FAULT enospc|eio|none [count]: the next file operations of
    the AOF fail (a test seam for full and failing disks)."""
    persistence = server.persistence
    writer = persistence.writer if persistence is not None else None
    return _inject(writer.ops if writer is not None else None, argv)


def _nodes_conf_fault(server, argv):
    """DEBUG NODES-CONF-FAULT enospc|eio|none [count]: the next saves of
    nodes.conf fail (a test seam for a full or failing disk)."""
    return _inject(server.cluster.save_faults if server.cluster is not None else None, argv)


def _inject(faults, argv):
    code = FAULT_CODES.get(argv[2].lower())
    count = int_or_error(argv[3]) if len(argv) == 4 else 1
    if code is None or faults is None:
        raise CommandError(SYNTAX_ERROR)
    faults.inject(code, count)
    return OK


def _strtod(value: bytes) -> float:
    """Leading decimal number, 0.0 if none, as C's strtod (finite only)."""
    match = _STRTOD.match(value)
    return float(match.group(0)) if match else 0.0

