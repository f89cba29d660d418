"""The chaos checker's node faults without processes: the clock file's
contents and skews, the power-cut and damage planners (seeded), applying a
plan to a file, the runbook's decisions, and which power cuts excuse a lost
job under each appendfsync policy."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from disque_py.persistence import aof_format
from disque_py.tools.chaos.faults import clock, damage, runbook
from disque_py.tools.chaos.faults.base import Event
from disque_py.tools.chaos.explain import EVERYSEC_LOSS_WINDOW_S, Explainer
from disque_py.tools.chaos.run import ChaosOptions

RECORD = aof_format.del_job_record(b"D-" + b"a" * 38)


def aof_bytes(records: int, reserved: int = 0) -> bytes:
    return aof_format.HEADER + RECORD * records + bytes(reserved)


# ------------------------------------------------------------------ clock

def test_the_clock_preload_leaves_timed_waits_and_the_environment_alone(tmp_path):
    """libfaketime's monotonic fix ran the GIL's timed waits to their
    deadline: under appendfsync always a node answered ADDJOB ~100 times
    slower in the clock rows before any clock moved. And it adds
    FAKETIME_SHARED at load: an environment grown before main crashes Disque
    C's setproctitle, so the variable is there already."""
    env = clock.Clock.launch_env(tmp_path)
    assert env["FAKETIME_FORCE_MONOTONIC_FIX"] == "0" and env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert "FAKETIME_SHARED" in env


def test_offsets_are_written_as_libfaketime_reads_them(tmp_path):
    assert clock.offset_spec(12.5) == "+12.500\n"
    assert clock.offset_spec(-3.25) == "-3.250\n"
    assert clock.offset_spec(0.0) == "+0.000\n"
    clock.write_offset(tmp_path, -90.0)
    assert (tmp_path / clock.OFFSET_FILE).read_text() == "-90.000\n"
    assert not list(tmp_path.glob("*.tmp")), "written whole, by a rename"


