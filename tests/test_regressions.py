"""Every saved failing run under traces/regressions/ still fails, with the same violation.

`kreplica fuzz` writes a shrunk failing run as `<name>.itf.json` (the trace) and
`<name>.schedule.json` (its impl steps); copied here, they become regression tests: the
schedule is replayed on a fresh cluster and must show the violation it recorded, so a change
to the implementation cannot make it silently stop failing. A liveness failure (the seeded bug
kafka-10706's livelock) is saved up to its settle phase, which its replay runs again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kreplica.conformance.fuzz.settle import replay_saved
from kreplica.conformance.fuzz.targets import TARGETS
from kreplica.conformance.replay.schedule import read_schedule
from kreplica.conformance.tla.itf import read_trace

REGRESSIONS = Path(__file__).resolve().parent.parent / "traces" / "regressions"
SCHEDULES = sorted(REGRESSIONS.glob("*.schedule.json"))
MAX_SPEC_ACTIONS = 15


def test_the_corpus_is_there() -> None:
    assert SCHEDULES, f"no *.schedule.json under {REGRESSIONS}"


def test_every_target_has_a_saved_failure() -> None:
    """One shrunk failing run per seeded bug and unsafe variant (fuzz_targets.TARGETS)."""
    saved = {read_schedule(path).variant for path in SCHEDULES}
    missing = [t.word for t in TARGETS if t.setup.variant not in saved]
    assert not missing, f"no saved failure for {missing}"


@pytest.mark.parametrize("path", SCHEDULES, ids=[p.name.split(".")[0] for p in SCHEDULES])
def test_a_saved_failure_still_fails(path: Path) -> None:
    """Replaying the schedule reproduces the recorded violation, at its last step (a
    liveness failure's, KAFKA-10706's, after it: the settle phase follows its steps)."""
    schedule = read_schedule(path)
    assert schedule.violation is not None, "a regression schedule records its violation"
    result = replay_saved(schedule)
    assert result.violation == schedule.violation
    assert result.steps_applied == len(schedule.steps)


@pytest.mark.parametrize("path", SCHEDULES, ids=[p.name.split(".")[0] for p in SCHEDULES])
def test_its_trace_is_short_and_says_the_same(path: Path) -> None:
    """The ITF trace beside it names the same violation and has at most 15 spec actions."""
    schedule = read_schedule(path)
    trace = read_trace(path.with_name(path.name.replace(".schedule.json", ".itf.json")))
    assert schedule.violation is not None
    invariant, reason = schedule.violation
    assert trace.meta["violation"] == {"invariant": invariant, "reason": reason}
    assert len(trace.meta["impl_steps"]) == len(schedule.steps)
    assert len(trace.states) - 1 <= MAX_SPEC_ACTIONS


@pytest.mark.parametrize(
    "name",
    [
        "bug-no-leso-guard-r3-fe2-s9",
        "truncation-hw-r3-fcedpi4-s1",
        "election-unclean-r3-fcedpil4-nodel-s0",
    ],
)
def test_kreplica_replay_reads_the_fuzz_set_up(name: str) -> None:
    """`kreplica replay` on a saved fuzz trace, without options, replays it under the variant
    and broker config its #meta records, state for state."""
    from click.testing import CliRunner

    from kreplica.conformance.cli.replay import replay_command

    result = CliRunner().invoke(replay_command, [str(REGRESSIONS / f"{name}.itf.json")])
    assert result.exit_code == 0, result.output
    assert "conforms" in result.output


def test_the_saved_traces_are_what_their_schedules_record_now(tmp_path: Path) -> None:
    """traces/record_regressions.py rewrites each trace from its schedule: the committed ones
    are exactly what it writes (re-record them when the spec's variables change)."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "traces"
    shutil.copytree(REGRESSIONS.parent, copy, ignore=shutil.ignore_patterns("golden"))
    done = subprocess.run(
        [sys.executable, str(copy / "record_regressions.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for path in sorted(REGRESSIONS.glob("*.itf.json")):
        assert (copy / "regressions" / path.name).read_text() == path.read_text(), path.name
    missing = subprocess.run(
        [sys.executable, str(copy / "record_regressions.py"), "no-such-run"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"traces/record_regressions.py: error: no schedule "
        f"{copy / 'regressions' / 'no-such-run.schedule.json'}"
    ]
