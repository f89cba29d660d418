"""`disque-py chaos` with network faults, end to end: nodes in network
namespaces the run makes, partitions and slow or lossy links between them.

A short run (3 nodes, REPLICATE 2, 40 s of partitions and netem faults) must
lose nothing, crash nothing, and leave nothing of its network behind (no
namespace, veth, bridge, nftables table or relay process); a checker
stopped with SIGTERM mid-run must remove them too. Making namespaces needs
root, ip (iproute2) and nft (nftables; `make test` installs both): without
them these tests are skipped, and tests/unit/test_chaos_network.py speaks
for the faults' logic.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.test_chaos import (RUN_TIMEOUT_S, chaos_command, processes_using,
                                      sigterm_mid_run)

NETWORK_LINE = re.compile(r"network: namespaces dqc-(\w+)-0\.\.")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
    reason="network faults need root, ip (iproute2) and nft (nftables)")


def run_tag(output: str) -> str:
    match = NETWORK_LINE.search(output)
    assert match, output
    return match.group(1)


def _lines(*argv: str) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.splitlines()


def network_of(tag: str) -> list[str]:
    """What the run with this tag still has: namespaces, links, relay processes
    (and any nftables table of ours in the root namespace, where there should
    never be one)."""
    found = [f"netns {line}" for line in _lines("ip", "netns", "list") if f"dqc-{tag}-" in line]
    found += [f"link {line}" for line in _lines("ip", "-o", "link") if f"dqc{tag}" in line]
    found += [f"table {line}" for line in _lines("nft", "list", "tables") if "dqc" in line]
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "chaos.relay" in cmdline and f"dqc-{tag}-" in cmdline:
            found.append(f"relay {entry.name}")
    return found


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_partitions_and_slow_links_lose_nothing_and_leave_nothing(tmp_path):
    report_path = tmp_path / "report.json"
    result = subprocess.run(chaos_command(tmp_path, "--faults", "partition,netem",
                                          "--duration", "40", "--seed", "11",
                                          "--json", str(report_path)),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    assert report["passed"] and report["lost_count"] == 0 and report["crash_count"] == 0, output
    faults = report["faults"]
    assert faults["partition"] >= 2 and faults["netem"] >= 2, output
    assert report["settings"]["network"] == "namespaces"
    assert "network faults: " in result.stdout
    assert report["counts"]["adds_acknowledged"] > 50, output
    assert processes_using(tmp_path) == []
    assert network_of(run_tag(output)) == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_mid_run_removes_the_network(tmp_path):
    def network_made(output: str) -> None:
        made = network_of(run_tag(output))
        assert sum(item.startswith("netns") for item in made) == 3, made
        assert sum(item.startswith("relay") for item in made) == 3, made

    output = sigterm_mid_run(tmp_path, "--faults", "partition,netem", while_running=network_made)
    assert network_of(run_tag(output)) == [], output
