"""Parse TLC's `-tool` output into a verdict, state counts, depth and error trace.

In `-tool` mode TLC frames every message as `@!@!@STARTMSG <code>:<class> @!@!@ ...
@!@!@ENDMSG <code> @!@!@` (messages nest). `TlcOutput` reads that stream line by line, reports
progress while TLC runs, and `TlcOutput.result` turns it into a `TlcResult`: the verdict, the
state counts, the search depth and the error trace. Message codes are those of TLC 2.15
(`tlc2.output.EC`); the exit code is only a fallback. `tlc` runs TLC and feeds this parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from kreplica.conformance.errors import TlaValueError
from kreplica.conformance.tla.itf import ItfTrace, build_trace
from kreplica.conformance.tla.tlavalue import Value, parse_assignments
from kreplica.conformance.tla.vocabulary import INIT_ACTION


class Verdict(StrEnum):
    """What a model checker concluded about one model config."""

    OK = "ok"
    VIOLATION = "violation"  # an invariant is violated
    DEADLOCK = "deadlock"
    TEMPORAL = "temporal"  # a temporal or action property is violated
    ASSUMPTION = "assumption"  # an ASSUME is false
    PARSE_ERROR = "parse-error"
    CONFIG_ERROR = "config-error"
    EVAL_ERROR = "eval-error"  # TLC could not evaluate an expression of the spec
    CRASH = "crash"
    JAVA_MISSING = "java-missing"
    TIMEOUT = "timeout"


EXPECTABLE = frozenset(
    {Verdict.OK, Verdict.VIOLATION, Verdict.DEADLOCK, Verdict.TEMPORAL, Verdict.ASSUMPTION}
)
FAILURES = frozenset(
    {
        Verdict.PARSE_ERROR,
        Verdict.CONFIG_ERROR,
        Verdict.EVAL_ERROR,
        Verdict.CRASH,
        Verdict.JAVA_MISSING,
    }
)


@dataclass(frozen=True)
class Outcome:
    """A verdict plus the invariant or property it names (`violation TypeOK`)."""

    verdict: Verdict
    name: str | None = None

    def __str__(self) -> str:
        """Render as in a config header: `ok`, `violation AckedRecordsNeverLost`."""
        return f"{self.verdict} {self.name}" if self.name else str(self.verdict)

    @classmethod
    def parse(cls, text: str) -> Outcome:
        """Parse an expectation such as `ok`, `deadlock` or `violation Inv`; ValueError if bad."""
        words = text.split()
        allowed = ", ".join(sorted(EXPECTABLE))
        if not words or words[0] not in EXPECTABLE or len(words) > 2:
            raise ValueError(f"expected one of {allowed} (optionally with a name), got {text!r}")
        verdict = Verdict(words[0])
        if verdict in (Verdict.OK, Verdict.DEADLOCK, Verdict.ASSUMPTION) and len(words) > 1:
            raise ValueError(f"'{verdict}' takes no name, got {text!r}")
        return cls(verdict, words[1] if len(words) > 1 else None)

    def satisfies(self, expected: Outcome) -> bool:
        """Whether this outcome is the expected one (an unknown name matches any)."""
        if self.verdict != expected.verdict:
            return False
        return expected.name is None or self.name is None or self.name == expected.name

    @property
    def is_failure(self) -> bool:
        """Whether the checker failed to reach a verdict about the model (exit code 2)."""
        return self.verdict in FAILURES


# ---------------------------------------------------------------- raw messages

_MARKER = re.compile(r"@!@!@(?:STARTMSG (\d+):(\d+)|ENDMSG (\d+)) @!@!@")


@dataclass
class TlcMessage:
    """One framed TLC message: its code, class (0 info, 1 error, 3 warning, 4 state)..."""

    code: int
    severity: int
    text: str = ""
    children: list[TlcMessage] = field(default_factory=list)

    def walk(self) -> Iterator[TlcMessage]:
        """This message, then its nested messages, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


