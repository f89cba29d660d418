"""The Makefile's install targets, run for real.

They run with a PATH holding only the commands a test says are there and
an apt-get that writes down what it is asked: each installs the Debian
packages of the missing commands and no other, with --no-upgrade, and runs
no apt-get at all when nothing is missing (an installed package named to
apt-get install gets upgraded).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
APT_INSTALL = "install -y -qq --no-install-recommends --no-upgrade"

# What `make test` needs on a fresh machine: each command and its package.
TEST_PACKAGES = {"redis-cli": "redis-tools", "nc": "netcat-openbsd", "openssl": "openssl",
                 "ip": "iproute2", "java": "openjdk-17-jre-headless", "node": "nodejs",
                 "npm": "npm", "chromium": "chromium", "chromedriver": "chromium-driver"}


# ------------------------------------------------------- install targets

def run_target(tmp_path: Path, target: str, present, *variables: str) -> list[str]:
    """Run `make target` with only `present` (and apt-get) on PATH; the
    argument lines apt-get was called with."""
    assert MAKE, "make is needed (the README's first command)"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for command in present:
        (bin_dir / command).write_text("#!/bin/sh\n")
        (bin_dir / command).chmod(0o755)
    (bin_dir / "id").symlink_to(shutil.which("id"))      # the Makefile's sudo test
    calls = tmp_path / "apt-get.calls"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bin_dir / "apt-get").chmod(0o755)
    result = subprocess.run([MAKE, "--no-print-directory", target, "SUDO=", *variables],
                            cwd=ROOT, env={"PATH": str(bin_dir)}, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def installed(calls: list[str]) -> list[str]:
    """The packages of the apt-get install calls, checking they cannot upgrade."""
    packages = []
    for call in calls:
        if call.startswith("install"):
            assert call.startswith(APT_INSTALL + " "), call
            packages += call[len(APT_INSTALL):].split()
    return packages


def test_only_the_packages_of_missing_commands_are_installed(tmp_path):
    missing = ("nc", "java", "chromium")
    present = [command for command in TEST_PACKAGES if command not in missing]
    calls = run_target(tmp_path, "test-commands", present)
    assert calls[0] == "update -qq", calls
    assert installed(calls) == [TEST_PACKAGES[command] for command in missing]


def test_nothing_is_installed_when_every_command_is_there(tmp_path):
    assert run_target(tmp_path, "test-commands", TEST_PACKAGES) == []


def test_make_run_installs_redis_tools_only_without_redis_cli(tmp_path):
    assert installed(run_target(tmp_path / "none", "redis-cli-deps", [])) == ["redis-tools"]
    assert run_target(tmp_path / "there", "redis-cli-deps", ["redis-cli"]) == []


def test_build_deps_installs_only_the_compiler_when_only_it_is_missing(tmp_path):
    # This interpreter has venv and its headers (the engine was built with them).
    python = f"PYTHON={sys.executable}"
    assert installed(run_target(tmp_path / "no-cc", "build-deps", [], python)) == ["gcc"]
    assert run_target(tmp_path / "cc", "build-deps", ["cc"], python) == []
