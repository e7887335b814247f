"""The main job's report: one HTML page (`index.html` in the output directory) that links every
step's log, the two fuzz campaigns, the conformance verdicts with each rejected trace's picture
and false conjunct, and the model-checking table with each counterexample's picture."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kreplica.conformance.demo.draw import Picture
from kreplica.conformance.demo.pipeline import Outcome
from kreplica.conformance.tla.itf import write_text_atomic

STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.5em auto; max-width: 75em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; width: 100%; }
td code { word-break: break-all; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } .ok { color: #070; } .bad { color: #b00; font-weight: bold; }
.reused { color: #666; } code, pre { font-family: ui-monospace, monospace; font-size: 12px; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; }
.thumbs { display: flex; flex-wrap: wrap; gap: 1em; }
.thumb { width: 22em; border: 1px solid #ddd; padding: .4em; }
.thumb img { width: 100%; } .note { color: #555; font-size: 12px; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _steps(outcomes: Sequence[Outcome]) -> str:
    rows = []
    for o in outcomes:
        state = "reused (inputs unchanged)" if o.reused else "ran"
        verdict = '<span class="ok">ok</span>' if o.ok else '<span class="bad">failed</span>'
        rows.append(
            f"<tr><td>{_e(o.title)}</td><td><code>{_e(o.command)}</code></td>"
            f'<td class="{"reused" if o.reused else ""}">{state}</td><td>{o.exit_code}</td>'
            f'<td>{o.seconds:.1f}</td><td>{verdict}</td><td><a href="{_e(o.log)}">log</a></td></tr>'
        )
    head = "".join(f"<th>{h}</th>" for h in ("step", "command", "", "exit", "seconds", "", ""))
    head = f"<tr>{head}</tr>"
    return f'<table id="steps">{head}{"".join(rows)}</table>'


def _check(out: Path, pictures: dict[str, Picture]) -> str:
    try:
        results = json.loads((out / "check.json").read_text(encoding="utf-8"))["results"]
    except (OSError, ValueError, KeyError):
        return "<p>No model-checking results.</p>"
    rows = []
    for r in results:
        mark = "ok" if r.get("as_expected") else "bad"
        picture, about = pictures.get(r["config"]), str(r.get("about", ""))
        link = f'<a href="{_e(picture.page)}">picture</a>' if picture else ""
        rows.append(
            f'<tr><td>{_e(r["config"])}</td><td title="{_e(about)}">{_e(_cut(about))}</td>'
            f'<td>{_e(r["expected"])}</td><td class="{mark}">{_e(r["got"])}</td>'
            f"<td>{r.get('distinct', 0):,}</td><td>{r.get('seconds', 0):.1f}</td>"
            f"<td>{link}</td></tr>"
        )
    head = ("<tr><th>config</th><th>what it models</th><th>expected</th><th>got</th>"
            "<th>distinct states</th><th>seconds</th><th></th></tr>")  # fmt: skip
    return f'<table id="check">{head}{"".join(rows)}</table>'


ABOUT_CHARS = 70
"""The start of a model's description shown in the table (all of it on hover)."""


def _cut(text: str) -> str:
    return text if len(text) <= ABOUT_CHARS else text[: ABOUT_CHARS - 1] + "…"


def _tail(out: Path, log: str, lines: int = 6) -> str:
    try:
        text = (out / log).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return "<pre>" + _e("\n".join(text[-lines:])) + "</pre>"


def _conform(out: Path) -> str:
    path = out / "conform" / "results.json"
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError):
        return "<p>No conformance results.</p>"
    by_file: dict[str, Counter[str]] = {}
    for row in rows:
        corpus = str(row["trace_id"]).rsplit(":", 1)[0]
        by_file.setdefault(Path(corpus).name, Counter())[row["verdict"]] += 1
    body = "".join(
        f"<tr><td>{_e(name)}</td><td>{c['conforms']}</td><td>{c['violates']}</td>"
        f"<td>{c['error']}</td></tr>"
        for name, c in sorted(by_file.items())
    )
    head = "<tr><th>corpus</th><th>conform</th><th>violate</th><th>error</th></tr>"
    return f'<table id="conform">{head}{body}</table>'


def _thumbs(pictures: Sequence[Picture], element: str) -> str:
    cards = "".join(
        f'<div class="thumb"><a href="{_e(p.page)}"><img src="{_e(p.png)}" alt="{_e(p.name)}">'
        f'</a><div><a href="{_e(p.page)}">{_e(p.name)}</a></div><div class="note">{_e(p.note)}'
        "</div></div>"
        for p in pictures
    )
    return f'<div class="thumbs" id="{element}">{cards}</div>'


def write_report(
    out: Path,
    outcomes: Sequence[Outcome],
    counterexamples: Sequence[Picture],
    rejected: Sequence[Picture],
    rejected_total: int,
) -> Path:
    """Write index.html into `out` and return its path."""
    by_name = {p.name: p for p in counterexamples}
    steps = {o.name: o for o in outcomes}
    fuzz = "".join(
        f"<h3>{_e(steps[n].title)}</h3>{_tail(out, steps[n].log)}"
        for n in ("fuzz-correct", "fuzz-bug")
        if n in steps
    )
    more = rejected_total - len(rejected)
    extra = (
        f"<p>... and {more} more rejected traces: conform/results.json has them all.</p>"
        if more > 0
        else ""
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kreplica: the main job</title>
<style>{STYLE}</style></head><body>
<h1>kreplica: the main job</h1>
<p>Model checking, fuzzing with every run recorded, conformance of every recorded trace on
Spark, and a picture of every counterexample and every rejected trace.</p>
<h2>Steps</h2>{_steps(outcomes)}
<h2>Fuzzing</h2>{fuzz}
<h2>Conformance of every recorded trace (Spark)</h2>{_conform(out)}
<p><a href="conform/results.json">results.json</a> · <a href="conform/junit.xml">junit.xml</a></p>
<h2>Rejected traces</h2>{_thumbs(rejected, "rejected")}{extra}
<h2>Model checking (TLC)</h2>{_check(out, by_name)}
<h2>Counterexamples</h2>{_thumbs(counterexamples, "counterexamples")}
</body></html>
"""
    path = out / "index.html"
    write_text_atomic(path, page)
    return path
