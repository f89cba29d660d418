"""`disque-py worker module:attribute` (disque_py/tools/worker_cli.py) as a
user runs it: real processes against a real node. SIGTERM in the middle
of a batch loses no job and runs none twice at once (then drained by a
second worker, or with one already polling the queue); 10,000 jobs through
4 processes are each run and acked exactly once; a bad TARGET or --queues
is a usage error (exit 2); --queues and --progress do what they say.

The worker module is written into the test's directory (the CLI imports
from its working directory). Its handler records in a file of its own per
process, line-buffered, when each job started and ended (CLOCK_MONOTONIC,
one clock for every process) and how it ended: done, or cancelled by the
stop. A job's body is how long its handler runs, in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from disque_py.client import Client
from tests.support import HOST, wait_for

DISQUE_PY = Path(sys.executable).with_name("disque-py")
LONG_RETRY = 300

WORKER_MODULE = '''
"""A worker that records each job's start and end (tests/integration/test_worker_cli.py)."""
import asyncio
import os
import threading
import time

from disque_py.client import DeadLetter, Worker

records = open(os.path.join(os.environ["RECORDS"], f"{os.getpid()}.log"), "a", buffering=1)
writing = threading.Lock()
scale = float(os.environ.get("DURATION_SCALE", "1"))
worker = Worker()
not_a_worker = object()


def note(what, job, *extra):
    with writing:
        records.write(" ".join((what, job.id, str(time.monotonic_ns()), *extra)) + "\\n")


@worker.handler("jobs")
async def record(job):
    note("start", job, str(job.nacks), str(job.additional_deliveries))
    try:
        await asyncio.sleep(float(job.body) * scale)
    except asyncio.CancelledError:
        note("cancelled", job)
        raise
    note("done", job)


@worker.handler("jobs-in-threads")
def record_in_thread(job):
    note("start", job, str(job.nacks), str(job.additional_deliveries))
    time.sleep(float(job.body) * scale)
    note("done", job)


@worker.handler("hopeless")
async def reject(job):
    raise DeadLetter("never works")
