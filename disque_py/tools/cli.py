"""Command-line entry points, kept thin.

  disque-server [CONFIG_FILE] [--directive value ...]
      Behaves like Disque's binary: init scripts and test harnesses that run
      `disque-server path/disque.conf` work unchanged. `-` reads the config
      from stdin; directives given as --options apply after the file. With
      `daemonize yes` it returns once the node listens (status 0), or once
      it failed to start (status 1, the reason on stderr, no pid file).
  python -m disque_py ...
      The same as disque-server.
  disque-py server [--port N] [--bind ADDR] [--dir DIR] [--config FILE]
                   [--http-port N] [--http-bind ADDR]
      The same server, with click options that also read DISQUE_PORT,
      DISQUE_BIND, DISQUE_DIR, DISQUE_CONFIG, DISQUE_HTTP_PORT and
      DISQUE_HTTP_BIND from the environment.
  disque-py chaos [--nodes N] [--duration S] [--seed N] [--json [FILE]] ...
      The real-process fault checker (disque_py/tools/chaos/); exit status 1 when
      an acknowledged job was lost or a server crashed. --json without FILE
      writes under chaos-reports/, which git ignores.
  disque [redis-cli options] [command ...]
      Disque's command-line client, which is redis-cli with 7711 as its
      default port: this one runs redis-cli so (a -p, -u or -s given
      overrides the port, as redis-cli reads its options in order).
"""

from __future__ import annotations

import errno
import logging
import os
import sys

import click

from disque_py import DISQUE_VERSION, __version__
from disque_py.base import log
from disque_py.tools.cluster_cli import cluster
from disque_py.base.errors import ConfigError
from disque_py.persistence.check import check_aof

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


DEFAULT_PORT = "7711"
DAEMON_READY = b"\0READY\n"
REDIS_CLI = "redis-cli"