class MessageParser:
    """Split `-tool` output, fed line by line, into (nested) messages and loose text."""

    def __init__(self) -> None:
        """Start with no open message."""
        self._stack: list[tuple[TlcMessage, list[str]]] = []
        self.loose: list[str] = []

    def feed(self, line: str) -> list[TlcMessage]:
        """Consume one line of output; return the top-level messages it completed."""
        done: list[TlcMessage] = []
        pos, line = 0, line.rstrip("\r\n")
        for match in _MARKER.finditer(line):
            self._text(line[pos : match.start()])
            pos = match.end()
            if match.group(1) is not None:
                msg = TlcMessage(int(match.group(1)), int(match.group(2)))
                self._stack.append((msg, []))
            elif self._stack:
                done.extend(self._close())
        self._text(line[pos:])
        if pos < len(line) or pos == 0:
            self._text("\n")
        return done

    def close(self) -> list[TlcMessage]:
        """Close messages left open (TLC was killed); return those that became top-level."""
        done: list[TlcMessage] = []
        while self._stack:
            done.extend(self._close())
        return done

    def _text(self, text: str) -> None:
        """Append text to the innermost open message, or to the loose text."""
        if text:
            (self._stack[-1][1] if self._stack else self.loose).append(text)

    def _close(self) -> list[TlcMessage]:
        """Finish the innermost open message."""
        msg, parts = self._stack.pop()
        msg.text = "".join(parts).strip("\n")
        if self._stack:
            self._stack[-1][0].children.append(msg)
            return []
        return [msg]


# ---------------------------------------------------------------- interpretation


@dataclass(frozen=True)
class TraceState:
    """One state of an error trace: its number (from 1), the action and the variables."""

    number: int
    action: str
    values: dict[str, Value]
    location: str | None = None  # "line 8, col 11 to line 10, col 51 of module Counter"


