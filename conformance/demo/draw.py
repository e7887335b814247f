"""The main job's pictures: every counterexample TLC found, and every trace `kreplica conform`
rejected (with its step, the values logged against those allowed, and the false conjunct), as
an HTML page and a PNG each (the `explain` room's drawings)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError
from kreplica.conformance.explain import figure, html
from kreplica.conformance.explain.rejection import rejection_of
from kreplica.conformance.explain.timeline import (
    Timeline,
    TimelineError,
    timeline,
    with_rejection,
)
from kreplica.conformance.explain.window import window
from kreplica.conformance.tla.itf import read_named_trace, read_trace

UNDRAWABLE = (KreplicaError, TimelineError, OSError, ValueError, StopIteration)
"""What a trace that cannot be drawn raises (missing, unreadable, not ITF, an odd shape)."""
MAX_REJECTED = 20
"""Rejected traces drawn at most (the report says how many more there are)."""


@dataclass(frozen=True)
class Picture:
    """One drawn trace: what it is, where its page and PNG are (relative to the output), and
    one line about it."""

    name: str
    kind: str
    page: str
    png: str
    note: str


def _draw(line: Timeline, stem: str, out: Path) -> tuple[str, str]:
    pictures = out / "pictures"
    pictures.mkdir(parents=True, exist_ok=True)
    shown = window(line)
    html.save(line, shown, pictures / f"{stem}.html")
    figure.save(line, shown, pictures / f"{stem}.png")
    return f"pictures/{stem}.html", f"pictures/{stem}.png"


def draw_counterexamples(directory: Path, out: Path) -> list[Picture]:
    """A page and a PNG for each counterexample (`*.itf.json`) in `directory`."""
    drawn = []
    for path in sorted(directory.glob("*.itf.json")):
        name = path.name.removesuffix(".itf.json")
        try:
            line = timeline(read_trace(path), name)
        except UNDRAWABLE:  # the report lists what was drawn; this one was not
            continue
        page, png = _draw(line, name, out)
        broken = line.first_violation
        note = "" if broken is None else f"an invariant breaks at step {broken}"
        drawn.append(Picture(name, "counterexample", page, png, note))
    return drawn


def rejected_rows(results: Path) -> Iterator[dict[str, Any]]:
    """The rows of conform's results.json whose trace violates the spec."""
    with results.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row.get("verdict") == "violates":
                yield row


def draw_rejected(results: Path, out: Path) -> tuple[list[Picture], int]:
    """A page and a PNG for each of the first MAX_REJECTED rejected traces; and how many
    rejected traces there are in all."""
    rows = list(rejected_rows(results))
    drawn = []
    for number, row in enumerate(rows[:MAX_REJECTED], start=1):
        rejection = rejection_of(row)
        if rejection is None:
            continue
        trace_id = str(row["trace_id"])
        try:
            line = with_rejection(timeline(read_named_trace(trace_id), trace_id), rejection)
        except UNDRAWABLE:  # gone or changed since conform read it
            continue
        page, png = _draw(line, f"rejected-{number}", out)
        note = f"step {rejection.step}: {row.get('why') or rejection.reason}"
        drawn.append(Picture(trace_id, "rejected", page, png, note))
    return drawn, len(rows)
