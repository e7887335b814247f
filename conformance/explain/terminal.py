"""A timeline in the terminal (rich): one block per step, one row per replica, the log as cells
coloured by leader epoch, the HW as a bar, and the step's marks in red beside it; a last row for
the controller's view (the leader it elected, its epoch, live brokers, its ISR). What a step
changed is in reverse video, a value no observation gave is `?`, and the gap since the step
before (a real trace's stamps) stands in the step's title, in yellow where it is long."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kreplica.conformance.explain.timeline import Controller, Frame, Lane, Timeline
from kreplica.conformance.explain.window import Window

EPOCH_STYLES = ("cyan", "magenta", "yellow", "green", "blue", "bright_red", "bright_cyan")
"""A cell's colour by its leader epoch (cycling)."""

MARK_STYLE = "bold red"
CHANGED_STYLE = "bold reverse"
"""A value the step changed."""
UNKNOWN_STYLE = "dim"
"""A value no observation gave at the step (drawn from the last one seen)."""
LONG_STYLE = "bold black on yellow"
"""A gap between steps that stands out."""


def _role(lane: Lane) -> str:
    if not lane.alive:
        role = "down"
    elif lane.leads:
        role = f"leader e{lane.epoch}"
    elif not lane.hosted:
        role = "not hosted"
    elif lane.leader > 0:
        role = f"follows {lane.leader} e{lane.epoch}"
    else:
        role = f"no leader e{lane.epoch}"
    return role + " ?" if "role" in lane.unknown else role


def _log(lane: Lane, marked: set[int]) -> Text:
    """The log: `|` at the log start and at the HW, each cell `record` in its epoch's colour
    (no HW bar where the HW is unknown; the cells dim where the log is)."""
    text = Text()
    hw = None if "hw" in lane.unknown else lane.hw
    unknown = "log" in lane.unknown
    for cell in lane.cells:
        if cell.offset == hw:
            text.append("|", style="bold green")
        if cell.offset < lane.log_start:
            text.append(" ·", style="dim")
            continue
        style = UNKNOWN_STYLE if unknown else EPOCH_STYLES[cell.epoch % len(EPOCH_STYLES)]
        if cell.offset in marked:
            style += " reverse"
        text.append(f" {cell.record}", style=style)
    if hw == lane.leo:
        text.append(" |", style="bold green")
    if unknown:
        text.append(" ?", style=UNKNOWN_STYLE)
    return text


def _cell(text: str, field: str, changed: frozenset[str], unknown: frozenset[str]) -> Text:
    """A table cell, in reverse where the step changed it, dim where it is unknown."""
    style = UNKNOWN_STYLE if field in unknown else CHANGED_STYLE if field in changed else ""
    return Text(text, style=style)


def _controller_row(ctrl: Controller) -> tuple[Text, ...]:
    texts = dict(ctrl.fields())
    role = Text()
    role.append_text(_cell(texts["leader"], "leader", ctrl.changed, ctrl.unknown))
    role.append(" ")
    role.append_text(_cell(texts["epoch"], "epoch", ctrl.changed, ctrl.unknown))
    live = _cell(texts.get("live", ""), "live", ctrl.changed, ctrl.unknown)
    isr = _cell(texts.get("isr", "").removeprefix("ISR "), "isr", ctrl.changed, ctrl.unknown)
    return Text("controller", style="bold"), role, live, Text(), Text(), isr


def frame_table(frame: Frame) -> Table:
    """One step's replicas, a row each, and the controller's view last."""
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("replica", "role", "log (| = HW)", "HW", "LEO", "ISR"):
        table.add_column(column)
    for lane in frame.lanes:
        isr = ("?" if "isr" in lane.unknown else lane.isr_text) if lane.leads else ""
        log = _log(lane, frame.marked(lane.replica))
        changed, unknown = lane.changed, lane.unknown
        table.add_row(
            str(lane.replica),
            _cell(_role(lane), "role", changed, unknown),
            log,
            _cell(lane.hw_text, "hw", changed, unknown),
            _cell(str(lane.leo), "log", changed, unknown),
            _cell(isr, "isr", changed, unknown),
        )
    if frame.controller is not None:
        table.add_row(*_controller_row(frame.controller))
    return table


def title(line: Timeline, frame: Frame) -> Text:
    """`step 7 [+12.3 ms, t 1.234 s]: words` (`steps 8 to 20` for a folded row; the time only
    for a trace with stamps, in yellow where the gap is long)."""
    steps = f"steps {frame.index} to {frame.last}" if frame.folded else f"step {frame.index}"
    text = Text(steps, style="bold")
    if line.time_text(frame):
        long = line.long(frame)
        gap = line.gap_text(frame) + (" long gap" if long else "")
        at = line.at_text(frame)
        text.append(" [")
        text.append(gap, style=LONG_STYLE if long else "cyan")
        text.append(", " if gap and at else "")
        text.append(at)
        text.append("]")
    text.append(f": {frame.words}", style="dim" if frame.folded else "bold")
    return text


def header(line: Timeline) -> list[Text]:
    """What the trace is, for a real one: its source, what it does not observe, what `?`
    means."""
    if not line.real:
        return []
    return [
        Text(f"{line.source or 'a real trace'}: the variables it does not observe: "
             f"{', '.join(line.hidden)}; ? is a value no hook saw at that step", style="dim"),
    ]  # fmt: skip


def render(line: Timeline, shown: Window, console: Console) -> None:
    """Print the window's frames, each followed by its marks."""
    console.print(Text(line.title, style="bold"))
    for text in header(line):
        console.print(text)
    if shown.summary:
        console.print(Text(shown.summary, style="dim"))
    for frame in shown.frames:
        if frame.folded:  # nothing observable changed: no table
            console.print(title(line, frame))
            console.print()
            continue
        parts: list[Table | Text] = [title(line, frame)]
        if frame.source:
            parts.append(Text(f"  seen at {frame.source}", style="dim"))
        parts.append(frame_table(frame))
        parts.extend(Text(f"  ! {m.text}", style=MARK_STYLE) for m in frame.marks)
        if line.rejection is not None and frame.index == line.rejection.step:
            parts.extend(Text(f"    {t}", style=MARK_STYLE) for t in line.rejection.lines()[1:])
        console.print(Group(*parts))
        console.print()
