"""Re-record the traces of traces/regressions/ from their schedules, after the spec's variables
or the recorder change: each schedule's impl steps are run again exactly (a liveness failure's
with the settle phase after them, `settle.replay_saved`), and must still show the violation
it recorded; its trace is written anew beside it, keeping the old trace's #meta.

Usage: .venv/bin/python traces/record_regressions.py [NAME ...]
"""

from __future__ import annotations

from pathlib import Path

import click

from kreplica.conformance.errors import KreplicaError, run_command
from kreplica.conformance.fuzz.settle import replay_saved
from kreplica.conformance.replay.schedule import read_schedule
from kreplica.conformance.tla.itf import dumps_trace, read_trace

REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def record(schedule_path: Path) -> str:
    """Replay one schedule and rewrite its trace; a line saying what changed."""
    trace_path = schedule_path.with_name(schedule_path.name.replace(".schedule.json", ".itf.json"))
    old = read_trace(trace_path)
    schedule = read_schedule(schedule_path)
    again = replay_saved(schedule, meta=old.meta)
    if again.violation != schedule.violation:
        raise KreplicaError(f"{schedule_path.name}: shows {again.violation}, not the recorded one")
    old_actions = [(s.action, s.args) for s in old.states]
    new_actions = [(s.action, s.args) for s in again.trace.states]
    trace_path.write_text(dumps_trace(again.trace) + "\n", encoding="utf-8")
    same = "the same actions" if old_actions == new_actions else "other actions"
    return f"{trace_path.name}: {len(new_actions) - 1} spec actions, {same}"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("names", nargs=-1, metavar="[NAME ...]")
def main(names: tuple[str, ...]) -> None:
    """Re-record each named regression's trace (default: all of traces/regressions/)."""
    paths = [REGRESSIONS / f"{n}.schedule.json" for n in names] or sorted(
        REGRESSIONS.glob("*.schedule.json")
    )
    for path in paths:
        if not path.is_file():
            raise KreplicaError(f"no schedule {path}")
        click.echo(record(path))


if __name__ == "__main__":
    run_command(main, "traces/record_regressions.py")