@dataclass
class TlcResult:
    """Everything we learn from one TLC run."""

    outcome: Outcome
    message: str = ""
    states: int | None = None  # states generated
    distinct: int | None = None
    queue: int | None = None
    depth: int | None = None
    seconds: float | None = None
    exit_code: int | None = None
    trace: list[TraceState] = field(default_factory=list)
    loop: int | None = None  # 0-based index of the state a lasso trace returns to
    trace_error: str | None = None  # why the printed trace could not be parsed
    itf: ItfTrace | None = None  # a trace the checker wrote as ITF itself (Apalache)
    version: str | None = None
    command: list[str] = field(default_factory=list)
    output: str = ""
    stderr: str = ""

    def to_itf(self, meta: Mapping[str, Any]) -> ItfTrace | None:
        """The error trace as ITF (our `action` variable lifted into `#meta`), or None."""
        if self.itf is not None:
            return replace(self.itf, meta={**self.itf.meta, **meta})
        if not self.trace:
            return None
        steps = [(s.action, s.values) for s in self.trace]
        return build_trace(steps, meta, loop=self.loop)

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly summary (no raw output, no trace)."""
        return {
            "got": str(self.outcome),
            "message": self.message,
            "states": self.states,
            "distinct": self.distinct,
            "queue": self.queue,
            "depth": self.depth,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "exit_code": self.exit_code,
            "trace_length": len(self.trace),
        }


@dataclass(frozen=True)
class TlcProgress:
    """What TLC reported so far, for a live display."""

    phase: str = "starting"
    states: int | None = None
    distinct: int | None = None
    queue: int | None = None
    depth: int | None = None


ProgressCallback = Callable[[TlcProgress], None]

# Message codes of TLC 2.15 (tlc2.output.EC).
_VIOLATION = {2107, 2110}
_PROPERTY = {2108, 2112, 2116}
_DEADLOCK = {2114}
_ASSUMPTION = {2104}
_PARSE = {2171, 3002, 4000, 4001, 4002}
_CONFIG = set(range(5001, 5100)) | set(range(2222, 2244)) | {2280, 2281}
_CRASH = {1001, 1002, 1005, 2124, 2125, 2126, 2127, 2128, 2129, 2147, 2174, 2175}
_NOT_ERRORS = {2121, 2122, 2264}  # class-1 headers of an error trace
_STATE_PRINT = {2216, 2217, 2218}
_BACK_TO_STATE = 2122
_SUCCESS = 2193
_VERDICT_CODES = (
    (_VIOLATION, Verdict.VIOLATION),
    (_PROPERTY, Verdict.TEMPORAL),
    (_DEADLOCK, Verdict.DEADLOCK),
    (_ASSUMPTION, Verdict.ASSUMPTION),
)
# Fallback when the output says nothing (exit 0 without TLC's success message is a crash).
_EXIT_CODES = {
    10: Verdict.ASSUMPTION,
    11: Verdict.DEADLOCK,
    12: Verdict.VIOLATION,
    13: Verdict.TEMPORAL,
    14: Verdict.EVAL_ERROR,
    75: Verdict.EVAL_ERROR,
    76: Verdict.EVAL_ERROR,
    77: Verdict.EVAL_ERROR,
    150: Verdict.PARSE_ERROR,
    151: Verdict.CONFIG_ERROR,
}
_NUM = r"([\d,]+)"
_STATS = re.compile(
    rf"{_NUM} states generated(?: \([^)]*\))?, {_NUM} distinct states found"
    rf"(?: \([^)]*\))?, {_NUM} states? left on queue"
)
_INIT_STATES = re.compile(rf"{_NUM} distinct states? generated")
_PROGRESS_DEPTH = re.compile(r"Progress\((\d+)\)")
_DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")
_NAMED = re.compile(r"(?:Invariant|[Pp]roperty) (\S+) is violated")
_HEADER = re.compile(r"(\d+):\s*(.*)")
_LOCATION = re.compile(r"line \d+, col \d+ to line \d+, col \d+ of module \w+")
_EXCEPTION = re.compile(r"The exception was a (\S+)\s*\n?:?\s*", re.MULTILINE)
_PARSE_NOISE = re.compile(
    r"^(Parsing file|Semantic processing|Starting SANY|SANY finished|\*\*\*|Semantic errors:|"
    r"Residual stack trace|Module definition starting|Fatal errors while parsing|"
    r"tla2sany\.|Unknown location)"
)


def _num(text: str) -> int:
    """Parse a TLC count such as `1,234`."""
    return int(text.replace(",", ""))


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace and shorten to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _first_line(msg: TlcMessage) -> str:
    """The first non-empty line of a message."""
    return next((ln.strip() for ln in msg.text.splitlines() if ln.strip()), "")


def _classify(flat: Sequence[TlcMessage], loose: str, exit_code: int | None) -> Outcome:
    """Pick the verdict from the messages (warnings aside), falling back on the exit code."""
    msgs = [m for m in flat if m.severity != 3]
    codes = {m.code for m in msgs}
    if codes & _PARSE or "***Parse Error***" in loose or "Semantic errors:" in loose:
        return Outcome(Verdict.PARSE_ERROR)
    if codes & _CONFIG or any("ConfigFileException" in m.text for m in msgs):
        return Outcome(Verdict.CONFIG_ERROR)
    for codeset, verdict in _VERDICT_CODES:
        hit = next((m for m in msgs if m.code in codeset), None)
        if hit is not None:
            named = _NAMED.search(hit.text)
            return Outcome(verdict, named.group(1) if named else None)
    if codes & _CRASH:
        return Outcome(Verdict.CRASH)
    if any(m.severity == 1 and m.code not in _NOT_ERRORS for m in msgs):
        return Outcome(Verdict.EVAL_ERROR)
    if _SUCCESS in codes:
        return Outcome(Verdict.OK)
    return Outcome(_EXIT_CODES.get(exit_code or 0, Verdict.CRASH))


def _describe(outcome: Outcome, flat: Sequence[TlcMessage], loose: str, stderr: str) -> str:
    """One line that says what happened."""
    verdict = outcome.verdict
    if verdict == Verdict.PARSE_ERROR:
        return _parse_error_text(loose) or _error_text(flat) or "the spec does not parse"
    if verdict == Verdict.CONFIG_ERROR:
        cfg = [m for m in flat if m.code in _CONFIG]
        return one_line(cfg[0].text) if cfg else _error_text(flat)
    if verdict in (Verdict.EVAL_ERROR, Verdict.CRASH):
        return _error_text(flat) or _stderr_tail(stderr)
    decisive = _VIOLATION | _PROPERTY | _DEADLOCK | _ASSUMPTION | {_SUCCESS}
    hit = next((m for m in flat if m.code in decisive), None)
    return _first_line(hit).rstrip(":") if hit else ""


def _error_text(flat: Sequence[TlcMessage]) -> str:
    """The innermost text of the first error message, plus where TLC was evaluating."""
    errors = [m for m in flat if m.severity == 1 and m.code not in _NOT_ERRORS | {2103}]
    text = ""
    if errors:
        inner = [c for c in errors[0].walk() if c is not errors[0] and c.text.strip()]
        text = inner[-1].text if inner else _EXCEPTION.split(errors[0].text)[-1]
    nested = next((m for m in flat if m.code == 2103), None)
    spots = [ln.split(". ", 1)[-1] for ln in nested.text.splitlines()] if nested else []
    spots = [s for s in spots if s.startswith("Line ")]
    if spots:
        text = f"{text} (at {spots[-1]})" if text else f"error at {spots[-1]}"
    return one_line(text)


def _parse_error_text(loose: str) -> str:
    """The useful lines of SANY's parse or semantic error report."""
    lines = [ln.strip() for ln in loose.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not _PARSE_NOISE.match(ln)]
    return one_line("; ".join(useful[:3]))


