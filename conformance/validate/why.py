"""Why a trace was rejected: the conjunct of the logged action's definition that is false.

`tracecheck` pinpoints the first step no successor explains, and the variables that differ.
This module goes one level down, into the spec's text. It replays the trace up to the step
before (the same trace spec, the same constants), then evaluates the logged action once
more, with every variable the trace observes at that step fixed to its logged value in the
next state, and the hidden ones left for the action to choose. The action is false there, and
TLC's coverage (`-coverage`) says how far its evaluation got: the conjunct reached last, in the
order of the spec's text, is the one that is false. The action is evaluated from a copy of the
spec under another module name, so that only the probe's evaluation counts, not the replay's.

A second run prints, in the same place and with the same bindings (the LET names, the message
`m`, the bounded variables), the values of the names the conjunct mentions.

Where hidden variables leave several candidate states or messages, coverage adds up their
evaluations, and the conjunct reached last belongs to the candidate that got furthest: the
closest allowed successor. `UNCHANGED` conjuncts, which TLC's coverage does not count, are
judged here from the logged states: one that lists an observed variable the step changed is
false, if its conjunct list was evaluated.

There is no TLA+ parser here: which expressions are conjuncts, branches and bullets is read from
the spec's layout (the column of each bullet, the IF or CASE a THEN, ELSE or `->` belongs to), as
spec/KafkaReplication.tla writes it. Where the layout is of another kind the answer may be an
enclosing conjunct rather than the innermost one. tests/test_why.py and the tutorials hold it to
the rejections they show.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kreplica.conformance.tla.tlavalue import Value, format_value
from kreplica.conformance.tla.tlc import TlcOptions, run_tlc
from kreplica.conformance.validate.tracecheck import (
    SPEC_MODULE,
    TRACE_MODULE,
    VIOLATES,
    CheckSettings,
    Prepared,
    SpecParams,
    TraceResult,
    full_prepare,
    printed_values,
    tlc_config,
    variant_for,
    write_batch,
)

COPY_SPEC = "KafkaReplicationWhy"
COPY_TRACE = "KafkaReplicationTraceWhy"
PROBE = "WhyProbe"
MAX_TERMS = 10
"""Names shown per conjunct at most."""
MAX_VALUE_CHARS = 240
"""A longer value is cut (a whole `msgs` says little at this point)."""


@dataclass(frozen=True)
class Why:
    """The false conjunct of a rejected step: where it is in the spec, its text, and the
    values of the names it mentions, as the probe evaluated them."""

    line: int
    """Its first line in spec/KafkaReplication.tla (1-based)."""
    conjunct: str
    values: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        """One line: where, what, and the values."""
        said = f"{SPEC_MODULE}.tla:{self.line}: {self.conjunct} is false"
        if self.values:
            said += ", where " + ", ".join(f"{name} = {value}" for name, value in self.values)
        return said


@dataclass(frozen=True)
class Node:
    """One expression in TLC's coverage report: where it is and how often it was evaluated."""

    depth: int
    line: int
    col: int
    end_line: int
    end_col: int
    module: str
    count: int


_COVERAGE = re.compile(
    r"^\s*(\|*)line (\d+), col (\d+) to line (\d+), col (\d+) of module (\w+): (\d+)(?::\d+)?$"
)


def coverage_nodes(output: str, action: str = "WhyNext") -> list[Node]:
    """The expressions TLC's coverage lists under the action `action`, in order."""
    nodes: list[Node] = []
    inside = False
    for raw in output.splitlines():
        if raw.startswith("<"):
            inside = raw.startswith(f"<{action} ")
            continue
        found = _COVERAGE.match(raw) if inside else None
        if found:
            pipes, line, col, end_line, end_col, module, count = found.groups()
            nodes.append(
                Node(
                    len(pipes), int(line), int(col), int(end_line), int(end_col), module, int(count)
                )
            )
    return nodes


