"""Progress of long work on real processes: a node loading a large AOF
answers INFO with the load's figures (and -LOADING to other commands),
logs the progress every few seconds, stops loading on a shutdown, and
shows an AOF rewrite's progress in INFO persistence.

The AOF of a million jobs (about 200 MB, disque_py/tools/large_aof.py)
takes a node about a second to load on a 2-core machine (the engine
replays it, engine/aof/load.pxi), longer under load: a window of many
polls, though shorter than the log's report interval on a quiet machine
(its cadence is checked on the fake clock: tests/unit/test_progress.py,
and here whenever the load lasts longer). One node is started on it for
the module; a fixture watches it load (INFO
persistence every POLL_S over a raw socket, PING and ADDJOB once) and the
tests judge what was seen.
"""

from __future__ import annotations

import hashlib
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from disque_py.persistence.progress import REPORT_INTERVAL_S
from tests.persistence.helpers import AOF_NAME
from disque_py.tools.large_aof import write_large_aof
from tests.support import RawClient, ServerProcess, encode_command

LARGE_JOBS = 1_000_000
STOPPED_JOBS = 300_000         # enough to be caught loading; a shutdown ends it early
POLL_S = 0.05
LOAD_DEADLINE_S = 600
LOADING_ERROR = b"-LOADING Disque is loading the dataset in memory\r\n"
DISQUE_FIELDS = ["loading", "aof_enabled", "aof_state", "aof_rewrite_in_progress",
                 "aof_rewrite_scheduled", "aof_last_rewrite_time_sec",
                 "aof_current_rewrite_time_sec", "aof_last_bgrewrite_status",
                 "aof_last_write_status"]
DISQUE_FIELDS_AOF_ON = DISQUE_FIELDS + [
    "aof_current_size", "aof_base_size", "aof_pending_rewrite", "aof_buffer_length",
    "aof_rewrite_buffer_length", "aof_pending_bio_fsync", "aof_delayed_fsync",
    "aof_accepting_writes"]
LOADING_FIELDS = ["loading_start_time", "loading_total_bytes", "loading_loaded_bytes",
                  "loading_loaded_perc", "loading_eta_seconds", "loading_loaded_jobs"]
REWRITE_FIELDS = ["aof_rewrite_jobs_total", "aof_rewrite_jobs_processed",
                  "aof_rewrite_jobs_written", "aof_rewrite_perc"]
LOG_LINE = re.compile(r"^\d+:P \d+ \w+ (\d+):(\d+):(\d+\.\d+) \* (.*)$")
PROGRESS_LINE = re.compile(r"^Loading the AOF: (\d+\.\d\d)% \((\d+\.\d) of (\d+\.\d) MB\), "
                           r"(\d+) jobs, (\d+) jobs/s, (\d+) s left$")


@dataclass
class Watched:
    server: ServerProcess
    size: int
    started_at: float                       # unix time of the spawn
    samples: list[list[tuple[str, str]]] = field(default_factory=list)  # INFO while loading
    refusals: dict[str, bytes] = field(default_factory=dict)


