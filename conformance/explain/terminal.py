"""A timeline in the terminal (rich): one block per step, one row per replica, the log as cells
coloured by leader epoch, the HW as a bar, and the step's marks in red beside it."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kreplica.conformance.explain.timeline import Frame, Lane, Timeline
from kreplica.conformance.explain.window import Window

EPOCH_STYLES = ("cyan", "magenta", "yellow", "green", "blue", "bright_red", "bright_cyan")
"""A cell's colour by its leader epoch (cycling)."""

MARK_STYLE = "bold red"


def _role(lane: Lane) -> str:
    if not lane.alive:
        return "down"
    if lane.leads:
        return f"leader e{lane.epoch}"
    return f"follows {lane.leader} e{lane.epoch}" if lane.leader > 0 else f"no leader e{lane.epoch}"


def _log(lane: Lane, marked: set[int]) -> Text:
    """The log: `|` at the log start and at the HW, each cell `record` in its epoch's colour."""
    text = Text()
    for cell in lane.cells:
        if cell.offset == lane.hw:
            text.append("|", style="bold green")
        if cell.offset < lane.log_start:
            text.append(" ·", style="dim")
            continue
        style = EPOCH_STYLES[cell.epoch % len(EPOCH_STYLES)]
        if cell.offset in marked:
            style += " reverse"
        text.append(f" {cell.record}", style=style)
    if lane.hw == lane.leo:
        text.append(" |", style="bold green")
    return text


def frame_table(frame: Frame) -> Table:
    """One step's replicas, a row each."""
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("replica", "role", "log (| = HW)", "HW", "LEO", "ISR"):
        table.add_column(column)
    for lane in frame.lanes:
        isr = lane.isr_text if lane.leads else ""
        log = _log(lane, frame.marked(lane.replica))
        table.add_row(str(lane.replica), _role(lane), log, str(lane.hw), str(lane.leo), isr)
    return table


def render(line: Timeline, shown: Window, console: Console) -> None:
    """Print the window's frames, each followed by its marks."""
    console.print(Text(line.title, style="bold"))
    if shown.summary:
        console.print(Text(shown.summary, style="dim"))
    for frame in shown.frames:
        title = Text(f"step {frame.index}: {frame.words}", style="bold")
        parts: list[Table | Text] = [title, frame_table(frame)]
        parts.extend(Text(f"  ! {m.text}", style=MARK_STYLE) for m in frame.marks)
        if line.rejection is not None and frame.index == line.rejection.step:
            parts.extend(Text(f"    {t}", style=MARK_STYLE) for t in line.rejection.lines()[1:])
        console.print(Group(*parts))
        console.print()