def reached(nodes: Sequence[Node]) -> list[Node]:
    """The nodes evaluated at least once: counted, or with a counted node below them in the
    report or inside their text (TLC does not count an equality whose primed variable is
    already fixed, only its operands, and lists an operator's arguments apart from it)."""
    counted = [n for n in nodes if n.count > 0]
    out = []
    for i, node in enumerate(nodes):
        below = False
        for later in nodes[i + 1 :]:
            if later.depth <= node.depth:
                break
            if later.count > 0:
                below = True
                break
        if node.count > 0 or below or any(_inside(c, node) for c in counted):
            out.append(node)
    return out


def _inside(inner: Node, outer: Node) -> bool:
    """`inner`'s text lies within `outer`'s, in the same module."""
    return (
        inner.module == outer.module
        and (outer.line, outer.col) <= (inner.line, inner.col)
        and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)
    )


def action_span(spec_lines: Sequence[str], action: str) -> tuple[int, int] | None:
    """The lines (1-based, inclusive) of the definition of `action` in the spec's text."""
    head = re.compile(rf"^{re.escape(action)}(\(.*\))? ==")
    for i, line in enumerate(spec_lines):
        if head.match(line):
            end = i + 1
            while end < len(spec_lines) and (
                not spec_lines[end].strip() or spec_lines[end][:1] == " "
            ):
                end += 1
            while end > i + 1 and not spec_lines[end - 1].strip():
                end -= 1
            return i + 1, end
    return None


def is_conjunct(spec_lines: Sequence[str], line: int, col: int) -> bool:
    """The expression starting at (line, col) follows a `/\\`: a conjunct."""
    before = spec_lines[line - 1][: col - 1].rstrip()
    return before.endswith("/\\")


STEP_ENDS = ("/\\", "\\/", "THEN", "ELSE", "->")
"""What precedes an expression the action's truth hangs on: a conjunct, a disjunct, the
branch of an IF or of a CASE."""


def is_step(spec_lines: Sequence[str], line: int, col: int) -> bool:
    """The expression starting at (line, col) is a conjunct or a disjunct, or a branch of an
    IF or a CASE that is itself a step (not a value's IF, as in `hw |-> IF e THEN h ELSE 0`)."""
    before = spec_lines[line - 1][: col - 1].rstrip()
    if before.endswith(("/\\", "\\/")):
        return True
    if not before.endswith(("THEN", "ELSE", "->")) or before.endswith("|->"):
        return False
    text = "\n".join([*spec_lines[: line - 1], before])
    opener = _opener(text)
    return opener is not None and is_step(spec_lines, *opener)


_KEYWORD = re.compile(r'"[^"\n]*"|\b(IF|THEN|ELSE|CASE)\b|(?<!\|)->')


def _opener(text: str) -> tuple[int, int] | None:
    """Where the IF or CASE starts whose THEN, ELSE or arm (`->`) ends `text`: (line, col),
    1-based; None if there is none."""
    tokens = [(m.group(0), m.start()) for m in _KEYWORD.finditer(text) if m.group(0)[0] != '"']
    last, _ = tokens.pop()
    if last == "->":
        found = next((at for word, at in reversed(tokens) if word == "CASE"), None)
    else:
        depth, found = 0, None
        for word, at in reversed(tokens):
            if word == last:
                depth += 1
            elif word == "IF":
                if depth == 0:
                    found = at
                    break
                depth -= 1
    if found is None:
        return None
    line = text.count("\n", 0, found) + 1
    return line, found - (text.rfind("\n", 0, found) + 1) + 1


def expression_text(spec_lines: Sequence[str], node: Node) -> str:
    """The text of the expression at `node`, whitespace collapsed."""
    if node.line == node.end_line:
        text = spec_lines[node.line - 1][node.col - 1 : node.end_col]
    else:
        parts = [spec_lines[node.line - 1][node.col - 1 :]]
        parts += spec_lines[node.line : node.end_line - 1]
        parts.append(spec_lines[node.end_line - 1][: node.end_col])
        text = " ".join(parts)
    return " ".join(_strip_comments(text).split())


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("\\*")[0] for line in text.splitlines())