def _stderr_tail(stderr: str) -> str:
    """The last non-empty line TLC printed on stderr."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return one_line(lines[-1]) if lines else ""


def _stats(flat: Sequence[TlcMessage]) -> tuple[int | None, int | None, int | None]:
    """States generated, distinct and left on queue (final stats, else the last progress)."""
    for code in (2199, 2200):
        found = [m for m in flat if m.code == code and _STATS.search(m.text)]
        if found:
            match = _STATS.search(found[-1].text)
            assert match is not None
            return _num(match.group(1)), _num(match.group(2)), _num(match.group(3))
    init = [m for m in flat if m.code == 2190 and _INIT_STATES.search(m.text)]
    if init:
        match = _INIT_STATES.search(init[-1].text)
        assert match is not None
        return _num(match.group(1)), _num(match.group(1)), None
    return None, None, None


def _depth(flat: Sequence[TlcMessage]) -> int | None:
    """The search depth TLC reported (final, else from the last progress message)."""
    for m in reversed(flat):
        match = _DEPTH.search(m.text) if m.code == 2194 else None
        if match:
            return int(match.group(1))
    progress = [_PROGRESS_DEPTH.search(m.text) for m in flat if m.code == 2200]
    hits = [p for p in progress if p]
    return int(hits[-1].group(1)) if hits else None


def _header_action(header: str) -> tuple[str, str | None]:
    """Split `<Inc line 8, col 11 to ... of module M>` into the action name and location."""
    inner = header.strip()
    if inner.startswith("<") and inner.endswith(">"):
        inner = inner[1:-1].strip()
    if inner == "Initial predicate":
        return INIT_ACTION, None
    where = _LOCATION.search(inner)
    name = inner[: where.start()].strip() if where else inner
    name = re.split(r"[\s(]", name, maxsplit=1)[0] if name else "Action"
    return name, where.group() if where else None


def _trace_state(msg: TlcMessage) -> TraceState | None:
    """Parse a state message `N: <Action ...>` followed by `/\\ var = value` lines."""
    head, _, body = msg.text.partition("\n")
    match = _HEADER.fullmatch(head.strip())
    if match is None or "Stuttering" in head or "Back to state" in head:
        return None
    action, location = _header_action(match.group(2))
    return TraceState(int(match.group(1)), action, parse_assignments(body), location)


def _trace(flat: Sequence[TlcMessage]) -> tuple[list[TraceState], int | None]:
    """The error trace and the 0-based index it loops back to (lasso or stuttering)."""
    states: list[TraceState] = []
    loop: int | None = None
    for msg in flat:
        if msg.code in _STATE_PRINT:
            state = _trace_state(msg)
            if state is not None:
                states.append(state)
            elif "Stuttering" in msg.text and states:
                loop = len(states) - 1
        elif msg.code == _BACK_TO_STATE:
            match = _HEADER.match(msg.text.strip())
            loop = int(match.group(1)) - 1 if match else None
        elif msg.code == 2107:
            _, _, body = msg.text.partition("\n")
            states = [TraceState(1, INIT_ACTION, parse_assignments(body))]
    return states, loop


def _version(flat: Sequence[TlcMessage]) -> str | None:
    """TLC's version line."""
    return next((_first_line(m) for m in flat if m.code == 2262), None)