def client_main(argv: list[str] | None = None) -> None:
    """The `disque` command-line client."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        os.execvp(REDIS_CLI, [REDIS_CLI, "-p", DEFAULT_PORT, *args])
    except FileNotFoundError:
        print("disque: redis-cli is needed (Debian/Ubuntu: apt install redis-tools)",
              file=sys.stderr)
        sys.exit(127)


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
    log.configure(config["logfile"], config["loglevel"], config["syslog-enabled"],
                  config["syslog-ident"], config["syslog-facility"])
    on_ready = None
    if config["daemonize"]:
        daemon = _daemonize(config["logfile"])
        pidfile = config["pidfile"]

        def on_ready() -> None:
            if pidfile:
                _write_pidfile(pidfile)
            daemon.ready()
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


def _write_pidfile(path: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    except OSError as error:
        log.warning("Could not write the pid file %s: %s", path, error)


@click.group()
@click.version_option(__version__, prog_name="disque-py")
def main() -> None:
    """disque-py: a Disque 1.0-rc1 compatible job queue, and its tools."""


@main.command()
@click.option("--config", "config_file", envvar="DISQUE_CONFIG", type=click.Path(),
              help="A disque.conf file to load first.")
@click.option("--port", envvar="DISQUE_PORT", type=click.IntRange(0, 65535),
              help="Client port (the cluster bus uses port + 10000).")
@click.option("--bind", envvar="DISQUE_BIND", help="Address(es) to listen on, space separated.")
@click.option("--dir", "directory", envvar="DISQUE_DIR", type=click.Path(file_okay=False),
              help="Working directory: nodes.conf, the AOF and relative paths live here.")
@click.option("--http-port", envvar="DISQUE_HTTP_PORT", type=click.IntRange(0, 65535),
              help="HTTP port for /metrics, /healthz, /readyz and the dashboard (0: none).")
@click.option("--http-bind", envvar="DISQUE_HTTP_BIND",
              help="Address(es) the HTTP port listens on, space separated (default: --bind's).")
def server(config_file, port, bind, directory, http_port, http_bind) -> None:
    """Run a node in the foreground."""
    args: list[str] = []
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
        args += ["--dir", directory]
    if port is not None:
        args += ["--port", str(port)]
    if bind is not None:
        args += ["--bind", *bind.split()]
    if http_port is not None:
        args += ["--http-port", str(http_port)]
    if http_bind is not None:
        args += ["--http-bind", *http_bind.split()]
    sys.exit(start(config_file, args))


@main.command()
@click.option("--nodes", type=click.IntRange(2, 30), default=5, show_default=True,
              help="disque-server processes to start on 127.0.0.1.")
@click.option("--duration", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds of load and faults (the recovery and drain come after).")
@click.option("--seed", type=int, default=None,
              help="Seed of the fault schedule and the clients' choices (default: random, "
                   "printed).")
@click.option("--replicate", type=click.IntRange(1), default=3, show_default=True,
              help="ADDJOB's REPLICATE.")
@click.option("--max-down", type=click.IntRange(0), default=None,
              help="Most nodes killed or paused at once [default: replicate - 1].")
@click.option("--appendonly/--no-appendonly", default=True, show_default=True,
              help="Run the nodes with the AOF and appendfsync always.")
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Where to create the run's directory [default: the system's temp dir].")
@click.option("--keep", is_flag=True,
              help="Keep the nodes' directories and logs (always kept when the run fails).")
@click.option("--producers", type=click.IntRange(1), default=2, show_default=True)
@click.option("--consumers", type=click.IntRange(1), default=3, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="ADDJOBs per second, all producers together.")
@click.option("--retry", type=click.IntRange(1), default=5, show_default=True,
              help="The jobs' RETRY in seconds.")
@click.option("--node-timeout", "node_timeout_ms", type=click.IntRange(100), default=3000,
              show_default=True, help="The nodes' cluster-node-timeout, milliseconds.")
@click.option("--fault-interval", type=click.FloatRange(min=0.1), default=4.0,
              show_default=True, help="Mean seconds between faults.")
@click.option("--drain-timeout", type=click.FloatRange(min=1), default=180.0,
              show_default=True, help="Most seconds to wait for every job to be delivered.")
@click.option("--backlog", type=click.IntRange(0), default=0, show_default=True,
              help="Jobs added before the faults to a queue no consumer reads until the "
                   "drain (what re-replication protects).")
@click.option("--rereplicate/--no-rereplicate", default=True, show_default=True,
              help="The nodes' rereplicate directive: copy jobs again when holders are lost. "
                   "With it, a lost job is excused only if REPLICATE nodes were killed at once "
                   "(without an AOF).")
@click.option("--pauses/--no-pauses", default=True, show_default=True,
              help="SIGSTOP/SIGCONT faults besides kill -9 (--no-pauses: kill -9 only).")
@click.option("--json", "json_path", is_flag=False, flag_value="", metavar="[FILE]",
              type=click.Path(dir_okay=False),
              help="Also write the report as JSON: to FILE, or without FILE to "
                   "chaos-reports/chaos-SEED-TIME.json (git ignores chaos-reports/).")
def chaos(json_path, **options) -> None:
    """Kill, pause and restart real nodes under load; check no job is lost.

    Starts the nodes on free 127.0.0.1 ports, joins them, runs producers
    (ADDJOB ... REPLICATE) and consumers (GETJOB, NACK, WORKING, ACKJOB)
    against random nodes while kill -9 and SIGSTOP/SIGCONT faults hit random
    nodes; then restarts everything, drains, and reports lost, delivered and
    duplicated jobs. Exit status 1 on a lost acknowledged job or a server
    crash; every node started is stopped, even on Ctrl-C."""
    from disque_py.tools.chaos.run import ChaosOptions, run
    try:
        report = run(ChaosOptions(**options), click.echo)
    except RuntimeError as error:
        raise click.ClickException(str(error)) from None
    for line in report.lines():
        click.echo(line)
    if json_path is not None:
        from disque_py.tools.chaos.report import default_json_path
        path = json_path or default_json_path(report.seed)
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(report.to_json())
        click.echo(f"JSON report: {path}")
    sys.exit(report.exit_status)


main.add_command(cluster)

main.add_command(check_aof)