_UNCHANGED = re.compile(r"/\\ UNCHANGED (<<[^>]*>>|\w+)", re.DOTALL)


def unchanged_conjuncts(
    spec_lines: Sequence[str], span: tuple[int, int]
) -> list[tuple[Node, list[str]]]:
    """The `/\\ UNCHANGED` conjuncts of the span, as nodes, with the names they list."""
    first, last = span
    text = "\n".join(spec_lines[first - 1 : last])
    tuples = tuple_definitions(spec_lines)
    found = []
    for match in _UNCHANGED.finditer(text):
        start = match.start() + 3
        line = first + text.count("\n", 0, start)
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        end = match.end()
        end_line = first + text.count("\n", 0, end)
        end_col = end - (text.rfind("\n", 0, end) + 1)
        names = expand(re.findall(r"\w+", match.group(1)), tuples)
        found.append((Node(0, line, col, end_line, end_col, COPY_SPEC, 0), names))
    return found


_TUPLE = re.compile(r"^(\w+) ==\s*<<([^>]*)>>", re.MULTILINE)


def tuple_definitions(spec_lines: Sequence[str]) -> dict[str, list[str]]:
    """The spec's names for tuples of variables (`replicaVars == <<log, hw, ...>>`)."""
    return {name: re.findall(r"\w+", body) for name, body in _TUPLE.findall("\n".join(spec_lines))}


def expand(names: Iterable[str], tuples: Mapping[str, list[str]]) -> list[str]:
    """`names` with each tuple name replaced by the variables it stands for."""
    out: list[str] = []
    for name in names:
        out += expand(tuples[name], tuples) if name in tuples else [name]
    return out


def _list_evaluated(
    spec_lines: Sequence[str], node: Node, evaluated: Iterable[Node], span: tuple[int, int]
) -> bool:
    """The conjunct list `node` is in was evaluated: an action-level conjunct, or a sibling at
    the same column (the same bullet list, no shallower line in between) was reached."""
    bullet = node.col - 3
    for other in evaluated:
        if other.col - 3 != bullet or not is_conjunct(spec_lines, other.line, other.col):
            continue
        low, high = sorted((other.line, node.line))
        between = spec_lines[low : high - 1]
        if all(not s.strip() or len(s) - len(s.lstrip()) >= bullet for s in between):
            return True
    return bullet <= 5 and node.line >= span[0]


_BULLET = re.compile(r"/\\|\\/")
_BEFORE_BULLET = ("IN", "THEN", "ELSE", "==", "->", ":", "(")


def bullet_steps(spec_lines: Sequence[str], span: tuple[int, int]) -> list[Node]:
    """The bulleted conjuncts and disjuncts of the span, by TLA+'s layout: a bullet that
    starts its line (or follows IN, THEN, ELSE, `==`, `->`, `:` or `(`) holds what follows it,
    down to the first later line that starts at or left of its column."""
    first, last = span
    found = []
    for number in range(first, last + 1):
        text = spec_lines[number - 1]
        for match in _BULLET.finditer(text):
            before = _strip_comments(text[: match.start()]).rstrip()
            if before and not before.endswith(_BEFORE_BULLET):
                continue
            end = number
            while end < last and _continues(spec_lines[end], match.start()):
                end += 1
            found.append(
                Node(0, number, match.end() + 2, end, len(spec_lines[end - 1]), COPY_SPEC, 0)
            )
    return found


def _continues(line: str, column: int) -> bool:
    """`line` belongs to a bullet at 0-based `column`: blank, or it starts right of it."""
    stripped = line.lstrip()
    return not stripped or stripped.startswith("\\*") or len(line) - len(stripped) > column


