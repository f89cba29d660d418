"""`disque-py`: the server, and the tools around it, as click commands.

  disque-py server [--port N] [--bind ADDR] [--dir DIR] [--config FILE]
                   [--http-port N] [--http-bind ADDR]
      The server (server_cli.py), with click options that also read
      DISQUE_PORT, DISQUE_BIND, DISQUE_DIR, DISQUE_CONFIG, DISQUE_HTTP_PORT
      and DISQUE_HTTP_BIND from the environment.
  disque-py cluster ...
      Make and inspect a cluster of running nodes (cluster_cli.py).
  disque-py check-aof [--fix] FILE
      Is an AOF readable, and where not (check_aof.py).
  disque-py chaos [--nodes N] [--duration S] [--seed N] [--json [FILE]] ...
      The real-process fault checker (disque_py/tools/chaos/); exit status 1 when
      an acknowledged job was lost, a workload's promise broken or a server
      crashed. --json without FILE writes under chaos-reports/, which git ignores.
  disque-py worker MODULE:WORKER [--url URL] [--concurrency N] [--queues Q,...]
      Run a disque_py.client.Worker until SIGTERM (worker_cli.py).
  disque-py chaos-matrix [--seconds S] [--seeds N] [--rows NAME,...] [--disque-c BINARY]
      `make chaos`: every row of fault sets x workloads (chaos/matrix.py), each
      seed a `chaos` run of its own, tabled in chaos-reports/matrix-TIME.md.

A subcommand imports what it needs when it runs: `disque-py cluster` never
imports the compiled engine, so a stale build cannot stop it.
"""

from __future__ import annotations

import os
import shlex
import sys

import click

from disque_py import __version__
from disque_py.tools.check_aof import check_aof
from disque_py.tools.cluster_cli import cluster
from disque_py.tools.worker_cli import worker


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
    from disque_py.tools.server_cli import start
    sys.exit(start(config_file, args))


@main.command()
@click.option("--nodes", type=click.IntRange(2, 30), default=5, show_default=True,
              help="disque-server processes to start (on 127.0.0.1, or in namespaces).")
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
              help="Run the nodes with the AOF (appendfsync: --appendfsync).")
@click.option("--appendfsync", type=click.Choice(["always", "everysec", "no"]),
              default="always", show_default=True,
              help="The nodes' appendfsync; what a power loss may take is checked against "
                   "it (--faults powerloss).")
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
@click.option("--workload", default=None, metavar="NAME",
              help="The load and the promises checked beyond the total queue: plain "
                   "(default), backlog, dedup, maxdeliveries, waitjob, qrequeue "
                   "(docs/checking.md).")
@click.option("--backlog", type=click.IntRange(0), default=0, show_default=True,
              help="The backlog workload's size: jobs added before the faults to a queue no "
                   "consumer reads until the drain (what re-replication protects); alone, "
                   "it picks that workload.")
@click.option("--rereplicate/--no-rereplicate", default=None,
              help="The nodes' rereplicate directive: copy jobs again when holders are lost. "
                   "With it, a lost job is excused only if REPLICATE nodes were killed at once "
                   "(without an AOF) [default: on; Disque C has none].")
@click.option("--faults", "fault_names", default="kill,pause", show_default=True,
              metavar="KIND[,KIND...]",
              help="The kinds of fault, comma separated: kill (-9, then a restart), "
                   "pause (SIGSTOP, then SIGCONT), partition (nodes cut apart: one isolated, "
                   "halves, majorities ring, bridge), netem (loss, resets or delay on some "
                   "links), clock (the wall clock jumps or drifts, libfaketime), powerloss "
                   "(kill -9 and the AOF cut to what was fsynced), corrupt (a truncation or a "
                   "bit flip in one node's AOF or nodes.conf), membership (a spare joins, a "
                   "member leaves or is forgotten). With the AOF on, BGREWRITEAOFs too.")
@click.option("--netns/--no-netns", default=None,
              help="Run the nodes in network namespaces the run makes (needs root, ip and "
                   "nft) [default: when partition or netem is asked for; else loopback].")
@click.option("--disque-c", "disque_c", type=click.Path(dir_okay=False), default=None,
              metavar="BINARY",
              help="Run the nodes with Disque C's disque-server BINARY instead of ours, for "
                   "comparison: refused for workloads and faults that need disque-py's "
                   "extensions (dedup, maxdeliveries, waitjob, qrequeue; powerloss, corrupt, "
                   "membership), which the message names.")
