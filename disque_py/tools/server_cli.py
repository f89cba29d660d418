"""`disque-server`: the server binary, as Disque's.

  disque-server [CONFIG_FILE] [--directive value ...]
      Behaves like Disque's binary: init scripts and test harnesses that run
      `disque-server path/disque.conf` work unchanged. `-` reads the config
      from stdin; directives given as --options apply after the file. With
      `daemonize yes` it returns once the node listens (status 0), or once
      it failed to start (status 1, the reason on stderr, no pid file).
  python -m disque_py ...
      The same as disque-server.

start() is also what `disque-py server` runs (cli.py).
"""

from __future__ import annotations

import errno
import logging
import os
import sys

from disque_py import DISQUE_VERSION, __version__
from disque_py.base import log
from disque_py.base.errors import ConfigError

USAGE = """Usage: disque-server [/path/to/disque.conf] [options]
       disque-server - (read config from stdin)
       disque-server -v or --version
       disque-server -h or --help

Examples:
       disque-server (run the server with default conf)
       disque-server /etc/disque/7711.conf
       disque-server --port 7777
       disque-server /etc/mydisque.conf --loglevel verbose
"""


DAEMON_READY = b"\0READY\n"


def server_main(argv: list[str] | None = None) -> None:
    """The `disque-server` binary."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-v", "--version"):
        print(f"Disque server v={DISQUE_VERSION} disque-py={__version__}")
        sys.exit(0)
    if args and args[0] in ("-h", "--help"):
        print(USAGE, end="")
        sys.exit(0)
    config_file = None
    if args and (not args[0].startswith("--") or args[0] == "-"):
        config_file = args.pop(0)
    sys.exit(start(config_file, args))


def start(config_file: str | None, directive_args: list[str]) -> int:
    """Load the configuration, then run the server in this process."""
    from disque_py.config import Config
    # INFO's executable, made absolute before `dir` changes the working
    # directory, as Disque does: `make run` runs .venv/bin/disque-server
    # with --dir run/PORT.
    executable = os.path.abspath(sys.argv[0])
    try:
        config = Config.load(config_file, directive_args)
    except ConfigError as error:
        print(error.report(), file=sys.stderr)
        return 1
    log.configure(config.logfile, config.loglevel, config.syslog_enabled,
                  config.syslog_ident, config.syslog_facility)
    on_ready = _daemon_ready(_daemonize(config.logfile), config.pidfile) \
        if config.daemonize else None
    if config_file is None:
        log.warning("Warning: no config file specified, using the default config. "
                    "In order to specify a config file use disque-server /path/to/disque.conf")
    from disque_py.server.runtime import run_server
    try:
        return run_server(config, executable, on_ready=on_ready)
    except OSError as error:
        hint = ""
        if error.errno == errno.EADDRINUSE:
            hint = " (another program has the port: choose another with --port N, " \
                   "or make run PORT=N)"
        log.warning("Could not start the server: %s%s", error, hint)
        return 1


class _StartupReport(logging.Handler):
    """The daemon's side of a pipe to the process that started it: warnings
    logged while starting go through it, then READY once the node listens.
    If the daemon exits first, the pipe closes without READY."""

    def __init__(self, fd: int) -> None:
        super().__init__(logging.WARNING)
        self.fd = fd

    def emit(self, record: logging.LogRecord) -> None:
        if self.fd >= 0:
            try:
                os.write(self.fd, record.getMessage().replace("\n", " ").encode() + b"\n")
            except OSError:
                pass

    def ready(self) -> None:
        log.log.removeHandler(self)
        if self.fd >= 0:
            try:
                os.write(self.fd, DAEMON_READY)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = -1


def _daemonize(logfile: str) -> _StartupReport:
    """Fork into the background, as Disque does, except that the command
    returns only once the node is listening (exit 0), or has failed to
    start (exit 1, the reason on stderr): a script starting nodes learns
    that one could not start, and no pid file is left for it."""
    read_end, write_end = os.pipe()
    if os.fork():
        os.close(write_end)
        os._exit(_wait_for_daemon(read_end, logfile))
    os.close(read_end)
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    report = _StartupReport(write_end)
    log.log.addHandler(report)
    return report


def _wait_for_daemon(read_end: int, logfile: str) -> int:
    """In the process that was started: the daemon's exit status to give."""
    received = b""
    while chunk := os.read(read_end, 4096):
        received += chunk
    if received.endswith(DAEMON_READY):
        return 0
    for line in received.decode(errors="replace").splitlines():
        print(f"disque-server: {line}", file=sys.stderr)
    where = f"the log ({logfile})" if logfile else "the log (logfile is empty: none was kept)"
    print(f"disque-server: the daemonized server did not start; see {where}", file=sys.stderr)
    sys.stderr.flush()            # the caller leaves with os._exit
    return 1


def _daemon_ready(daemon: "_StartupReport", pidfile: str):
    """What a daemon does once its node listens: write the pid file, then
    tell the process that started it."""
    def ready() -> None:
        if pidfile:
            _write_pidfile(pidfile)
        daemon.ready()
    return ready


def _write_pidfile(path: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    except OSError as error:
        log.warning("Could not write the pid file %s: %s", path, error)