def false_conjunct(
    spec_lines: Sequence[str],
    nodes: Sequence[Node],
    action: str,
    changed: frozenset[str],
) -> Node | None:
    """The conjunct of `action` the probe's evaluation reached last in the spec's text: the
    false one. `changed`: the observed variables the logged step changed (an UNCHANGED that
    lists one is false where its list was evaluated)."""
    span = action_span(spec_lines, action)
    if span is None:
        return None
    first, last = span
    inside = [
        n
        for n in reached(nodes)
        if n.module == COPY_SPEC and first <= n.line <= last and is_step(spec_lines, n.line, n.col)
    ]
    counted = [n for n in nodes if n.count > 0 and n.module == COPY_SPEC]
    starts = {(n.line, n.col) for n in inside}
    for bullet in bullet_steps(spec_lines, span):
        if (bullet.line, bullet.col) not in starts and any(_inside(c, bullet) for c in counted):
            inside.append(bullet)  # TLC lists an operator's arguments, not the application
    candidates = list(inside)
    for node, names in unchanged_conjuncts(spec_lines, span):
        if (
            changed & set(names)
            and _list_evaluated(spec_lines, node, inside, span)
            and not any(n.line > node.line for n in inside if n.col == node.col)
        ):
            candidates.append(node)  # false, and its list got this far
    if not candidates:
        return None
    return max(candidates, key=lambda n: (n.line, n.col))


# ---------------------------------------------------------------- the names and their values


KEYWORDS = frozenset(
    {"IF", "THEN", "ELSE", "LET", "IN", "CASE", "OTHER", "EXCEPT", "UNCHANGED", "DOMAIN"}
    | {"SUBSET", "UNION", "CHOOSE", "TRUE", "FALSE", "LAMBDA", "ENABLED"}
)
_TERM = re.compile(
    r"(?<![\w.!\\])([A-Za-z_]\w*)((?:\([\w\s,.]*\))?(?:\[[\w\s,.]*\])*(?:\.[A-Za-z_]\w*)*'?)"
)
"""A name, with simple arguments or indexes, field accesses and a prime: `LEO(l)`, `hw[l]`,
`m.offset`, `hw'`."""
_BOUND = re.compile(r"(?:\\[EA]|CHOOSE|LAMBDA)\s+(\w+)|[\[{]\s*(\w+)\s+\\in")


def mentioned_terms(conjunct: str, primed_ok: bool = True, plain: bool = False) -> list[str]:
    """The names, applications, field accesses and primed variables `conjunct` mentions, in
    order: the terms worth a value (not the names its own quantifiers bind)."""
    text = re.sub(r'"[^"]*"', '""', conjunct)
    bound = {a or b for a, b in _BOUND.findall(text)}
    terms: list[str] = []
    for match in _TERM.finditer(text):
        name, tail = match.groups()
        rest = text[match.end() :].lstrip()
        if name in KEYWORDS or name in bound or rest.startswith(("|->", "==")):
            continue
        if not tail and rest.startswith("("):
            continue  # an operator whose arguments nest: its parts are terms of their own
        if any(re.search(rf"\b{re.escape(b)}\b", tail) for b in bound):
            continue
        if (tail.endswith("'") and not primed_ok) or (plain and tail.startswith(("(", "["))):
            continue
        term = name + tail
        if term not in terms:
            terms.append(term)
    return terms[:MAX_TERMS]


def with_print(spec_lines: Sequence[str], node: Node, terms: Sequence[str]) -> list[str] | None:
    """The spec's lines with a PrintT of `terms` evaluated just before the conjunct at `node`,
    in its context; None where the layout does not allow it."""
    pairs = ", ".join(f'<<"{t}", {t}>>' for t in terms)
    show = f'PrintT(<<"kreplica-why", {pairs}>>)'
    lines = list(spec_lines)
    start = lines[node.line - 1]
    if start[: node.col - 1].strip() == "/\\":
        lines.insert(node.line - 1, " " * (node.col - 4) + "/\\ " + show)
        return lines
    if node.line == node.end_line:
        conjunct = start[node.col - 1 : node.end_col]
        lines[node.line - 1] = (
            start[: node.col - 1] + f"({show} /\\ ({conjunct}))" + start[node.end_col :]
        )
        return lines
    if any(_BULLET.match(line.lstrip()) for line in lines[node.line : node.end_line]):
        return None  # its own bullets would shift against each other
    lines[node.line - 1] = start[: node.col - 1] + f"{show} /\\ " + start[node.col - 1 :]
    return lines


