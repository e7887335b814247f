"""A timeline as one self-contained HTML page that steps through the run: previous and next
buttons, a slider, a strip of every step (in red the step where an invariant breaks, or that
conform rejected), the lanes of the current step, its marks, and its state diff (each variable
the step changed, before and after). The frames are embedded as JSON; the page loads nothing
else, so it opens from a file.

The page's structure is what `tests/test_explain_html.py` checks in a real browser: `#lanes`
holds one `.lane` per replica, each with its `.cell`s; `#strip` one `.tick` per step; `#slider`,
`#prev` and `#next` move `#step`; `#marks` and `#diff` describe the current step. For a trace
`kreplica conform` rejected, `#rejection` says where and why, and `#to-rejected` goes there.

`#controller` is the controller's lane: a `.field` per variable (`data-field` leader, epoch,
isr, live), `.changed` where the step changed it; a lane's `.role` and `.nums` are `.changed`
too. For a trace with wall-clock stamps (a real-Kafka trace), `#time` says the gap since the
step before and the time since the first (`.long` where the gap stands out, as is its tick);
`#source` where the step was seen and what it did not observe; an HW no observation gave is
`HW ?` beside a grey bar. A folded run of fetch steps is one step of the page (`steps A to
B`)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from kreplica.conformance.explain.timeline import Controller, Frame, Lane, Timeline
from kreplica.conformance.explain.window import Window
from kreplica.conformance.tla.itf import write_text_atomic

EPOCH_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
"""A cell's colour by its leader epoch (cycling), as in the PNG."""


def _role(lane: Lane) -> str:
    if not lane.alive:
        role = "down"
    elif lane.leads:
        isr = "?" if "isr" in lane.unknown else lane.isr_text
        role = f"leader, epoch {lane.epoch}, ISR {isr}"
    elif not lane.hosted:
        role = "hosts no partition (not hosted)"
    elif lane.leader > 0:
        role = f"follower of {lane.leader}, epoch {lane.epoch}"
    else:
        role = f"no leader, epoch {lane.epoch}"
    return role + " ?" if "role" in lane.unknown else role


def _lane(lane: Lane, frame: Frame) -> dict[str, Any]:
    return {
        "replica": lane.replica,
        "cells": [[c.offset, c.epoch, c.record] for c in lane.cells],
        "logStart": lane.log_start,
        "hw": lane.hw,
        "hwText": lane.hw_text,
        "leo": lane.leo,
        "role": _role(lane),
        "marked": sorted(frame.marked(lane.replica)),
        "changed": sorted(lane.changed),
        "unknown": sorted(lane.unknown),
    }


def _controller(ctrl: Controller | None) -> dict[str, Any] | None:
    if ctrl is None:
        return None
    return {
        "fields": [list(f) for f in ctrl.fields()],
        "changed": sorted(ctrl.changed),
        "unknown": sorted(ctrl.unknown),
    }