def test_the_launch_environment_preloads_libfaketime_on_the_wall_clock_only(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr(clock, "faketime_library", lambda: "/lib/libfaketimeMT.so.1")
    env = clock.Clock.launch_env(tmp_path / "node0")
    assert env["LD_PRELOAD"] == "/lib/libfaketimeMT.so.1"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert env["FAKETIME_CACHE_DURATION"] == "1"
    assert (tmp_path / "node0" / clock.OFFSET_FILE).read_text() == "+0.000\n"


def test_a_missing_libfaketime_says_which_package_brings_it(monkeypatch):
    monkeypatch.setattr(clock, "FAKETIME_LIBRARIES", ("/nonexistent/libfaketime.so",))
    with pytest.raises(RuntimeError, match="apt-get install faketime"):
        clock.faketime_library()


def test_a_jump_is_a_step_and_a_drift_grows_with_time():
    jump = clock.Skew(-45.0)
    assert jump.offset_at(0) == jump.offset_at(1000) == -45.0
    drift = clock.Skew(0.0, rate=0.05, since=100.0)
    assert drift.offset_at(100.0) == 0.0 and drift.offset_at(140.0) == pytest.approx(2.0)
    assert drift.offset_at(50.0) == 0.0, "no drift before it began"


def test_drawn_skews_stay_within_their_ranges():
    rng = random.Random(5)
    skews = [clock.draw_skew(rng, 10.0) for _ in range(500)]
    jumps = [s.step_s for s in skews if not s.rate]
    rates = [s.rate for s in skews if s.rate]
    assert jumps and rates
    assert all(clock.JUMP_S[0] <= abs(j) <= clock.JUMP_S[1] for j in jumps)
    assert all(clock.DRIFT_RATE[0] <= abs(r) <= clock.DRIFT_RATE[1] for r in rates)
    assert any(j < 0 for j in jumps) and any(j > 0 for j in jumps)


def test_probe_errors_are_measured_against_the_delay():
    probe = clock.Probe(node=None, job_id="D-x", added_at=100.0, skew="jump +30.0s")
    assert probe.error_s(101.0) == pytest.approx(1.0 - clock.PROBE_DELAY_S)   # early
    results = clock.ProbeResults([("jump +30.0s", -9.0), ("jump -60.0s", 14.5)], 1)
    assert results.measures() == {"clock_probes": 2, "clock_probes_unresolved": 1,
                                  "clock_probe_most_early_s": 9.0,
                                  "clock_probe_most_late_s": 14.5}


# ------------------------------------------------------------------ power cuts

def test_a_power_cut_keeps_exactly_the_durable_bytes_or_a_torn_tail_past_them():
    data = aof_bytes(10)
    durable = len(aof_format.HEADER) + 4 * len(RECORD)
    kinds = set()
    for seed in range(200):
        cut = damage.power_cut(random.Random(seed), data, durable)
        assert cut.keep == durable and cut.flip_at is None
        if cut.tail:
            kind = cut.what.rsplit(" ", 1)[-1]
            kinds.add(kind)
            if kind == "partial":
                assert data[durable:].startswith(cut.tail), "a prefix of what was lost"
            if kind == "zeros":
                assert not cut.tail.strip(b"\0")
    assert kinds == {"partial", "zeros", "garbage"}


def test_a_power_cut_never_keeps_more_than_was_written():
    data = aof_bytes(2)
    cut = damage.power_cut(random.Random(1), data, len(data) + 500)
    assert cut.keep == len(data)


def test_power_cuts_are_the_same_for_the_same_seed():
    data = aof_bytes(10)
    first = [damage.power_cut(random.Random(s), data, 40) for s in range(20)]
    assert first == [damage.power_cut(random.Random(s), data, 40) for s in range(20)]


def test_a_planned_cut_and_tail_land_on_the_file(tmp_path):
    path = tmp_path / "disque.aof"
    path.write_bytes(aof_bytes(3, reserved=4096))
    damage.Damage(20, b"torn").apply(str(path))
    assert path.read_bytes() == aof_bytes(3)[:20] + b"torn"


# ------------------------------------------------------------------ damaged files

def test_aof_damage_is_a_truncation_inside_the_data_or_one_bit_flipped():
    data = aof_bytes(10, reserved=1000)
    written = len(data) - 1000
    seen = {"truncate": 0, "data": 0, "reserved space": 0}
    for seed in range(400):
        plan = damage.aof_damage(random.Random(seed), data)
        if plan.keep is not None:
            assert 0 <= plan.keep < written and plan.flip_at is None
            seen["truncate"] += 1
        else:
            assert 0 <= plan.flip_at < len(data) and 0 <= plan.flip_bit < 8
            seen["data" if plan.flip_at < written else "reserved space"] += 1
    assert all(seen.values()), seen
    assert seen["reserved space"] < seen["data"]


def test_a_bit_flip_changes_exactly_one_bit(tmp_path):
    path = tmp_path / "nodes.conf"
    original = b"0123456789abcdef\n"
    path.write_bytes(original)
    plan = damage.text_damage(random.Random(3), original, "nodes.conf")
    while plan.flip_at is None:
        plan = damage.text_damage(random.Random(plan.keep + 100), original, "nodes.conf")
    plan.apply(str(path))
    changed = [a ^ b for a, b in zip(original, path.read_bytes())]
    assert sorted(changed)[-1] == 1 << plan.flip_bit and changed.count(0) == len(original) - 1


def test_an_empty_file_is_left_alone():
    assert damage.text_damage(random.Random(1), b"", "nodes.conf").keep is None
    assert damage.aof_damage(random.Random(1), b"").flip_at is None


# ------------------------------------------------------------------ the runbook

@pytest.mark.parametrize("line, kind", [
    ("1:P 28 Nov # Bad file format reading the append only file /x/disque.aof: LOADJOB "
     "record fails its checksum at byte offset 96 (run 'disque-py check-aof --fix ...')",
     runbook.AOF),
    ("1:P # Bad record in the AOF /x/disque.aof at byte offset 5: ERR ...", runbook.AOF),
    ("1:P # Unrecoverable error: nodes.conf:2: corrupted cluster config line: 'ab'",
     runbook.NODES_CONF_KIND),
    ("1:P # Could not listen on the cluster bus port", runbook.UNKNOWN),
])
def test_the_refusal_names_the_file_to_repair(line, kind):
    found, said = runbook.diagnose("1:P * starting\n" + line + "\n")
    assert found == kind
    assert said == (line if kind != runbook.UNKNOWN else "")


@pytest.mark.parametrize("output, status, decision", [
    ("AOF is not valid: torn last record: record cut short at byte offset 90 ...\n"
     "Successfully truncated the AOF to 90 bytes.", 0, "done"),
    ("AOF is not valid: corruption: LOADJOB record fails its checksum at byte offset 90\n"
     "Successfully truncated the AOF to 90 bytes.", 0, "new-epoch"),
    ("AOF is not valid: corruption: neither a disque-py AOF ... at byte offset 0\n"
     "Nothing readable to keep: not cutting the file to zero bytes.", 1, "move-away"),
    ("AOF is valid: 12 records, 900 bytes of data", 0, "done"),
])
def test_check_aof_output_decides_the_next_step(output, status, decision):
    assert runbook.fix_decision(output, status) == decision


def test_dropping_the_vars_line_leaves_the_node_lines(tmp_path):
    path = tmp_path / "nodes.conf"
    path.write_text("a 1.2.3.4:1 myself 0 0 connected\nvars start-epoch 9 crc32 0badf00d\n")
    runbook.drop_vars_line(path)
    assert path.read_text() == "a 1.2.3.4:1 myself 0 0 connected\n"


def test_moving_a_file_away_keeps_it_for_the_post_mortem(tmp_path):
    path = tmp_path / "nodes.conf"
    path.write_text("x")
    moved = runbook.move_away(path, 3)
    assert not path.exists() and moved.read_text() == "x" and moved.name.endswith("-3")


# ------------------------------------------------------------------ excuses per policy

def _explainer_with_power_cuts(policy: str, cut_at: list[tuple[float, int]]) -> Explainer:
    options = ChaosOptions(appendfsync=policy, replicate=2)
    events = [Event(at, "powerloss", node) for at, node in cut_at]
    injector = SimpleNamespace(
        events_between=lambda start, end: [e for e in events if start <= e.at <= end])
    return Explainer(options, injector, fleet=None, started=0.0)


@pytest.mark.parametrize("policy, cuts, excused", [
    ("always", [(100.5, 0), (100.6, 1)], False),       # every reply followed its fsync
    ("everysec", [(100.5, 0), (101.0, 1)], True),      # both copies inside the window
    ("everysec", [(100.5, 0), (100.0 + EVERYSEC_LOSS_WINDOW_S + 5, 1)], False),
    ("everysec", [(100.5, 0), (100.9, 0)], False),     # one holder, twice
    ("no", [(100.5, 0), (150.0, 1)], True),            # only rewrites fsync
])
def test_power_cuts_excuse_a_loss_only_where_the_policy_allows(policy, cuts, excused):
    reason = _explainer_with_power_cuts(policy, cuts).power_cut_excuse(100.0)
    assert bool(reason) == excused, reason
    if excused:
        assert f"appendfsync {policy}" in reason