@click.option("--json", "json_path", is_flag=False, flag_value="", metavar="[FILE]",
              type=click.Path(dir_okay=False),
              help="Also write the report as JSON: to FILE, or without FILE to "
                   "chaos-reports/chaos-SEED-TIME.json (git ignores chaos-reports/).")
def chaos(json_path, fault_names, **options) -> None:
    """Kill, pause, partition and restart real nodes under load; check no job is lost.

    Starts the nodes on free 127.0.0.1 ports (with partition or netem, each in
    a network namespace of its own behind a bridge), joins them, runs the
    workload's producers (ADDJOB ... REPLICATE) and consumers (GETJOB, NACK,
    WORKING, ACKJOB) against random nodes while the faults asked for hit
    random nodes or links; then heals and restarts everything, drains, and
    reports lost, unexpected, delivered and duplicated jobs, the delays to a
    first delivery, and the workload's own promises. Exit status 1 on a lost
    acknowledged job, an unexpected delivery, a broken promise or a server
    crash, with the command that replays the run; every node, namespace and
    rule made is removed, even on Ctrl-C."""
    from disque_py.tools.chaos import disque_c
    from disque_py.tools.chaos.run import ChaosOptions, fault_kinds, run, workload_name
    try:
        options["faults"] = fault_kinds(fault_names)
        ChaosOptions(**options).uses_network()
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--faults'") from None
    try:
        options["workload"] = workload_name(options["workload"], options["backlog"])
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--workload'") from None
    try:
        disque_c.check(ChaosOptions(**options))
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--disque-c'") from None
    try:
        report = run(ChaosOptions(**options), click.echo)
    except RuntimeError as error:
        raise click.ClickException(str(error)) from None
    report.replay = replay_command(click.get_current_context(), report.seed)
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


# Options that say where a run writes, not what it does: left out of its replay.
NOT_REPLAYED = ("json_path", "directory", "keep")


def replay_command(context: click.Context, seed: int) -> str:
    """The command line that replays a chaos run: every option it was run
    with (defaults included, so a later change of default does not change
    the replay), and the seed it drew."""
    words = ["disque-py", context.info_name or "chaos"]
    for param in context.command.params:
        value = seed if param.name == "seed" else context.params.get(param.name)
        if param.name in NOT_REPLAYED or value is None or not isinstance(param, click.Option):
            continue
        if param.is_flag and param.secondary_opts:
            words.append(param.opts[0] if value else param.secondary_opts[0])
        elif not param.is_flag:
            words += [param.opts[0], str(value)]
    return shlex.join(words)


@main.command("chaos-matrix")
@click.option("--seconds", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds of faults in each run.")
@click.option("--seeds", type=click.IntRange(1), default=2, show_default=True,
              help="Runs per row, seeded FIRST_SEED, FIRST_SEED + 1, ...")
@click.option("--first-seed", type=int, default=1, show_default=True)
@click.option("--rows", "row_names", default="", metavar="NAME[,NAME...]",
              help="Only these rows (--list names them) [default: all].")
@click.option("--disque-c", "disque_c", type=click.Path(exists=True, dir_okay=False),
              default=None, metavar="BINARY",
              help="Disque C's disque-server, for its comparison rows (without it they are "
                   "listed as not run).")
@click.option("--list", "list_rows", is_flag=True, help="List the rows and exit.")
def chaos_matrix(seconds, seeds, first_seed, row_names, disque_c, list_rows) -> None:
    """Run the chaos matrix: fault sets x workloads, seeds one after another.

    Each seed of each row is one `disque-py chaos` run; the table (acknowledged,
    lost, unexpected, duplicate rate, longest delay after the heal, crashes,
    the workload's findings, PASS/FAIL) goes to chaos-reports/matrix-TIME.md,
    with every run's output and JSON report in chaos-reports/matrix-TIME/.
    Exit status 1 if any row fails."""
    from disque_py.tools.chaos import matrix
    try:
        rows = matrix.pick_rows(row_names)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--rows'") from None
    if list_rows:
        for row in rows:
            click.echo(f"{row.name:20} {row.server:9} {row.nodes} nodes  --faults {row.faults} "
                       f"--workload {row.workload} {' '.join(row.options)}".rstrip())
        return
    seed_list = list(range(first_seed, first_seed + seeds))
    sys.exit(0 if matrix.run_matrix(rows, seed_list, seconds, disque_c, click.echo) else 1)


main.add_command(cluster)
main.add_command(check_aof)
main.add_command(worker)


if __name__ == "__main__":      # how the chaos matrix starts each run
    main()
