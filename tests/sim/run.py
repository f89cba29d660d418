"""Running seeds: one at a time, or many across processes, and the report.

run_seed(seed) plays one scenario (workload.py) and returns its Result: the
checker's violations, or the exception the run raised (check 3: nothing
raises), a digest of everything that happened (same seed, same digest, in
any process and under any PYTHONHASHSEED), and the trace. A failure is
reported with its seed, its scenario and a short trace: the lines about the
jobs involved, the faults, and the frames that carried those jobs.

    python -m tests.sim --seeds 10000 --jobs 2     # the soak (make soak)
    python -m tests.sim --seed 1234 --trace        # replay one seed, whole trace
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import sys
import time
import traceback
from typing import NamedTuple

from tests.sim.workload import FAULT, FAULT_MAX_MS, Workload

SHORT_TRACE_LINES = 60


class Result(NamedTuple):
    seed: int
    violations: list
    error: str | None             # the traceback, when the run raised
    digest: str
    sim_ms: int
    jobs: int
    deliveries: int
    redelivered: int              # jobs delivered more than once
    frames: int
    report: str                   # the failure report, "" when the seed passed
    dead_lettered: int = 0        # dead-letter decisions (MAXDELIVERIES reached)
    revived: int = 0              # jobs QREQUEUE moved back to work
    deduplicated: int = 0         # ADDJOBs (DEDUP) answered with an earlier job's ID

    @property
    def ok(self) -> bool:
        return not self.violations and self.error is None


def run_seed(seed: int) -> Result:
    workload = None
    violations, error = [], None
    try:
        workload = Workload(seed)
        violations = workload.run()
    except Exception:             # check (3): the simulated cluster must not raise
        error = traceback.format_exc()
    if workload is None:
        return Result(seed, [], error, "", 0, 0, 0, 0, 0, f"seed {seed}: {error}")
    net, checker = workload.net, workload.checker
    digest = hashlib.sha1(repr((workload.trace, net.sent)).encode()).hexdigest()
    deliveries = [len(facts.deliveries) for facts in checker.jobs.values()]
    result = Result(seed, violations, error, digest, net.clock.now_ms() - net.start_ms,
                    len(checker.jobs), sum(deliveries), sum(n > 1 for n in deliveries),
                    len(net.sent), "",
                    sum(len(facts.decisions) for facts in checker.jobs.values()),
                    sum(facts.life for facts in checker.jobs.values()),
                    checker.dedup_answers)
    if not result.ok:
        result = result._replace(report=failure_report(workload, violations, error))
    return result


def failure_report(workload: Workload, violations: list, error: str | None) -> str:
    lines = [f"seed {workload.seed} FAILED (replay: python -m tests.sim --seed "
             f"{workload.seed} --trace)", "  " + workload.scenario.describe()]
    lines += ["  " + text for text in violations[:10]]
    if error:
        lines.append("  raised:\n" + error)
    involved = {job_id for job_id, facts in workload.checker.jobs.items()
                if facts.name + " " in " ".join(violations) + " "}
    lines.append("  trace (jobs involved, and faults meanwhile; times in ms):")
    lines += [f"    {at:>7} {text}" for at, _, text in short_trace(workload.trace, involved)]
    for job_id in sorted(involved)[:3]:
        lines.append(f"  frames carrying {workload.name(job_id)}:")
        frames = frame_lines(workload, job_id)
        if len(frames) > 30:
            frames = frames[:15] + ["..."] + frames[-15:]
        lines += ["    " + line for line in frames]
    return "\n".join(lines)


def short_trace(trace: list, involved: set) -> list:
    """The lines about the jobs involved, and the faults during their life
    or just before, still in force (every fault when no job is named); at
    most SHORT_TRACE_LINES."""
    def about_involved(about) -> bool:
        if type(about) is tuple:
            return any(job_id in involved for job_id in about)
        return about in involved

    mine = [at for at, about, _ in trace if about_involved(about)]
    first, last = (mine[0] - FAULT_MAX_MS, mine[-1]) if mine else (0, float("inf"))
    picked = [entry for entry in trace if about_involved(entry[1])
              or (entry[1] == FAULT and first <= entry[0] <= last)]
    if len(picked) > SHORT_TRACE_LINES:
        half = SHORT_TRACE_LINES // 2
        picked = picked[:half] + [(0, None, "...")] + picked[-half:]
    return picked


def frame_lines(workload: Workload, job_id: bytes) -> list[str]:
    net = workload.net
    dropped = {id(m) for m in net.dropped}
    lines = []
    for m in net.sent:
        if job_id in m.keys:
            fate = " (dropped)" if id(m) in dropped else ""
            lines.append(f"{m.at - net.start_ms:>7} n{m.src} -> n{m.dst} {m.name}{fate}")
    return lines


def full_trace(seed: int) -> str:
    workload = Workload(seed)
    try:
        workload.run()
    finally:
        text = "\n".join(f"{at:>7} {text}" for at, _, text in workload.trace)
    return text


def run_seeds(seeds, jobs: int = 1, on_result=None) -> list[Result]:
    """Every seed's result, in seed order; `jobs` processes share the work."""
    seeds = list(seeds)
    results = []
    if jobs <= 1:
        for seed in seeds:
            result = run_seed(seed)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for result in pool.imap(run_seed, seeds, chunksize=16):
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds (default 1000)")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("--trace", action="store_true", help="with --seed: the whole trace")
    args = parser.parse_args(argv)
    if args.seed is not None:
        if args.trace:
            print(full_trace(args.seed))
        result = run_seed(args.seed)
        print(result.report or f"seed {args.seed} passed: {summary([result])}; "
                                f"digest {result.digest}")
        return 0 if result.ok else 1
    started = time.perf_counter()
    failures = []

    def progress(result: Result) -> None:
        if not result.ok:
            failures.append(result)
            print(result.report, flush=True)

    results = run_seeds(range(args.start, args.start + args.seeds), args.jobs, progress)
    elapsed = time.perf_counter() - started
    print(f"{len(results)} seeds in {elapsed:.1f} s ({len(results) / elapsed:.1f} seeds/s, "
          f"{args.jobs} processes): {len(failures)} failed; {summary(results)}")
    if failures:
        print("failing seeds:", " ".join(str(r.seed) for r in failures))
    return 1 if failures else 0


def summary(results: list[Result]) -> str:
    jobs = sum(r.jobs for r in results)
    redelivered = sum(r.redelivered for r in results)
    return (f"{jobs} jobs, {sum(r.deliveries for r in results)} deliveries ("
            f"{redelivered} jobs more than once, {redelivered * 100 // max(jobs, 1)}%), "
            f"{sum(r.frames for r in results)} frames, "
            f"{sum(r.dead_lettered for r in results)} dead-lettered, "
            f"{sum(r.revived for r in results)} QREQUEUEd, "
            f"{sum(r.deduplicated for r in results)} ADDJOBs deduplicated, "
            f"{sum(r.sim_ms for r in results) // 1000} simulated seconds")


if __name__ == "__main__":
    sys.exit(main())