# ---------------------------------------------------------------- the probe


def _probe_module(step: int, names: Sequence[str]) -> str:
    """The probe: replay up to `step` - 1 with the trace spec, then the logged action of
    `step` from the copy, every observed variable fixed to its logged next value."""
    fixed = "\n".join(
        f'         /\\ IF "{n}" \\in Unobserved(trace, Ev) THEN TRUE\n'
        f'            ELSE {n}\' = IF "{n}" \\in DOMAIN Ev.v THEN Ev.v["{n}"] ELSE {n}'
        for n in names
    )
    return (
        f"---- MODULE {PROBE} ----\n"
        f"EXTENDS {TRACE_MODULE}\n"
        f"W == INSTANCE {COPY_TRACE}\n"
        f"WhyStep == {step}\n"
        "Ev == Event(trace, WhyStep)\n"
        "WhyNext ==\n"
        "    IF cursor < WhyStep - 1 THEN TraceNext\n"
        "    ELSE /\\ cursor = WhyStep - 1\n"
        f"{fixed}\n"
        "         /\\ W!LoggedAction(Ev)\n"
        "         /\\ trace' = trace\n"
        "         /\\ cursor' = WhyStep\n"
        "====\n"
    )


def _var_names(trace_module: str) -> list[str]:
    found = re.search(r"VarNames == <<(.*?)>>", trace_module, re.DOTALL)
    if found is None:
        raise ValueError("the trace spec defines no VarNames")
    return [n.strip().strip('"') for n in found.group(1).split(",")]


def _write_probe(
    work: Path, spec_dir: Path, p: Prepared, step: int, params: SpecParams, spec_lines: list[str]
) -> tuple[Path, Path]:
    write_batch(work, spec_dir, [p])
    _write_copy(work, spec_lines)
    trace = (work / f"{TRACE_MODULE}.tla").read_text(encoding="utf-8")
    copy = trace.replace(f"MODULE {TRACE_MODULE} ", f"MODULE {COPY_TRACE} ", 1).replace(
        f"EXTENDS {SPEC_MODULE},", f"EXTENDS {COPY_SPEC},", 1
    )
    (work / f"{COPY_TRACE}.tla").write_text(copy, encoding="utf-8")
    module = work / f"{PROBE}.tla"
    module.write_text(_probe_module(step, _var_names(trace)), encoding="utf-8")
    config = work / f"{PROBE}.cfg"
    text = tlc_config(params, p.replicas, False).replace("NEXT TraceNext", "NEXT WhyNext")
    config.write_text(text, encoding="utf-8")
    return module, config


def _write_copy(work: Path, spec_lines: Sequence[str]) -> None:
    """The spec's text under the copy's module name."""
    text = "\n".join(spec_lines) + "\n"
    text = text.replace(f"MODULE {SPEC_MODULE} ", f"MODULE {COPY_SPEC} ", 1)
    (work / f"{COPY_SPEC}.tla").write_text(text, encoding="utf-8")


def _values(output: str) -> tuple[tuple[str, str], ...]:
    """The first kreplica-why print: (term, value) pairs."""
    for value in printed_values(output):
        if isinstance(value, tuple) and value and value[0] == "kreplica-why":
            pairs = []
            for pair in value[1:]:
                if isinstance(pair, tuple) and len(pair) == 2:
                    shown = format_value(pair[1])
                    if len(shown) > MAX_VALUE_CHARS:
                        shown = shown[: MAX_VALUE_CHARS - 3] + "..."
                    pairs.append((str(pair[0]), shown))
            return tuple(pairs)
    return ()