'''


@dataclass
class Run:
    """One run of a job by a handler: when it started and ended, and how."""

    start: int
    end: int | None = None
    outcome: str | None = None
    counters: tuple[int, int] = (0, 0)


@dataclass
class Records:
    """Every run of every job, as the worker processes wrote them."""

    runs: dict[str, list[Run]] = field(default_factory=dict)

    @classmethod
    def read(cls, directory: Path, exits: dict[int, int] | None = None) -> Records:
        """The records in `directory`; a run a process never ended ends at
        its exit, when `exits` (PID -> CLOCK_MONOTONIC ns) knows it."""
        records = cls()
        for path in sorted(directory.glob("*.log")):
            open_runs: dict[str, Run] = {}
            for line in path.read_text().splitlines():
                kind, job_id, at, *counters = line.split()
                if kind == "start":
                    run = Run(int(at), counters=(int(counters[0]), int(counters[1])))
                    open_runs[job_id] = run
                    records.runs.setdefault(job_id, []).append(run)
                else:
                    run = open_runs.pop(job_id)
                    run.end, run.outcome = int(at), kind
            for run in open_runs.values():
                run.end = (exits or {}).get(int(path.stem))
        return records

    def starts(self) -> int:
        return sum(len(runs) for runs in self.runs.values())

    def runs_done(self) -> list[str]:
        """A job's ID for each of its runs that ended done, sorted."""
        return sorted(job_id for job_id, runs in self.runs.items()
                      for run in runs if run.outcome == "done")

    def ended(self, outcome: str) -> set[str]:
        return {job_id for job_id, runs in self.runs.items()
                if any(run.outcome == outcome for run in runs)}

    def overlapping(self) -> list[str]:
        """Jobs two of whose runs overlapped (a run never ended counts as
        lasting for ever)."""
        bad = []
        for job_id, runs in self.runs.items():
            ordered = sorted(runs, key=lambda run: run.start)
            for first, then in zip(ordered, ordered[1:]):
                if first.end is None or then.start < first.end:
                    bad.append(job_id)
                    break
        return bad


@pytest.fixture
def client(server) -> Iterator[Client]:
    with Client(f"disque://{HOST}:{server.port}") as client:
        yield client


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "recorder.py").write_text(WORKER_MODULE)
    (tmp_path / "records").mkdir()
    return tmp_path


def start_worker(workdir: Path, server, *options: str, target: str = "recorder:worker",
                 duration_scale: float = 1.0) -> subprocess.Popen[str]:
    """`disque-py worker` in `workdir`, its output in files there; its jobs
    run for their body's seconds times `duration_scale`."""
    name = f"worker{len(list(workdir.glob('worker*.err')))}"
    env = {**os.environ, "RECORDS": str(workdir / "records"),
           "DURATION_SCALE": str(duration_scale)}
    with open(workdir / f"{name}.out", "w") as out, open(workdir / f"{name}.err", "w") as err:
        return subprocess.Popen(
            [str(DISQUE_PY), "worker", target, "--url", f"disque://{HOST}:{server.port}",
             *options], cwd=workdir, env=env, stdout=out, stderr=err, text=True)


def finished(process: subprocess.Popen[str], timeout: float = 60) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def add_jobs(client: Client, queue: str, bodies: list[bytes], retry: int = LONG_RETRY
             ) -> list[str]:
    with client.pipeline() as pipe:
        for body in bodies:
            pipe.add(queue, body, retry=retry)
    return pipe.results


def blocked_clients(client: Client) -> int:
    return int(client.info("clients")["blocked_clients"])


def job_states(client: Client, queue: str) -> Counter[str]:
    return Counter(info.state for info in client.jscan_info(queue=queue))


# ------------------------------------------------------------ SIGTERM

def test_sigterm_mid_batch_loses_no_job_and_runs_none_twice_at_once(server, client, workdir):
    """SIGTERM while jobs run (grace 0.3 s; a quarter of the jobs take 10 s):
    the process exits 0; the jobs it finished are acked, the ones it had
    cancelled or not started are queued again, none is left delivered; a
    second worker (--burst, its jobs 100 times shorter) runs the rest, and
    no job's two runs ever overlapped."""
    durations = [b"0.05", b"0.1", b"0.2", b"10"] * 75
    job_ids = add_jobs(client, "jobs", durations)
    first = start_worker(workdir, server, "--concurrency", "10", "--grace", "0.3")
    wait_for(lambda: Records.read(workdir / "records").starts() >= 30, timeout=30,
             message="30 jobs started")
    first.send_signal(signal.SIGTERM)
    assert finished(first) == 0, (workdir / "worker0.err").read_text()

    stopped = Records.read(workdir / "records")
    states = job_states(client, "jobs")
    done, cancelled = stopped.ended("done"), stopped.ended("cancelled")
    assert cancelled, "the stop should have come while 10 s jobs ran"
    assert states["active"] == 0 and set(states) <= {"queued"}
    assert states["queued"] == client.qlen("jobs") == len(job_ids) - len(done)
    assert all(client.show(job_id) is None for job_id in done)

    drain = start_worker(workdir, server, "--concurrency", "100", "--burst",
                         duration_scale=0.01)
    assert finished(drain) == 0, (workdir / "worker1.err").read_text()
    everything = Records.read(workdir / "records")
    assert everything.runs_done() == sorted(job_ids)
    assert everything.overlapping() == []
    assert client.qlen("jobs") == 0 and job_states(client, "jobs") == Counter()


@pytest.mark.parametrize("queue", ["jobs", "jobs-in-threads"])
def test_sigterm_beside_a_polling_worker_runs_no_job_twice_at_once(server, client, workdir,
                                                                   queue):
    """The first worker has run every short job and holds the six 10 s ones
    when SIGTERM comes (grace 0.3 s); a second (its jobs 100 times shorter)
    polls the queue. It gets an async job once its run was cancelled, and
    a thread's job (not NACKed while its thread runs) after its RETRY
    (2 s), once the first process has exited. Every job is done once, and
    no two runs of one job overlap (a run the first process never ended
    lasts until its exit)."""
    job_ids = add_jobs(client, queue, ([b"0.05"] * 5 + [b"10"]) * 6, retry=2)
    first = start_worker(workdir, server, "--concurrency", "10", "--grace", "0.3")
    wait_for(lambda: Records.read(workdir / "records").starts() == len(job_ids), timeout=30,
             message="every job started")
    second = start_worker(workdir, server, "--concurrency", "50", duration_scale=0.01)
    wait_for(lambda: blocked_clients(client) == 2, timeout=30,
             message="both workers waiting for jobs")
    first.send_signal(signal.SIGTERM)
    assert finished(first) == 0, (workdir / "worker0.err").read_text()
    first_exit = time.monotonic_ns()
    wait_for(lambda: client.qlen(queue) == 0 and not job_states(client, queue), timeout=30,
             message="every job acked")
    second.send_signal(signal.SIGTERM)
    assert finished(second) == 0, (workdir / "worker1.err").read_text()
    records = Records.read(workdir / "records", exits={first.pid: first_exit})
    assert records.runs_done() == sorted(job_ids)
    assert records.overlapping() == []


# ------------------------------------------------------------ many

def test_10000_jobs_through_4_processes_are_each_acked_exactly_once(server, client, workdir):
    """No faults: every job runs once (its first delivery: no NACK, no
    other delivery) and is acked; the node ends with nothing left."""
    job_ids = add_jobs(client, "jobs", [b"0"] * 10_000)
    workers = [start_worker(workdir, server, "--concurrency", "50", "--burst")
               for _ in range(4)]
    for number, worker in enumerate(workers):
        assert finished(worker, timeout=90) == 0, (workdir / f"worker{number}.err").read_text()
    records = Records.read(workdir / "records")
    assert sorted(records.runs) == sorted(job_ids)
    runs = [run for runs in records.runs.values() for run in runs]
    assert len(runs) == 10_000
    assert {(run.outcome, run.counters) for run in runs} == {("done", (0, 0))}
    assert client.qlen("jobs") == 0 and job_states(client, "jobs") == Counter()


# ------------------------------------------------------------ the options

@pytest.mark.parametrize("target, complaint", [
    ("recorder", "give the worker as module:attribute"),
    ("no_such_module:worker", "cannot import 'no_such_module'"),
    ("recorder:not_a_worker", "recorder:not_a_worker is not a disque_py.client.Worker"),
    ("recorder:missing", "recorder:missing is not a disque_py.client.Worker"),
])
def test_a_bad_target_is_a_usage_error(server, workdir, target, complaint):
    worker = start_worker(workdir, server, target=target)
    assert finished(worker) == 2
    err = (workdir / "worker0.err").read_text()
    assert "Invalid value for TARGET" in err and complaint in err


def test_queues_naming_a_queue_without_a_handler_is_a_usage_error(server, workdir):
    worker = start_worker(workdir, server, "--queues", "jobs,nosuch")
    assert finished(worker) == 2
    err = (workdir / "worker0.err").read_text()
    assert "Invalid value for '--queues'" in err and "no handler for nosuch" in err


def test_queues_keeps_only_the_handlers_named(server, client, workdir):
    add_jobs(client, "jobs", [b"0"] * 3)
    add_jobs(client, "hopeless", [b"0"])
    assert finished(start_worker(workdir, server, "--queues", "jobs", "--burst")) == 0
    assert (client.qlen("jobs"), client.qlen("hopeless")) == (0, 1)


def test_progress_prints_the_progress_line_on_stderr(server, client, workdir):
    add_jobs(client, "jobs", [b"0"] * 3)
    add_jobs(client, "hopeless", [b"0"])
    assert finished(start_worker(workdir, server, "--progress", "--burst")) == 0
    with open(workdir / "worker0.err", newline="") as stderr:
        err = stderr.read()
    assert "\rdone 3  failed 1  dead 1  running 0  " in err and "jobs/s" in err
    assert (workdir / "worker0.out").read_text() == ""
    assert client.qlen("hopeless:dead") == 1
