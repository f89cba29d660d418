"""`disque-py chaos --disque-c BINARY` without running Disque C: what it
refuses and why, the command line its nodes get (Disque C's binary, no
--rereplicate) and the crashes its log file shows."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from disque_py.tools.chaos import disque_c
from disque_py.tools.chaos.nodes import Launch, Node
from disque_py.tools.chaos.run import ChaosOptions, Run
from disque_py.tools.cli import main


@pytest.fixture
def binary(tmp_path):
    """A stand-in disque-server: any executable file passes the check."""
    path = tmp_path / "disque-server"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("faults", [("kill", "pause"), ("partition", "netem"), ("clock",),
                                    ("kill", "pause", "partition", "netem", "clock")])
@pytest.mark.parametrize("workload", ["plain", "backlog"])
def test_what_both_servers_have_is_accepted(binary, faults, workload):
    options = ChaosOptions(disque_c=binary, faults=faults, workload=workload)
    assert disque_c.refusals(options) == []
    disque_c.check(options)


@pytest.mark.parametrize("workload, why", [("dedup", "DEDUP"), ("maxdeliveries", "MAXDELIVERIES"),
                                           ("waitjob", "WAITJOB"), ("qrequeue", "QREQUEUE")])
def test_workloads_of_our_extensions_are_refused_with_the_extension_named(binary, workload, why):
    [problem] = disque_c.refusals(ChaosOptions(disque_c=binary, workload=workload))
    assert problem.startswith(f"--workload {workload}: ") and why in problem


@pytest.mark.parametrize("kind, why", [("powerloss", "durable offset"),
                                       ("corrupt", "checksum"), ("membership", "rereplicate")])
def test_faults_that_need_our_seams_are_refused_with_the_reason(binary, kind, why):
    [problem] = disque_c.refusals(ChaosOptions(disque_c=binary, faults=("kill", kind)))
    assert problem.startswith(f"--faults {kind}: ") and why in problem


def test_every_reason_is_given_at_once(tmp_path):
    options = ChaosOptions(disque_c=str(tmp_path / "missing"), faults=("powerloss",),
                           workload="dedup", rereplicate=True)
    with pytest.raises(ValueError) as error:
        disque_c.check(options)
    message = str(error.value)
    assert message.startswith("Disque C cannot run this: ")
    for word in ("not an executable file", "--faults powerloss", "--workload dedup",
                 "--rereplicate"):
        assert word in message


def test_our_server_is_never_refused():
    disque_c.check(ChaosOptions(workload="dedup", faults=("powerloss",), rereplicate=True))


def test_the_command_line_refuses_before_starting_anything(binary):
    result = CliRunner().invoke(main, ["chaos", "--disque-c", binary, "--workload", "waitjob"])
    assert result.exit_code == 2
    assert "--disque-c" in result.output and "WAITJOB is a disque-py extension" in result.output


def test_disque_c_nodes_run_its_binary_without_our_directives(binary, tmp_path):
    chaos = Run(ChaosOptions(directory=str(tmp_path), disque_c=binary), echo=lambda line: None)
    try:
        node = chaos.fleet.nodes[0]
        line = node.command_line()
        assert line[0] == binary and line[1:3] == ["--port", str(node.port)]
        assert "--rereplicate" not in line and "--appendfsync" in line
        assert chaos.options.rereplicate is False          # checked as a --no-rereplicate run
        assert chaos.options.settings()["server"] == "Disque C"
    finally:
        chaos.cleanup(keep=False)


def test_our_nodes_rereplicate_by_default(tmp_path):
    chaos = Run(ChaosOptions(directory=str(tmp_path)), echo=lambda line: None)
    try:
        line = chaos.fleet.nodes[0].command_line()
        assert line[1:3] == ["-m", "disque_py"] and "--rereplicate" in line
        assert line[line.index("--rereplicate") + 1] == "yes"
        assert chaos.options.settings()["server"] == "disque-py"
    finally:
        chaos.cleanup(keep=False)


def test_disque_c_bug_reports_in_its_log_file_are_crashes(tmp_path):
    node = Node(0, tmp_path / "node0", [], Launch(server=("disque-server",)))
    (node.dir / "server.log").write_text(
        "1:P 28 Nov 20:21:20.208 # Server started, Disque version 1.0-rc1\n"
        "1:P 28 Nov 20:22:00.001 # Disque 1.0-rc1 crashed by signal: 11\n"
        "1:P 28 Nov 20:22:00.002 # Crashed running the instruction at: 0x4242\n"
        "\n\n=== DISQUE BUG REPORT START: Cut & paste starting from here ===\n"
        "1:P 28 Nov 20:22:01.000 # === ASSERTION FAILED ===\n"
        "1:P 28 Nov 20:22:01.001 # Guru Meditation: job->state #queue.c:42\n")
    crashes = node.crashes()
    assert [c.where for c in crashes] == ["server.log:2", "server.log:6", "server.log:7",
                                          "server.log:8"]
    assert "Crashed running the instruction" in crashes[0].text

