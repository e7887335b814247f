"""A timeline as a picture (matplotlib, PNG or SVG): time runs down, one row per step; each
replica has a lane (a column) where its log is drawn as cells coloured by leader epoch and
labelled with record ids, with its HW (green bar) and LEO (black tick), an `L` where it leads
with the ISR it keeps, and grey where it is down. The action of each step, in the words of the
Kafka method it models, stands at the left; marks (a lost acknowledged record, replicas that
diverge, an HW that moves back) are outlined in red where they happen, and the step where an
invariant breaks is shaded red.

A last column is the controller's view (the leader it elected, its epoch, its ISR, the brokers
it believes alive), each field the step changed on yellow. For a trace with wall-clock stamps
(a real-Kafka trace) the gap since the step before stands beside each step's index, on yellow
where it is long; an HW no observation gave is a dashed grey bar, a log a faded one; a folded
run of fetch steps is one grey row."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: pictures go to files

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from kreplica.conformance.explain.timeline import Controller, Frame, Lane, Timeline
from kreplica.conformance.explain.window import Window

EPOCH_COLOURS = tuple(plt.get_cmap("tab10")(i) for i in range(10))
"""A cell's colour by its leader epoch (cycling)."""
ROW = 0.42
"""Inches per step."""
CELL = 0.32
"""Inches per log cell."""
TEXT_WIDTH = 6.5
"""Inches for the actions' column."""
WORDS = 78
"""Most characters of an action's words (longer ones are cut)."""
NOTE = 160
"""Characters per line of a rejection (longer ones are wrapped)."""
NOTE_HEIGHT = 0.12
"""Inches per line of a rejection, under the timeline."""
CHAR = 6 * 0.6 / 72 / CELL
"""The width of one character of a controller field (6 pt monospace), in log cells."""
CHANGED = "#ffe066"
"""The background of a controller field the step changed, and of a long gap."""
INDEX_X, GAP_X, WORDS_X = 0.075, 0.16, 0.17
"""Where a step's index and gap end, and its words begin, in the actions' column (a fraction
of it), for a trace with wall-clock stamps."""


def _colour(epoch: int) -> tuple[float, float, float, float]:
    return EPOCH_COLOURS[epoch % len(EPOCH_COLOURS)]


def _draw_lane(ax: Axes, frame: Frame, lane: Lane, x0: float, y: float, width: int) -> None:
    if not lane.alive:
        ax.add_patch(Rectangle((x0, y - 0.4), width, 0.8, color="0.85", hatch="//", lw=0))
    marked = frame.marked(lane.replica)
    faded = 0.35 if "log" in lane.unknown else 1.0
    for cell in lane.cells:
        deleted = cell.offset < lane.log_start
        face = "0.9" if deleted else _colour(cell.epoch)
        edge = "red" if cell.offset in marked else "white"
        lw = 2 if edge == "red" else 1
        ax.add_patch(
            Rectangle((x0 + cell.offset, y - 0.35), 1, 0.7, fc=face, ec=edge, lw=lw, alpha=faded)
        )
        if not deleted:
            ax.text(
                x0 + cell.offset + 0.5, y, str(cell.record), ha="center", va="center", fontsize=7
            )
    for offset in sorted(o for o in marked if o >= lane.leo):  # a record this step removed
        ax.add_patch(
            Rectangle((x0 + offset, y - 0.35), 1, 0.7, fill=False, ec="red", ls="--", lw=1.5)
        )
    if "hw" in lane.unknown:  # the last HW seen, dashed: no observation gave it here
        ax.plot([x0 + lane.hw] * 2, [y - 0.45, y + 0.45], color="0.45", lw=2, ls=(0, (2, 1)))
    else:
        ax.plot([x0 + lane.hw] * 2, [y - 0.45, y + 0.45], color="green", lw=2.5)
    ax.plot([x0 + lane.leo] * 2, [y - 0.2, y + 0.2], color="black", lw=1)
    if lane.leads:
        unknown = "?" if lane.unknown & {"role", "isr"} else ""
        ax.text(
            x0 + width - 0.2,
            y,
            f"L{lane.epoch} {lane.isr_text}{unknown}",
            ha="right",
            va="center",
            fontsize=6,
            weight="bold",
        )


def _controller_slots(frames: tuple[Frame, ...]) -> dict[str, float]:
    """Where each controller field begins in its column (in log cells), and `end`: the
    column's width (0: no frame has a controller)."""
    widths: dict[str, int] = {}
    for frame in frames:
        for name, text in frame.controller.fields() if frame.controller else ():
            widths[name] = max(widths.get(name, 0), len(text))
    slots, x = {}, 0.5
    for name, chars in widths.items():
        slots[name] = x
        x += chars * CHAR + 0.8
    slots["end"] = x if widths else 0.0
    return slots


def _draw_controller(
    ax: Axes, ctrl: Controller, x0: float, y: float, slots: dict[str, float]
) -> None:
    """The controller's fields in a row, each the step changed on yellow."""
    for name, text in ctrl.fields():
        box = (
            {"boxstyle": "square,pad=0.15", "fc": CHANGED, "ec": "none"}
            if name in ctrl.changed
            else None
        )
        colour = "0.5" if name in ctrl.unknown else "black"
        ax.text(x0 + slots[name], y, text, ha="left", va="center", fontsize=6, color=colour,
                bbox=box, family="monospace",
                weight="bold" if name in ctrl.changed else "normal")  # fmt: skip


