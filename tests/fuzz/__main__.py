"""`python -m tests.fuzz TARGET [--runs N | --seconds S]`: one fuzz target
under atheris (libFuzzer), from its seeds in tests/fuzz/corpus/TARGET.

Run it through `python -m tests.sanitized --fuzzer --` on .venv-asan (make
fuzz does): the engine's coverage then guides libFuzzer, and a memory error
in it is a finding like a broken contract. The Python code under test is
instrumented for coverage as it is imported (atheris.instrument_imports).
What the run learns goes to WORK/TARGET/corpus (--work, build/fuzz by
default; the seeds are never written to); an input that fails is written
to WORK/TARGET/ as crash-<sha1>, and the run fails.

Bounded by runs (-runs=N) in make test, which a loaded machine cannot make
shorter, and by seconds in make fuzz.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

import atheris

from tests.fuzz import TARGETS

HERE = Path(__file__).resolve().parent
# Longest input each target is given: past it, executions slow down more
# than they find (a frame or an AOF of several records fits).
MAX_LEN = {"resp": 4096, "connection": 2048, "bus": 4096, "aof": 8192}
RSS_LIMIT_MB = 4096


def libfuzzer_args(target: str, work: Path, runs: int | None,
                   seconds: int | None) -> list[str]:
    work = work / target
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    args = [sys.argv[0], f"-max_len={MAX_LEN[target]}", f"-rss_limit_mb={RSS_LIMIT_MB}",
            f"-artifact_prefix={work}/", "-print_final_stats=1", "-timeout=60"]
    if runs is not None:
        args.append(f"-runs={runs}")
    if seconds is not None:
        args.append(f"-max_total_time={seconds}")
    return args + [str(corpus), str(HERE / "corpus" / target)]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", choices=TARGETS)
    bound = parser.add_mutually_exclusive_group(required=True)
    bound.add_argument("--runs", type=int, help="stop after this many executions")
    bound.add_argument("--seconds", type=int, help="stop after this many seconds")
    parser.add_argument("--work", type=Path, default=Path("build/fuzz").resolve(),
                        help="where the corpus grows and failing inputs land")
    args = parser.parse_args()
    with atheris.instrument_imports(include=TARGETS[args.target]):
        target = importlib.import_module(f"tests.fuzz.{args.target}")
    # The node's log (a torn AOF's warning, ...) would print once per input.
    logging.getLogger("disque").addHandler(logging.NullHandler())
    atheris.Setup(libfuzzer_args(args.target, args.work, args.runs, args.seconds),
                  target.check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
