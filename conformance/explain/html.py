"""A timeline as one self-contained HTML page that steps through the run: previous and next
buttons, a slider, a strip of every step (in red the step where an invariant breaks, or that
conform rejected), the lanes of the current step, its marks, and its state diff (each variable
the step changed, before and after). The frames are embedded as JSON; the page loads nothing
else, so it opens from a file.

The page's structure is what `tests/test_explain_html.py` checks in a real browser: `#lanes`
holds one `.lane` per replica, each with its `.cell`s; `#strip` one `.tick` per step; `#slider`,
`#prev` and `#next` move `#step`; `#marks` and `#diff` describe the current step. For a trace
`kreplica conform` rejected, `#rejection` says where and why, and `#to-rejected` goes there."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from kreplica.conformance.explain.timeline import Frame, Lane, Timeline
from kreplica.conformance.explain.window import Window
from kreplica.conformance.tla.itf import write_text_atomic

EPOCH_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
"""A cell's colour by its leader epoch (cycling), as in the PNG."""


def _lane(lane: Lane, frame: Frame) -> dict[str, Any]:
    return {
        "replica": lane.replica,
        "cells": [[c.offset, c.epoch, c.record] for c in lane.cells],
        "logStart": lane.log_start,
        "hw": lane.hw,
        "leo": lane.leo,
        "role": (
            "down"
            if not lane.alive
            else f"leader, epoch {lane.epoch}, ISR {lane.isr_text}"
            if lane.leads
            else f"follower of {lane.leader}, epoch {lane.epoch}"
        ),
        "marked": sorted(frame.marked(lane.replica)),
    }


def _frame(frame: Frame) -> dict[str, Any]:
    return {
        "index": frame.index,
        "words": frame.words,
        "broken": frame.broken,
        "marks": [{"kind": m.kind, "text": m.text} for m in frame.marks],
        "lanes": [_lane(lane, frame) for lane in frame.lanes],
        "changed": [list(c) for c in frame.changed],
    }


STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; } .note { color: #666; }
#controls { display: flex; gap: .6em; align-items: center; margin: 1em 0; }
#slider { flex: 1; }
#strip { display: flex; gap: 1px; height: 14px; margin-bottom: 1em; }
.tick { flex: 1; background: #ddd; cursor: pointer; }
.tick.broken { background: #e33; } .tick.marked { background: #f9a; }
.tick.current { outline: 2px solid #000; }
#words { font-family: monospace; font-size: 1.05em; margin-bottom: .8em; }
.lane { display: flex; align-items: center; gap: 1em; margin: .3em 0; }
.lane .name { width: 6em; font-weight: bold; } .lane .role { width: 16em; color: #444; }
.lane.down { opacity: .45; }
.log { display: flex; gap: 2px; min-height: 28px; align-items: center; }
.cell { width: 26px; height: 26px; color: #fff; display: flex; align-items: center;
        justify-content: center; font-size: 12px; border: 2px solid transparent; }
.cell.deleted { background: #ccc !important; color: #ccc; }
.cell.marked { border-color: red; }
.hw { width: 3px; height: 30px; background: green; }
.nums { color: #666; font-size: 12px; }
#marks li { color: #c00; }
#rejection { border: 2px solid #c00; padding: .5em 1em; margin-bottom: 1em; }
#rejection li { font-family: monospace; font-size: 12px; white-space: pre-wrap; }
#diff { border-collapse: collapse; font-family: monospace; font-size: 12px; }
#diff td, #diff th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; }
"""

SCRIPT = """
const data = JSON.parse(document.getElementById('frames').textContent);
const colours = __COLOURS__;
const slider = document.getElementById('slider');
let current = 0;
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function drawLane(lane) {
  const row = el('div', 'lane' + (lane.role === 'down' ? ' down' : ''));
  row.dataset.replica = lane.replica;
  row.append(el('span', 'name', 'replica ' + lane.replica), el('span', 'role', lane.role));
  const log = el('div', 'log');
  for (const [offset, epoch, record] of lane.cells) {
    if (offset === lane.hw) log.append(el('div', 'hw'));
    const cell = el('div', 'cell', String(record));
    cell.style.background = colours[epoch % colours.length];
    cell.dataset.offset = offset; cell.dataset.epoch = epoch;
    if (offset < lane.logStart) cell.classList.add('deleted');
    if (lane.marked.includes(offset)) cell.classList.add('marked');
    log.append(cell);
  }
  if (lane.hw === lane.leo) log.append(el('div', 'hw'));
  row.append(log, el('span', 'nums', 'HW ' + lane.hw + ', LEO ' + lane.leo));
  return row;
}
function show(i) {
  current = Math.max(0, Math.min(data.frames.length - 1, i));
  const f = data.frames[current];
  slider.value = current;
  document.getElementById('step').textContent = 'step ' + f.index;
  document.getElementById('words').textContent = f.words;
  document.getElementById('lanes').replaceChildren(...f.lanes.map(drawLane));
  document.getElementById('marks').replaceChildren(...f.marks.map(m => el('li', m.kind, m.text)));
  const rows = f.changed.map(([name, before, after]) => {
    const tr = el('tr'); tr.append(el('td', '', name), el('td', '', before), el('td', '', after));
    return tr;
  });
  document.getElementById('diff-body').replaceChildren(...rows);
  const ticks = document.querySelectorAll('.tick');
  ticks.forEach((t, k) => t.classList.toggle('current', k === current));
}
const strip = document.getElementById('strip');
data.frames.forEach((f, k) => {
  const t = el('div', 'tick' + (f.broken ? ' broken' : f.marks.length ? ' marked' : ''));
  t.title = 'step ' + f.index + ': ' + f.words;
  t.addEventListener('click', () => show(k));
  strip.append(t);
});
slider.max = data.frames.length - 1;
slider.addEventListener('input', () => show(Number(slider.value)));
document.getElementById('prev').addEventListener('click', () => show(current - 1));
document.getElementById('next').addEventListener('click', () => show(current + 1));
document.addEventListener('keydown', e => {
  if (e.key === 'ArrowLeft') show(current - 1);
  if (e.key === 'ArrowRight') show(current + 1);
});
const broken = data.frames.findIndex(f => f.broken);
show(broken >= 0 ? broken : 0);
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%(title)s</title>
<style>%(style)s</style></head>
<body>
<h1>%(title)s</h1>
<p class="note">%(note)s</p>
<div id="controls"><button id="prev">previous</button><input id="slider" type="range" min="0"
 value="0"><button id="next">next</button><span id="step"></span></div>
<div id="strip"></div>
%(rejection)s
<div id="words"></div>
<div id="lanes"></div>
<ul id="marks"></ul>
<table id="diff"><thead><tr><th>variable</th><th>before</th><th>after</th></tr></thead>
<tbody id="diff-body"></tbody></table>
<script type="application/json" id="frames">%(frames)s</script>
<script>%(script)s</script>
</body></html>
"""


def _rejection(line: Timeline, shown: Window) -> str:
    """The block that says where and why `kreplica conform` rejected the trace, with a
    button to its step ("" for a trace without a rejection)."""
    if line.rejection is None:
        return ""
    first, *rest = line.rejection.lines()
    items = "".join(f"<li>{html.escape(t)}</li>" for t in rest)
    step = line.rejection.step
    at = next((k for k, f in enumerate(shown.frames) if f.index == step), None)
    button = (
        f'<button id="to-rejected" onclick="show({at})">go to step {step}</button>'
        if at is not None
        else f"(step {step} is outside the steps shown)"
    )
    return f'<div id="rejection"><b>{html.escape(first)}</b> {button}<ul>{items}</ul></div>'


def page(line: Timeline, shown: Window) -> str:
    """The HTML page of the window's frames; it opens at the first broken invariant."""
    frames = json.dumps({"frames": [_frame(f) for f in shown.frames]}, separators=(",", ":"))
    note = "Steps move with the slider, the buttons or the arrow keys; red: an invariant broke."
    if shown.summary:
        note += " " + shown.summary + "."
    return PAGE % {
        "rejection": _rejection(line, shown),
        "title": html.escape(line.title),
        "note": html.escape(note),
        "style": STYLE,
        "frames": frames.replace("</", "<\\/"),  # no `</script>` inside the JSON
        "script": SCRIPT.replace("__COLOURS__", json.dumps(EPOCH_COLOURS)),
    }


def save(line: Timeline, shown: Window, path: Path) -> None:
    """Write the page to `path` (atomically: a crash leaves the old file or none)."""
    write_text_atomic(path, page(line, shown))
