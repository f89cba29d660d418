"""Diagnostics commands: SLOWLOG and LATENCY.

They read and reset the server's SlowLog and LatencyMonitor
(monitoring/slowlog.py, monitoring/latency.py), which the connection and the
runtime fill. Subcommands, reply shapes and error texts are Disque 1.0's:
SLOWLOG answers any bad form with one usage error, LATENCY with a syntax
error; an unknown event has an empty HISTORY but no GRAPH.
"""

from __future__ import annotations

from disque_py.commands.args import int_or_error
from disque_py.base.errors import CommandError
from disque_py.base.replies import NO_SAMPLES, SLOWLOG_USAGE, SYNTAX_ERROR
from disque_py.formats.resp import OK, Verbatim
from disque_py.monitoring import latency_report

SLOWLOG_DEFAULT_COUNT = 10


def slowlog(server, session, argv):
    """SLOWLOG GET [count] | LEN | RESET"""
    sub = argv[1].lower()
    argc = len(argv)
    if sub == b"get" and argc <= 3:
        count = int_or_error(argv[2]) if argc == 3 else SLOWLOG_DEFAULT_COUNT
        return server.slowlog.newest(count)
    if sub == b"len" and argc == 2:
        return len(server.slowlog)
    if sub == b"reset" and argc == 2:
        server.slowlog.reset()
        return OK
    raise CommandError(SLOWLOG_USAGE)


def latency(server, session, argv):
    """LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR"""
    sub = argv[1].lower()
    argc = len(argv)
    monitor = server.latency
    if sub == b"history" and argc == 3:
        return monitor.history(_event(argv[2]))
    if sub == b"graph" and argc == 3:
        event = _event(argv[2])
        if event not in monitor.events:
            raise CommandError(NO_SAMPLES % event)
        return Verbatim(latency_report.graph(monitor, event))
    if sub == b"latest" and argc == 2:
        return monitor.latest()
    if sub == b"doctor" and argc == 2:
        return Verbatim(latency_report.doctor(monitor, server.slowlog.slower_than_us))
    if sub == b"reset":
        return monitor.reset([_event(name) for name in argv[2:]] if argc > 2 else None)
    raise CommandError(SYNTAX_ERROR)


def _event(name: bytes) -> str:
    return name.decode("latin-1")
