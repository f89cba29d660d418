"""kill -9 under a stream of ADDJOB, restart, verify (beanstalkd's testserv shape).

With appendfsync always an ADDJOB is answered only once its LOADJOB record
is fsynced, so every job whose ID reached a client must come back after a
SIGKILL, whatever moment it lands. Jobs come back active (not queued: a
crash restart never trusts queue state) and their retry timer queues them
again. With everysec only the last second or so may be lost.
"""

from __future__ import annotations

import random
import time

from tests.persistence.helpers import (ALWAYS, EVERYSEC, Stream, add_jobs, info, show_all)
from tests.support import ServerProcess, wait_for

ROUNDS = 20
RETRY_S = 60                 # long enough that no job is re-queued while we look
SHORT_RETRY_S = 3
EVERYSEC_SAFE_AGE_S = 2.5    # jobs acknowledged longer ago than this must survive
EVERYSEC_STREAM_S = 3.5


def _kill_during_stream(server: ServerProcess, stream: Stream, target: int) -> None:
    """Let the stream run until `target` jobs were acknowledged, then SIGKILL."""
    stream.start()
    wait_for(lambda: stream.count() >= target or stream.failures, 20,
             message=f"{target} acknowledged ADDJOBs")
    assert not stream.failures, stream.failures
    server.kill()
    stream.join()


def _assert_all_back_active(server: ServerProcess, stream: Stream, label: str) -> None:
    ids = stream.ids
    shown = show_all(server, ids)
    missing = [job_id for job_id, fields in shown.items() if fields is None]
    assert not missing, (f"{label}: {len(missing)} of {len(ids)} acknowledged jobs missing "
                         f"after kill -9, e.g. {missing[:3]}")
    states = {fields[b"state"] for fields in shown.values()}
    assert states == {b"active"}, f"{label}: jobs came back in states {states}"
    registered = info(server, "jobs")["registered_jobs"]
    assert len(ids) <= registered <= stream.sent, (
        f"{label}: registered_jobs {registered}, acknowledged {len(ids)}, sent {stream.sent}")


def test_kill9_with_appendfsync_always_keeps_every_acknowledged_job_20_rounds(tmp_path):
    rng = random.Random(20240611)
    for round_index in range(ROUNDS):
        server = ServerProcess(tmp_path / f"round{round_index}", args=ALWAYS).start()
        try:
            stream = Stream(server.port, f"q{round_index}", threads=3, pipelined=1,
                            options=("RETRY", RETRY_S))
            # 300..2500 acknowledged jobs: roughly 50-400 ms of load here.
            _kill_during_stream(server, stream, rng.randint(300, 2500))
            assert not stream.errors, stream.errors[:3]
            server.start()
            _assert_all_back_active(server, stream, f"round {round_index}")
        finally:
            server.stop()


def test_jobs_back_after_kill9_are_active_then_requeued_by_retry(make_server):
    server = make_server(args=ALWAYS).start()
    ids = add_jobs(server, 50, "q", "RETRY", SHORT_RETRY_S)
    server.kill()
    server.start()
    client = server.client()
    shown = show_all(server, ids)
    assert all(fields is not None for fields in shown.values())
    assert {fields[b"state"] for fields in shown.values()} == {b"active"}
    assert client.execute_command("QLEN", "q") == 0
    wait_for(lambda: client.execute_command("QLEN", "q") == len(ids), 15,
             message="the retry timer to queue every reloaded job")
    assert {fields[b"state"] for fields in show_all(server, ids).values()} == {b"queued"}


def test_kill9_with_appendfsync_everysec_loses_at_most_the_last_seconds(make_server):
    server = make_server(args=EVERYSEC).start()
    # Paced (about 1,500 jobs/s) so the restart and the check stay quick.
    stream = Stream(server.port, "q", threads=3, pipelined=0, options=("RETRY", RETRY_S),
                    pace=0.002)
    stream.start()
    wait_for(lambda: stream.span() >= EVERYSEC_STREAM_S or stream.failures, 30,
             message=f"{EVERYSEC_STREAM_S}s of acknowledged ADDJOBs")
    assert not stream.failures, stream.failures
    killed_at = time.monotonic()
    server.kill()
    stream.join()
    server.start()
    old = [job_id for job_id, at in stream.acked if at < killed_at - EVERYSEC_SAFE_AGE_S]
    assert len(old) > 100, "the stream was too slow to test anything"
    shown = show_all(server, stream.ids)
    missing_old = [job_id for job_id in old if shown[job_id] is None]
    assert not missing_old, (f"{len(missing_old)} jobs acknowledged more than "
                             f"{EVERYSEC_SAFE_AGE_S}s before kill -9 are missing")
