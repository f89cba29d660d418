"""The spark_jobs/ examples, run as docs/spark.md shows (the venv's python,
a real JVM each) against a real node: a batch push from files, a streaming
copy from the rate source into a queue, and a streaming read of that queue
into Parquet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import HOST

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 280


def run_job(script: str, *args) -> str:
    done = subprocess.run([sys.executable, f"spark_jobs/{script}", "--master", "local[2]",
                           *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=JOB_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_push_then_stream_in_then_stream_out(fresh_server, tmp_path):
    node = f"{HOST}:{fresh_server.port}"
    client = fresh_server.client()
    rows = tmp_path / "rows"
    run_job("generate_rows.py", "--rows", 500, "--format", "json", rows)
    out = run_job("push_rows.py", rows, "--format", "json", "--queue", "pushed", "--nodes", node,
                  "--dedup", "--key-column", "id")
    assert "is in queue 'pushed'" in out
    assert client.execute_command("QLEN", "pushed") == 500

    out = run_job("stream_rate_to_queue.py", "--queue", "ticks", "--nodes", node,
                  "--rows-per-second", 200, "--stop-after-rows", 300, "--seconds", 200,
                  "--checkpoint", tmp_path / "rate-ck")
    ticks = client.execute_command("QLEN", "ticks")
    assert ticks >= 300 and "rows written to queue 'ticks'" in out

    parquet = tmp_path / "parquet"
    run_job("stream_queue_to_parquet.py", parquet, "--queues", "ticks", "--nodes", node,
            "--seconds", 15, "--checkpoint", tmp_path / "read-ck")
    import pyarrow.parquet as pq
    table = pq.read_table(str(parquet))
    assert table.num_rows >= ticks - client.execute_command("QLEN", "ticks")
    assert set(table.column("queue").to_pylist()) == {"ticks"}
    assert '"value"' in table.column("body")[0].as_py()