def connect(port: int, deadline: float) -> RawClient:
    while True:
        try:
            return RawClient(port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(POLL_S)


def info_fields(client: RawClient, section: str = "persistence") -> list[tuple[str, str]]:
    body = client.call("INFO", section).split(b"\r\n", 1)[1].decode()
    return [tuple(line.split(":", 1)) for line in body.splitlines()
            if ":" in line and not line.startswith("#")]


def watch_load(server: ServerProcess, size: int) -> Watched:
    """Start `server` and poll INFO persistence until its load is over
    (loading:0); the first poll that sees loading:1 also sends PING, ADDJOB
    and QLEN."""
    watched = Watched(server, size, time.time())
    server.start(wait=False)
    deadline = time.monotonic() + LOAD_DEADLINE_S
    client = connect(server.port, deadline)
    try:
        while True:
            fields = info_fields(client)
            if dict(fields)["loading"] != "1":
                return watched
            watched.samples.append(fields)
            if len(watched.samples) == 1:
                for command in (["PING"], ["ADDJOB", "q", "body", "0"], ["QLEN", "queue-0"]):
                    watched.refusals[command[0]] = client.call(*command)
            assert time.monotonic() < deadline, "the load did not end in time"
            time.sleep(POLL_S)
    finally:
        client.close()


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    directory = tmp_path_factory.mktemp("large-node")
    size = write_large_aof(directory / AOF_NAME, LARGE_JOBS)
    server = ServerProcess(directory, args=["--appendonly", "yes"])
    try:
        yield watch_load(server, size)
    finally:
        server.stop(timeout=60)


def loading_samples(watched: Watched) -> list[dict[str, str]]:
    assert len(watched.samples) >= 3, (
        f"the load was seen only {len(watched.samples)} times: make the AOF larger")
    return [dict(fields) for fields in watched.samples]


# ------------------------------------------------------------------ loading

def test_info_persistence_shows_loading_1_with_rising_loaded_bytes(watched):
    samples = loading_samples(watched)
    loaded = [int(s["loading_loaded_bytes"]) for s in samples]
    jobs = [int(s["loading_loaded_jobs"]) for s in samples]
    assert loaded == sorted(loaded) and loaded[-1] > loaded[0]
    assert jobs == sorted(jobs) and 0 < jobs[-1] < LARGE_JOBS
    for sample in samples:
        assert int(sample["loading_total_bytes"]) == watched.size
        assert sample["loading_loaded_perc"] == \
            f"{int(sample['loading_loaded_bytes']) * 100 / watched.size:.2f}"
        assert int(sample["loading_eta_seconds"]) >= 0
        assert abs(int(sample["loading_start_time"]) - watched.started_at) < 60


def test_info_persistence_while_loading_is_disques_fields_then_the_loads(watched):
    """Disque shows its AOF off while it loads, then the loading_* fields;
    loading_loaded_jobs is ours, last."""
    names = [name for name, _ in watched.samples[0]]
    assert names == DISQUE_FIELDS + LOADING_FIELDS
    values = dict(watched.samples[0])
    assert (values["aof_enabled"], values["aof_state"]) == ("0", "off")


def test_the_eta_shrinks_as_the_load_goes_on(watched):
    samples = loading_samples(watched)
    late = [s for s in samples if float(s["loading_loaded_perc"]) > 50]
    early = [s for s in samples if 10 < float(s["loading_loaded_perc"]) < 30]
    assert early and late
    # Whole seconds: a load shorter than a few seconds may read 1 throughout.
    assert int(late[-1]["loading_eta_seconds"]) <= int(early[0]["loading_eta_seconds"])


def test_commands_get_loading_during_the_load_and_info_does_not(watched):
    assert watched.refusals == {"PING": LOADING_ERROR, "ADDJOB": LOADING_ERROR,
                                "QLEN": LOADING_ERROR}


def test_after_the_load_info_persistence_is_disques_again(watched):
    client = watched.server.raw()
    fields = info_fields(client)
    assert [name for name, _ in fields] == DISQUE_FIELDS_AOF_ON
    assert dict(fields)["loading"] == "0"
    assert dict(info_fields(client, "jobs"))["registered_jobs"] == str(LARGE_JOBS)
    assert client.call("PING") == b"+PONG\r\n"


def test_the_log_reports_the_load_every_few_seconds(watched):
    lines = [LOG_LINE.match(line) for line in watched.server.log_text().splitlines()]
    lines = [m for m in lines if m]
    seconds = [int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) for m in lines]
    progress = [(at, PROGRESS_LINE.match(m[4])) for at, m in zip(seconds, lines)
                if m[4].startswith("Loading the AOF: ")]
    loaded = [m[4] for m in lines if m[4].startswith("DB loaded from append only file: ")]
    assert loaded and loaded[0].startswith(f"DB loaded from append only file: {LARGE_JOBS} "
                                           f"jobs in ")
    took = float(loaded[0].split(" in ")[1].split()[0])
    assert all(match for _, match in progress), progress
    # One report each REPORT_INTERVAL_S, no more often: at most took / interval of
    # them (none for a load shorter than the interval).
    assert len(progress) <= took / REPORT_INTERVAL_S
    assert len(progress) >= took / REPORT_INTERVAL_S - 2
    gaps = [later - earlier for (earlier, _), (later, _) in zip(progress, progress[1:])]
    assert all(gap >= REPORT_INTERVAL_S - 0.01 for gap in gaps), gaps
    percents = [float(m[1]) for _, m in progress]
    jobs = [int(m[4]) for _, m in progress]
    assert percents == sorted(percents) and jobs == sorted(jobs)
    for _, match in progress:
        assert float(match[3]) == round(watched.size / 1024 / 1024, 1)
        assert int(match[5]) > 0                                 # jobs/s


# ------------------------------------------------------------------ rewrite

def test_rewrite_progress_shows_in_info_persistence(watched):
    client = watched.server.raw()
    assert client.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
    running = []
    deadline = time.monotonic() + LOAD_DEADLINE_S
    while True:
        fields = info_fields(client)
        values = dict(fields)
        if values["aof_rewrite_in_progress"] == "0":
            break
        running.append(fields)
        assert time.monotonic() < deadline, "the rewrite did not end in time"
        time.sleep(POLL_S / 5)
    assert len(running) >= 2, "the rewrite was over before it was seen twice"
    for fields in running:
        assert [name for name, _ in fields] == DISQUE_FIELDS_AOF_ON + REWRITE_FIELDS
    samples = [dict(fields) for fields in running]
    written = [int(s["aof_rewrite_jobs_written"]) for s in samples]
    processed = [int(s["aof_rewrite_jobs_processed"]) for s in samples]
    percents = [float(s["aof_rewrite_perc"]) for s in samples]
    assert all(s["aof_rewrite_jobs_total"] == str(LARGE_JOBS) for s in samples)
    assert written == sorted(written) and processed == sorted(processed)
    assert percents == sorted(percents) and 0 <= percents[0] and percents[-1] <= 100
    assert written[-1] > written[0] and all(w <= p for w, p in zip(written, processed))
    assert all(int(s["aof_current_rewrite_time_sec"]) >= 0 for s in samples)
    after = info_fields(client)
    assert [name for name, _ in after] == DISQUE_FIELDS_AOF_ON
    assert dict(after)["aof_last_bgrewrite_status"] == "ok"


# ------------------------------------------------------------------ shutdown

def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("how", ["SIGTERM", "SHUTDOWN"])
def test_a_shutdown_during_the_load_stops_it_and_leaves_the_file(make_server, how):
    server = make_server(args=["--appendonly", "yes"])
    aof = server.dir / AOF_NAME
    size = write_large_aof(aof, STOPPED_JOBS)
    before = _sha(aof)
    server.start(wait=False)
    client = connect(server.port, time.monotonic() + LOAD_DEADLINE_S)
    try:
        # The port opens before the load starts: the first answer is mid-load.
        assert dict(info_fields(client))["loading"] == "1"
        if how == "SIGTERM":
            server.proc.send_signal(signal.SIGTERM)
        else:
            client.send(encode_command("SHUTDOWN"))
        assert server.proc.wait(LOAD_DEADLINE_S) == 0
    finally:
        client.close()
    log = server.log_text()
    assert "The AOF load was stopped by the shutdown: the file is as it was" in log
    assert "DB loaded from append only file" not in log
    assert aof.stat().st_size == size and _sha(aof) == before