def _frame(line: Timeline, frame: Frame) -> dict[str, Any]:
    return {
        "index": frame.index,
        "last": frame.last,
        "words": frame.words,
        "broken": frame.broken,
        "marks": [{"kind": m.kind, "text": m.text} for m in frame.marks],
        "lanes": [_lane(lane, frame) for lane in frame.lanes],
        "controller": _controller(frame.controller),
        "changed": [list(c) for c in frame.changed],
        "time": line.time_text(frame),
        "long": line.long(frame),
        "source": frame.source,
        "omitted": list(frame.omitted),
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
.tick.long { border-top: 4px solid #e6a800; } .tick.folded { opacity: .5; }
#time { font-family: monospace; padding: 0 .3em; } #time.long { background: #ffe066;
        font-weight: bold; }
#source { color: #666; font-size: 12px; margin-bottom: .5em; }
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
.hw.unknown { background: repeating-linear-gradient(#999 0 4px, transparent 4px 7px); }
.changed { background: #ffe066; font-weight: bold; }
.unknown { color: #999; } .log.unknown .cell { opacity: .4; }
#controller { border-top: 1px dashed #bbb; padding-top: .3em; }
#controller .field { margin-right: 1.2em; padding: 0 .2em; }
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
function classes(base, name, changed, unknown) {
  return base + (changed.includes(name) ? ' changed' : '') +
    (unknown.includes(name) ? ' unknown' : '');
}
function drawLane(lane) {
  const row = el('div', 'lane' + (lane.role === 'down' ? ' down' : ''));
  row.dataset.replica = lane.replica;
  const role = el('span', classes('role', 'role', lane.changed, lane.unknown), lane.role);
  row.append(el('span', 'name', 'replica ' + lane.replica), role);
  const log = el('div', 'log' + (lane.unknown.includes('log') ? ' unknown' : ''));
  const hwBar = lane.unknown.includes('hw') ? 'hw unknown' : 'hw';
  for (const [offset, epoch, record] of lane.cells) {
    if (offset === lane.hw) log.append(el('div', hwBar));
    const cell = el('div', 'cell', String(record));
    cell.style.background = colours[epoch % colours.length];
    cell.dataset.offset = offset; cell.dataset.epoch = epoch;
    if (offset < lane.logStart) cell.classList.add('deleted');
    if (lane.marked.includes(offset)) cell.classList.add('marked');
    log.append(cell);
  }
  if (lane.hw === lane.leo) log.append(el('div', hwBar));
  const hwUnknown = lane.unknown.includes('hw');
  const moved = !hwUnknown && (lane.changed.includes('hw') || lane.changed.includes('log'));
  const nums = el('span', 'nums' + (moved ? ' changed' : '') + (hwUnknown ? ' unknown' : ''),
                  'HW ' + lane.hwText + ', LEO ' + lane.leo);
  row.append(log, nums);
  return row;
}
function drawController(ctrl) {
  const box = document.getElementById('controller');
  if (!ctrl) { box.replaceChildren(); return; }
  const spans = ctrl.fields.map(([name, text]) => {
    const s = el('span', classes('field', name, ctrl.changed, ctrl.unknown), text);
    s.dataset.field = name;
    return s;
  });
  box.replaceChildren(el('span', 'name', 'controller'), ...spans);
}
function show(i) {
  current = Math.max(0, Math.min(data.frames.length - 1, i));
  const f = data.frames[current];
  slider.value = current;
  document.getElementById('step').textContent =
    f.last > f.index ? 'steps ' + f.index + ' to ' + f.last : 'step ' + f.index;
  const time = document.getElementById('time');
  time.textContent = f.time; time.className = f.long ? 'long' : '';
  const seen = f.source ? ['seen at ' + f.source] : [];
  if (f.omitted.length) seen.push('not observed at this step: ' + f.omitted.join(', '));
  document.getElementById('source').textContent = seen.join('; ');
  document.getElementById('words').textContent = f.words;
  document.getElementById('lanes').replaceChildren(...f.lanes.map(drawLane));
  drawController(f.controller);
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
  const t = el('div', 'tick' + (f.broken ? ' broken' : f.marks.length ? ' marked' : '') +
    (f.long ? ' long' : '') + (f.last > f.index ? ' folded' : ''));
  t.title = 'step ' + f.index + (f.time ? ' (' + f.time + ')' : '') + ': ' + f.words;
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
 value="0"><button id="next">next</button><span id="step"></span><span id="time"></span></div>
<div id="strip"></div>
%(rejection)s
<div id="words"></div>
<div id="source"></div>
<div id="lanes"></div>
<div id="controller" class="lane"></div>
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
    frames = [_frame(line, f) for f in shown.frames]
    frames_json = json.dumps({"frames": frames}, separators=(",", ":"))
    note = "Steps move with the slider, the buttons or the arrow keys; red: an invariant broke."
    if line.timed:
        note += (f" Yellow: a gap of {line.long_gap / 1e6:g} ms or more since the step before;"
                 " +gap since the step before, t since the first.")  # fmt: skip
    if line.real:
        note += (f" {line.source or 'A real trace'}: it does not observe "
                 f"{', '.join(line.hidden)}; ? is a value no hook saw at that step.")  # fmt: skip
    if shown.summary:
        note += " " + shown.summary + "."
    return PAGE % {
        "rejection": _rejection(line, shown),
        "title": html.escape(line.title),
        "note": html.escape(note),
        "style": STYLE,
        "frames": frames_json.replace("</", "<\\/"),  # no `</script>` inside the JSON
        "script": SCRIPT.replace("__COLOURS__", json.dumps(EPOCH_COLOURS)),
    }


def save(line: Timeline, shown: Window, path: Path) -> None:
    """Write the page to `path` (atomically: a crash leaves the old file or none)."""
    write_text_atomic(path, page(line, shown))
