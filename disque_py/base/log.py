"""Logging in Disque's format, to `logfile` (or stdout) and optionally syslog.

A line looks like Disque's:  "4242:P 21 Nov 13:54:48.541 * Server started"
(pid, role char, local time with milliseconds, level mark, message). Level
marks: '.' debug, '-' verbose, '*' notice, '#' warning. `loglevel` filters.
The log file is reopened when it is moved (WatchedFileHandler), so logrotate
works as it does with Disque, which reopens the file for every line. A line
that cannot be written (the file's directory removed, the disk full) is
dropped, as Disque drops it: logging must never stop a command or a shutdown.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time

VERBOSE = 15
NOTICE = 20
logging.addLevelName(VERBOSE, "VERBOSE")
logging.addLevelName(NOTICE, "NOTICE")

LEVELS = {"debug": logging.DEBUG, "verbose": VERBOSE, "notice": NOTICE,
          "warning": logging.WARNING}
_MARKS = {logging.DEBUG: ".", VERBOSE: "-", NOTICE: "*", logging.WARNING: "#",
          logging.ERROR: "#", logging.CRITICAL: "#"}
SYSLOG_FACILITIES = {f"local{n}": getattr(logging.handlers.SysLogHandler, f"LOG_LOCAL{n}")
                     for n in range(8)}
SYSLOG_FACILITIES["user"] = logging.handlers.SysLogHandler.LOG_USER

log = logging.getLogger("disque")


class DisqueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%d %b %H:%M:%S", time.localtime(record.created))
        millis = int(record.msecs)
        mark = _MARKS.get(record.levelno, "*")
        return f"{os.getpid()}:P {stamp}.{millis:03d} {mark} {record.getMessage()}"


class LogFileHandler(logging.handlers.WatchedFileHandler):
    """WatchedFileHandler that drops a line it cannot write. Its reopen
    happens outside logging's own error handling, so a removed directory
    would raise out of log.warning() into whatever was logging."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            super().emit(record)
        except OSError:
            self.stream = None      # try to reopen on the next line


def configure(logfile: str, loglevel: str, syslog_enabled: bool = False,
              syslog_ident: str = "disque", syslog_facility: str = "local0") -> None:
    """(Re)configure the 'disque' logger from config values."""
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    if logfile:
        handler: logging.Handler = LogFileHandler(logfile)
    else:
        handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(DisqueFormatter())
    log.addHandler(handler)
    if syslog_enabled:
        address = "/dev/log" if os.path.exists("/dev/log") else ("localhost", 514)
        syslog = logging.handlers.SysLogHandler(
            address=address, facility=SYSLOG_FACILITIES.get(syslog_facility, 16))
        syslog.setFormatter(logging.Formatter(f"{syslog_ident}[%(process)d]: %(message)s"))
        log.addHandler(syslog)
    log.setLevel(LEVELS.get(loglevel, NOTICE))
    log.propagate = False


def set_level(loglevel: str) -> None:
    log.setLevel(LEVELS.get(loglevel, NOTICE))


def verbose(message: str, *args) -> None:
    log.log(VERBOSE, message, *args)


def notice(message: str, *args) -> None:
    log.log(NOTICE, message, *args)


def warning(message: str, *args) -> None:
    log.warning(message, *args)