def interpret(
    messages: Sequence[TlcMessage], loose: str, exit_code: int | None, stderr: str = ""
) -> TlcResult:
    """Turn parsed TLC messages into a result."""
    flat = [m for top in messages for m in top.walk()]
    outcome = _classify(flat, loose, exit_code)
    states, distinct, queue = _stats(flat)
    result = TlcResult(
        outcome=outcome,
        message=_describe(outcome, flat, loose, stderr),
        states=states,
        distinct=distinct,
        queue=queue,
        depth=_depth(flat),
        exit_code=exit_code,
        version=_version(flat),
        stderr=stderr,
    )
    try:
        result.trace, result.loop = _trace(flat)
    except TlaValueError as err:
        result.trace_error = str(err)
    return result


class TlcOutput:
    """Collect TLC's stdout line by line, reporting progress as messages complete."""

    def __init__(self, on_progress: ProgressCallback | None = None) -> None:
        """Start empty; `on_progress` is called whenever the progress changes."""
        self.parser = MessageParser()
        self.messages: list[TlcMessage] = []
        self.lines: list[str] = []
        self.progress = TlcProgress()
        self.on_progress = on_progress

    def feed(self, line: str) -> None:
        """Consume one line of TLC's stdout."""
        self.lines.append(line if line.endswith("\n") else line + "\n")
        for msg in self.parser.feed(line):
            self.messages.append(msg)
            self._track(msg)

    def feed_all(self, lines: Iterable[str]) -> None:
        """Consume many lines."""
        for line in lines:
            self.feed(line)

    def _track(self, msg: TlcMessage) -> None:
        """Update the progress from one top-level message."""
        phases = {2220: "parsing", 2189: "initial states", 2190: "checking", 2192: "temporal"}
        new = self.progress
        if msg.code in phases:
            new = replace(new, phase=phases[msg.code])
        if msg.code in (2190, 2199, 2200):
            states, distinct, queue = _stats([msg])
            new = replace(new, states=states, distinct=distinct, queue=queue)
        if msg.code in (2194, 2200):
            new = replace(new, depth=_depth([msg]))
        if new != self.progress:
            self.progress = new
            if self.on_progress is not None:
                self.on_progress(new)

    def result(self, exit_code: int | None, stderr: str = "") -> TlcResult:
        """Interpret everything read so far."""
        self.messages.extend(self.parser.close())
        loose = "".join(self.parser.loose)
        result = interpret(self.messages, loose, exit_code, stderr)
        result.output = "".join(self.lines)
        return result


def parse_tlc_output(text: str, exit_code: int | None = None, stderr: str = "") -> TlcResult:
    """Parse the complete stdout of a `tlc2.TLC -tool` run."""
    out = TlcOutput()
    out.feed_all(text.splitlines(keepends=True))
    result = out.result(exit_code, stderr)
    result.seconds = tlc_seconds(result)
    return result


_FINISHED = re.compile(r"Finished in (?:(\d+)h ?)?(?:(\d+)min ?)?(?:(\d+)s ?)?(?:(\d+)ms)?")


def tlc_seconds(result: TlcResult) -> float | None:
    """The run time TLC itself reported (`Finished in 01min 02s`), if any."""
    match = _FINISHED.search(result.output)
    if match is None or not any(match.groups()):
        return None
    h, m, s, ms = (int(g) if g else 0 for g in match.groups())
    return h * 3600 + m * 60 + s + ms / 1000