def _row(
    line: Timeline,
    text_ax: Axes,
    ax: Axes,
    frame: Frame,
    y: float,
    width: int,
    slots: dict[str, float],
) -> None:
    if frame.broken:
        for a in (text_ax, ax):
            a.axhspan(y - 0.5, y + 0.5, color="red", alpha=0.12, lw=0)
    words = frame.words if len(frame.words) <= WORDS else frame.words[: WORDS - 1] + "…"
    index = f"{frame.index}-{frame.last}" if frame.folded else str(frame.index)
    grey = "0.45" if frame.folded else "black"
    x = 0.0
    if line.timed:
        text_ax.text(INDEX_X, y + 0.12, index, va="center", ha="right", fontsize=7,
                     family="monospace", color=grey)  # fmt: skip
        long = line.long(frame)
        box = {"boxstyle": "square,pad=0.1", "fc": CHANGED, "ec": "none"} if long else None
        text_ax.text(GAP_X, y + 0.12, line.gap_text(frame), va="center", ha="right",
                     fontsize=6, family="monospace", bbox=box, color=grey,
                     weight="bold" if long else "normal")  # fmt: skip
        x, index = WORDS_X, ""
    text_ax.text(
        x, y + 0.12, f"{index:>3}  {words}" if index else words, va="center", fontsize=7,
        family="monospace", color=grey, style="italic" if frame.folded else "normal",
    )  # fmt: skip
    if frame.marks:
        note = "; ".join(m.text for m in frame.marks)
        text_ax.text(0.04, y - 0.25, note[: WORDS + 20], va="center", fontsize=6, color="red")
    for i, lane in enumerate(frame.lanes):
        _draw_lane(ax, frame, lane, i * (width + 1), y, width)
    if frame.controller is not None:
        _draw_controller(ax, frame.controller, len(frame.lanes) * (width + 1), y, slots)


def _rejection_lines(line: Timeline) -> list[str]:
    """The rejection's lines, wrapped to NOTE characters, under the timeline."""
    if line.rejection is None:
        return []
    return [part for t in line.rejection.lines() for part in textwrap.wrap(t, NOTE)]


def draw(line: Timeline, shown: Window) -> Figure:
    """The figure of the window's frames."""
    width = max(1, max(lane.leo for f in shown.frames for lane in f.lanes)) + 3
    rows = len(shown.frames)
    slots = _controller_slots(shown.frames)
    columns = (width + 1) * line.replicas + slots["end"]
    lanes_width = CELL * columns
    notes = len(_rejection_lines(line))
    height = ROW * rows + 1.3 + NOTE_HEIGHT * notes
    fig = plt.figure(figsize=(TEXT_WIDTH + lanes_width, height))
    share = TEXT_WIDTH / (TEXT_WIDTH + lanes_width)
    bottom = 0.02 + NOTE_HEIGHT * notes / height  # room for the rejection's lines
    text_ax = fig.add_axes((0.0, bottom, share, 0.92 - bottom))
    ax = fig.add_axes((share, bottom, 1 - share - 0.01, 0.92 - bottom), sharey=text_ax)
    for y, frame in enumerate(shown.frames):
        _row(line, text_ax, ax, frame, -y, width, slots)
    for i in range(line.replicas):
        ax.text(
            i * (width + 1) + width / 2,
            0.8,
            f"replica {i + 1}",
            ha="center",
            fontsize=8,
            weight="bold",
        )
    if slots["end"]:
        ax.text(line.replicas * (width + 1) + slots["end"] / 2, 0.8, "controller",
                ha="center", fontsize=8, weight="bold")  # fmt: skip
    ax.set_xlim(-0.2, columns)
    ax.set_ylim(-rows + 0.4, 1.2)
    text_ax.set_xlim(0, 1)
    for a in (text_ax, ax):
        a.axis("off")
    if notes:
        fig.text(0.01, 0.005, "\n".join(_rejection_lines(line)), fontsize=6, color="red",
                 va="bottom", family="monospace")  # fmt: skip
    title = line.title + (f" ({shown.summary})" if shown.summary else "")
    if line.real:
        title += f"\n{line.source or 'a real trace'}: ? / dashed HW: no hook saw it at that step"
    fig.suptitle(title, fontsize=9, x=0.01, ha="left")
    epochs = sorted({c.epoch for f in shown.frames for lane in f.lanes for c in lane.cells})
    handles = [Patch(color=_colour(e), label=f"epoch {e}") for e in epochs]
    handles.append(Patch(color="green", label="HW"))
    if handles:
        fig.legend(handles=handles, loc="upper right", fontsize=6, ncol=min(6, len(handles)))
    return fig


def save(line: Timeline, shown: Window, path: Path) -> None:
    """Write the picture to `path`, PNG or SVG by its suffix."""
    fig = draw(line, shown)
    try:
        fig.savefig(path, format=path.suffix.lstrip(".").lower(), dpi=120)
    finally:
        plt.close(fig)