def why_rejected(
    p: Prepared,
    step: int,
    action: str,
    changed: Iterable[str],
    params: SpecParams,
    spec_dir: Path,
    options: TlcOptions,
) -> Why | None:
    """The false conjunct of the logged `action` at `step` of trace `p` (rejected there),
    with the values of the names it mentions; None when the probe cannot tell (the action
    is not reached, or TLC fails)."""
    spec_lines = (spec_dir / f"{SPEC_MODULE}.tla").read_text(encoding="utf-8").splitlines()
    work = Path(tempfile.mkdtemp(prefix="kreplica-why-"))
    try:
        module, config = _write_probe(work, spec_dir, p, step, params, spec_lines)
        coverage = (*options.extra_args, "-coverage", "600")
        result = run_tlc(module, config, replace(options, extra_args=coverage))
        node = false_conjunct(spec_lines, coverage_nodes(result.output), action, frozenset(changed))
        if node is None:
            return None
        conjunct = expression_text(spec_lines, node)
        return Why(
            node.line,
            conjunct,
            _evaluate(work, module, config, options, spec_lines, node, conjunct),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _evaluate(
    work: Path,
    module: Path,
    config: Path,
    options: TlcOptions,
    spec_lines: list[str],
    node: Node,
    conjunct: str,
) -> tuple[tuple[str, str], ...]:
    """The values of the conjunct's terms, printed by a second probe run; where TLC cannot
    evaluate one there (a primed variable the action has not chosen yet, an operator that is
    an action), without the primed ones, then with names and fields only, then none."""
    for primed_ok, plain in ((True, False), (False, False), (False, True)):
        terms = mentioned_terms(conjunct, primed_ok, plain)
        lines = with_print(spec_lines, node, terms) if terms else None
        if lines is None:
            return ()
        _write_copy(work, lines)
        values = _values(run_tlc(module, config, options).output)
        if values:
            return values
    return ()


def changed_variables(before: Mapping[str, Value], after: Mapping[str, Value]) -> frozenset[str]:
    """The variables both logged states observe whose values differ."""
    return frozenset(v for v in after if v in before and before[v] != after[v])


def explain_rejections(
    items: Sequence[tuple[str, str]], results: Sequence[TraceResult], settings: CheckSettings
) -> None:
    """Fill in `why` for the first `settings.why` rejected traces of a batch (`items`, and
    their `results` in the same order). Never raises: a trace whose probe fails keeps its
    verdict and its pinpointed step, without a conjunct."""
    budget = settings.why
    for (trace_id, text), result in zip(items, results, strict=True):
        if budget <= 0:
            return
        step, action = result.step, result.action
        if (
            step is None
            or action is None
            or not wants_why(result.verdict, step, action, result.invariant)
        ):
            continue
        budget -= 1
        try:
            found = _why_of(trace_id, text, step, action, settings)
        except Exception:  # the verdict stands; only the explanation is missing
            continue
        if found is not None:
            result.why_line, result.why = found.line, found.conjunct
            result.why_values = json.dumps(dict(found.values))


def wants_why(verdict: str, step: int | None, action: str | None, invariant: str) -> bool:
    """Whether a row is one whose false conjunct is looked for (and counts against `--why`):
    a step the logged action does not explain, not the initial state, not an invariant's row
    (there the logged action is allowed: no conjunct of it is false)."""
    return verdict == VIOLATES and bool(step) and action is not None and not invariant


def _why_of(
    trace_id: str, text: str, step: int, action: str, settings: CheckSettings
) -> Why | None:
    p = full_prepare(trace_id, text)
    params = replace(settings.params, invariants=())  # the step the action does not explain
    params = replace(params, variant=variant_for(text, params))
    if p.min_isr is not None:
        params = replace(params, min_insync_replicas=p.min_isr)
    states = p.trace.states
    changed = changed_variables(dict(states[step - 1].values), dict(states[step].values))
    return why_rejected(p, step, action, changed, params, settings.spec_dir, settings.tlc)


def why_text(row: Mapping[str, Any]) -> str:
    """A result row's false conjunct as one line (`Why.text`), or "" when it has none."""
    if not row.get("why"):
        return ""
    values = json.loads(row.get("why_values") or "{}")
    return Why(int(row["why_line"]), str(row["why"]), tuple(values.items())).text()
