"""Run a command on the sanitized engine and fail on any sanitizer report.

`python -m tests.sanitized [--fuzzer] -- COMMAND...` runs COMMAND (pytest,
a fuzz target) with the sanitizers' runtime preloaded, as `make test-asan`
and `make fuzz` do: the engine of .venv-asan is built with AddressSanitizer
and UndefinedBehaviorSanitizer (setup.py, DISQUE_ENGINE_SANITIZE), and
CPython is not, so the runtime must be loaded first, by LD_PRELOAD: clang's
ASan runtime (UBSan's handlers are in it), or with --fuzzer atheris's
asan_with_fuzzer.so, the same runtime with libFuzzer, which reads the
engine's coverage.

The rules it keeps:
  * Every process counts. The settings travel in the environment, so the
    servers a test starts (tools/loopback.py, tests/support.py: child
    processes) inherit them, and every process writes its reports to a
    file of its own in one directory (log_path). A report anywhere, in the
    test process or in a server it stopped long ago, fails the run, and
    is printed.
  * The first report stops its process (halt_on_error; UBSan too: the
    build does not recover).
  * Leaks are not looked for: CPython keeps memory to the end by design,
    so LeakSanitizer would only report the interpreter's.
  * The runtime reaches the Debian tools the tests start too (ip, nft, ...)
    and reports their bugs: each known one is suppressed by name in
    tests/asan.supp, where none names code of ours.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CLANG = os.environ.get("CLANG", "clang-14")
ASAN_RUNTIME = "libclang_rt.asan-x86_64.so"
FUZZER_RUNTIME = "asan_with_fuzzer.so"          # beside atheris's package
# allocator_may_return_null: a failed allocation is NULL (MemoryError), as
# with the C library's malloc, not a report.
SUPPRESSIONS = Path(__file__).resolve().parent / "asan.supp"
ASAN_OPTIONS = ("detect_leaks=0", "halt_on_error=1", "allocator_may_return_null=1",
                f"suppressions={SUPPRESSIONS}")
UBSAN_OPTIONS = ("halt_on_error=1", "print_stacktrace=1")
REPORT_LINES_SHOWN = 60


def asan_runtime() -> str:
    found = subprocess.run([CLANG, "-print-file-name=" + ASAN_RUNTIME],
                           capture_output=True, text=True, check=True).stdout.strip()
    if not os.path.isabs(found):
        raise SystemExit(f"{CLANG} has no {ASAN_RUNTIME} (Debian: libclang-rt-14-dev)")
    return found


def fuzzer_runtime() -> str:
    spec = importlib.util.find_spec("atheris")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("atheris is not installed in this venv (`make fuzz` installs it)")
    runtime = Path(next(iter(spec.submodule_search_locations))).parent / FUZZER_RUNTIME
    if not runtime.exists():
        raise SystemExit(f"atheris ships no {FUZZER_RUNTIME} here ({runtime})")
    return str(runtime)


def sanitized_environment(preload: str, reports: Path) -> dict[str, str]:
    """This environment with the runtime preloaded and reports sent to files
    in `reports`. Options already in ASAN_OPTIONS / UBSAN_OPTIONS override
    ours, but for log_path: a run nested in a sanitized one (its tests) has
    its own reports."""
    env = dict(os.environ)
    for name, ours, prefix in (("ASAN_OPTIONS", ASAN_OPTIONS, "asan"),
                               ("UBSAN_OPTIONS", UBSAN_OPTIONS, "ubsan")):
        callers = [env[name]] if env.get(name) else []
        env[name] = ":".join([*ours, *callers, f"log_path={reports / prefix}"])
    env["LD_PRELOAD"] = " ".join(filter(None, [preload, env.get("LD_PRELOAD")]))
    return env


def reports_found(reports: Path) -> list[Path]:
    return sorted(path for path in reports.iterdir() if path.stat().st_size)


def show(report: Path) -> None:
    lines = report.read_text(errors="replace").splitlines()
    print(f"==== sanitizer report {report.name} ====", file=sys.stderr)
    print("\n".join(lines[:REPORT_LINES_SHOWN]), file=sys.stderr)
    if len(lines) > REPORT_LINES_SHOWN:
        print(f"... ({len(lines) - REPORT_LINES_SHOWN} more lines in {report})", file=sys.stderr)


def run(command: list[str], fuzzer: bool, keep: Path | None) -> int:
    """COMMAND's exit status, or 1 if any process wrote a sanitizer report."""
    reports = Path(tempfile.mkdtemp(prefix="sanitizer-reports-"))
    preload = fuzzer_runtime() if fuzzer else asan_runtime()
    status = subprocess.run(command, env=sanitized_environment(preload, reports)).returncode
    found = reports_found(reports)
    for report in found:
        show(report)
    if found and keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for report in found:
            shutil.copy(report, keep / report.name)
        print(f"sanitizer reports kept in {keep}", file=sys.stderr)
    shutil.rmtree(reports, ignore_errors=True)
    if found:
        print(f"FAILED: {len(found)} sanitizer report(s)", file=sys.stderr)
        return 1
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sanitized", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fuzzer", action="store_true",
                        help="preload atheris's ASan + libFuzzer runtime (fuzz targets)")
    parser.add_argument("--keep-reports", type=Path, default=None,
                        help="copy the reports found into this directory")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    return run(command, args.fuzzer, args.keep_reports)


if __name__ == "__main__":
    sys.exit(main())
