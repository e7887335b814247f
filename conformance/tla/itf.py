"""ITF (Informal Trace Format, of Apalache and Quint): encode, decode, read, validate and write.

A trace is `{"#meta": {...}, "vars": [...], "states": [{"#meta": {"index": i, "action": ...,
"args": {...}}, "<var>": <value>, ...}], "loop": i?}`. Values: integers are JSON numbers (or
`{"#bigint": "..."}` beyond 2^53), sets `{"#set": [...]}`, sequences JSON arrays (`{"#tup": [...]}`
is read as a tuple too), records JSON objects, functions `{"#map": [[k, v], ...]}` and TLC model
values `{"#unserializable": "name"}`.

Our spec keeps the step that produced each state in a variable `action`
(`[name |-> "Produce", args |-> [replica |-> 1]]`); `lift_action` moves it into each state's
`#meta` and out of `vars`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeAlias, Union

from kreplica.conformance.errors import TraceError
from kreplica.conformance.tla.tlavalue import Map, ModelValue, Record, Value, value_sort_key

Json: TypeAlias = Union[  # noqa: UP007 (recursive alias)
    bool, int, float, str, list["Json"], dict[str, "Json"], None
]

ITF_FORMAT_URL = "https://apalache-mc.org/docs/adr/015adr-trace.html"
ACTION_VAR = "action"
MAX_SAFE_INT = 2**53 - 1
_BIGINT = re.compile(r"-?[0-9]+")
TOO_DEEP = "nested too deeply"
"""The complaint about JSON nested deeper than Python's recursion allows (a trace's values
are a few levels deep; the Java reader refuses more than 1,000)."""

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """`text` with what a terminal, a Parquet string or an XML document cannot hold written
    as a backslash escape: control characters, and the bytes of a file name that are not
    UTF-8 (which Python holds as lone surrogates, `os.fsdecode`), as `\\xff`."""
    if not _UNPRINTABLE.search(text):
        return text
    return _UNPRINTABLE.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    """One unprintable character as a backslash escape."""
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a non-UTF-8 file name (surrogateescape)
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# ---------------------------------------------------------------- values


def to_itf(value: Value) -> Json:
    """Encode a Python TLA+ value as ITF JSON."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INT else {"#bigint": str(value)}
    if isinstance(value, ModelValue):
        return {"#unserializable": value.name}
    if isinstance(value, frozenset):
        return {"#set": [to_itf(v) for v in sorted(value, key=value_sort_key)]}
    if isinstance(value, tuple):
        return [to_itf(v) for v in value]
    if isinstance(value, Record) and not any(k.startswith("#") for k in value):
        return {k: to_itf(v) for k, v in value.items()}
    pairs = sorted(value.items(), key=lambda kv: value_sort_key(kv[0]))
    return {"#map": [[to_itf(k), to_itf(v)] for k, v in pairs]}


def from_itf(obj: Any, where: str = "value") -> Value:
    """Decode ITF JSON into a Python TLA+ value; `where` names it in a TraceError."""
    if isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, list):
        return tuple(from_itf(v, f"{where}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, dict):
        return _from_itf_object(obj, where)
    raise TraceError(f"{where}: {json.dumps(obj)} is not an ITF value")


def _from_itf_object(obj: dict[str, Any], where: str) -> Value:
    """Decode a JSON object: a tagged value (`#set`, `#map`...) or a record."""
    tags = [k for k in obj if k.startswith("#")]
    if not tags:
        return Record((k, from_itf(v, f"{where}.{k}")) for k, v in obj.items())
    if len(obj) != 1:
        raise TraceError(f"{where}: a tagged ITF value has exactly one key, found {sorted(obj)}")
    tag, body = tags[0], obj[tags[0]]
    decoder = _TAGS.get(tag)
    if decoder is None:
        raise TraceError(f"{where}: unknown ITF tag {tag!r}")
    return decoder(body, f"{where}.{tag}")


def _list_body(body: Any, where: str) -> list[Any]:
    """Check that a tag's body is a JSON array."""
    if not isinstance(body, list):
        raise TraceError(f"{where}: expected a JSON array")
    return body


def _decode_bigint(body: Any, where: str) -> Value:
    """`{"#bigint": "-123"}`."""
    if not isinstance(body, str) or not _BIGINT.fullmatch(body):
        raise TraceError(f"{where}: expected a string of decimal digits")
    return int(body)


def _decode_set(body: Any, where: str) -> Value:
    """`{"#set": [...]}`."""
    return frozenset(from_itf(v, f"{where}[{i}]") for i, v in enumerate(_list_body(body, where)))


def _decode_tup(body: Any, where: str) -> Value:
    """`{"#tup": [...]}`."""
    return tuple(from_itf(v, f"{where}[{i}]") for i, v in enumerate(_list_body(body, where)))


def _decode_map(body: Any, where: str) -> Value:
    """`{"#map": [[k, v], ...]}`."""
    pairs: list[tuple[Value, Value]] = []
    for i, pair in enumerate(_list_body(body, where)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise TraceError(f"{where}[{i}]: expected a [key, value] pair")
        pairs.append((from_itf(pair[0], f"{where}[{i}]"), from_itf(pair[1], f"{where}[{i}]")))
    return Map(pairs)


def _decode_unserializable(body: Any, where: str) -> Value:
    """`{"#unserializable": "name"}`: a model value."""
    if not isinstance(body, str):
        raise TraceError(f"{where}: expected a string")
    return ModelValue(body)


_TAGS = {
    "#bigint": _decode_bigint,
    "#set": _decode_set,
    "#tup": _decode_tup,
    "#map": _decode_map,
    "#unserializable": _decode_unserializable,
}


# ---------------------------------------------------------------- traces


@dataclass(frozen=True)
class ItfState:
    """One state: the variables' values and the step that produced it."""

    values: dict[str, Value]
    action: str | None = None
    args: dict[str, Value] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItfTrace:
    """A whole trace: its metadata, variable names, states and optional loop index."""

    vars: list[str]
    states: list[ItfState]
    meta: dict[str, Any] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)
    loop: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Encode as an ITF JSON object."""
        meta = {"format": "ITF", "format-description": ITF_FORMAT_URL, **self.meta}
        out: dict[str, Any] = {"#meta": meta}
        if self.params:
            out["params"] = list(self.params)
        out["vars"] = list(self.vars)
        out["states"] = [_encode_state(i, s, self.vars) for i, s in enumerate(self.states)]
        if self.loop is not None:
            out["loop"] = self.loop
        return out


def _encode_state(index: int, state: ItfState, order: Sequence[str]) -> dict[str, Any]:
    """Encode one state, its `#meta` first, then the variables in declaration order."""
    meta: dict[str, Any] = {"index": index}
    if state.action is not None:
        meta["action"] = state.action
        meta["args"] = {k: to_itf(v) for k, v in state.args.items()}
    meta.update({k: v for k, v in state.meta.items() if k not in meta})
    out: dict[str, Any] = {"#meta": meta}
    out.update({name: to_itf(state.values[name]) for name in order})
    return out


def action_of(value: Value | None) -> tuple[str, dict[str, Value]] | None:
    """Read our spec's `action` variable `[name |-> n, args |-> a]`, or None if not that shape."""
    if not isinstance(value, Record | Map):
        return None
    fields = dict(value.items())
    name, args = fields.get("name"), fields.get("args", ())
    if not isinstance(name, str):
        return None
    if args == ():
        return name, {}
    if isinstance(args, Record | Map) and all(isinstance(k, str) for k in args):
        return name, {str(k): v for k, v in args.items()}
    return None


def lift_action(trace: ItfTrace, var: str = ACTION_VAR) -> ItfTrace:
    """Move the `action` variable into each state's action/args, if every state has one."""
    if var not in trace.vars:
        return trace
    steps = [action_of(s.values.get(var)) for s in trace.states]
    if not all(steps):
        return trace
    states = [
        replace(s, values={k: v for k, v in s.values.items() if k != var}, action=a[0], args=a[1])
        for s, a in zip(trace.states, steps, strict=True)
        if a is not None
    ]
    return replace(trace, vars=[v for v in trace.vars if v != var], states=states)


def build_trace(
    steps: Sequence[tuple[str, Mapping[str, Value]]],
    meta: Mapping[str, Any],
    loop: int | None = None,
) -> ItfTrace:
    """Build a trace from (action name, variables) steps, lifting the `action` variable."""
    names = sorted({name for _, values in steps for name in values})
    states = [ItfState(values=dict(values), action=action) for action, values in steps]
    return lift_action(ItfTrace(vars=names, states=states, meta=dict(meta), loop=loop))


def decode_trace(obj: Any, source: str = "trace") -> ItfTrace:
    """Validate and decode an ITF JSON object; errors name `source`."""
    try:
        return _decode_trace(obj, source)
    except RecursionError:
        raise TraceError(f"{source}: {TOO_DEEP}") from None


def _decode_trace(obj: Any, source: str) -> ItfTrace:
    """`decode_trace`, which may recurse too deeply."""
    if not isinstance(obj, dict):
        raise TraceError(f"{source}: not an ITF trace: expected a JSON object")
    meta = _optional(obj, "#meta", dict, source) or {}
    params = _optional(obj, "params", list, source) or []
    variables = _required(obj, "vars", list, source)
    raw_states = _required(obj, "states", list, source)
    if not all(isinstance(v, str) for v in [*variables, *params]):
        raise TraceError(f"{source}: not an ITF trace: 'vars' and 'params' must hold strings")
    if not raw_states:
        raise TraceError(f"{source}: the trace has no states")
    states = [_decode_state(s, i, variables, source) for i, s in enumerate(raw_states)]
    loop = _optional(obj, "loop", int, source)
    out_meta = {k: v for k, v in meta.items() if k not in ("format", "format-description")}
    return ItfTrace(vars=variables, states=states, meta=out_meta, params=params, loop=loop)


def _required(obj: dict[str, Any], key: str, kind: type, source: str) -> Any:
    """Fetch a required top-level field of type `kind`."""
    if key not in obj:
        raise TraceError(f"{source}: not an ITF trace: missing {key!r}")
    return _optional(obj, key, kind, source)


def _optional(obj: dict[str, Any], key: str, kind: type, source: str) -> Any:
    """Fetch an optional top-level field of type `kind` (None when absent)."""
    value = obj.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise TraceError(f"{source}: not an ITF trace: {key!r} must be a JSON {kind.__name__}")
    return value


def _decode_state(raw: Any, index: int, variables: list[str], source: str) -> ItfState:
    """Validate and decode state number `index`."""
    where = f"{source}: state {index}"
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: expected a JSON object")
    meta = raw.get("#meta", {})
    if not isinstance(meta, dict):
        raise TraceError(f"{where}: '#meta' must be a JSON object")
    omitted = meta.get("omitted", [])
    if omitted and (index == 0 or not isinstance(omitted, list)):
        raise TraceError(f"{where}: '#meta'.omitted must be a list, and the first state omits none")
    missing = [v for v in variables if v not in raw and v not in omitted]
    if missing:
        raise TraceError(f"{where}: missing variable {missing[0]!r}")
    extra = [k for k in raw if k != "#meta" and k not in variables]
    if extra:
        raise TraceError(f"{where}: variable {extra[0]!r} is not declared in 'vars'")
    values = {v: from_itf(raw[v], f"{where}, variable {v!r}") for v in variables if v in raw}
    action, args = _decode_step(meta, where)
    rest = {k: v for k, v in meta.items() if k not in ("index", "action", "args")}
    return ItfState(values=values, action=action, args=args, meta=rest)


def _decode_step(meta: dict[str, Any], where: str) -> tuple[str | None, dict[str, Value]]:
    """Read `action` and `args` from a state's `#meta`."""
    action, args = meta.get("action"), meta.get("args", {})
    if action is not None and not isinstance(action, str):
        raise TraceError(f"{where}: '#meta'.action must be a string")
    if not isinstance(args, dict):
        raise TraceError(f"{where}: '#meta'.args must be a JSON object")
    return action, {k: from_itf(v, f"{where}, argument {k!r}") for k, v in args.items()}


# ---------------------------------------------------------------- files


def dumps_trace(trace: ItfTrace) -> str:
    """Serialize a trace as JSON text, one state per line."""
    obj = trace.to_json()
    lines = ["{"]
    keys = list(obj)
    for n, key in enumerate(keys):
        comma = "," if n < len(keys) - 1 else ""
        if key == "states":
            lines.append('  "states": [')
            rows = [json.dumps(s, ensure_ascii=False) for s in obj["states"]]
            lines.extend(f"    {row}," for row in rows[:-1])
            lines.append(f"    {rows[-1]}" if rows else "")
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(obj[key], ensure_ascii=False)}{comma}")
    lines.append("}")
    return "\n".join(line for line in lines if line) + "\n"


def _umask() -> int:
    """The process umask (reading it means setting it, so put it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_trace(path: Path, trace: ItfTrace) -> None:
    """Write a trace to `path` atomically."""
    write_text_atomic(path, dumps_trace(trace))


def read_json(path: Path) -> Any:
    """Read a JSON file, turning every failure into one clear TraceError (which names the
    file with its unprintable characters escaped: `printable`)."""
    name = printable(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{name}: is a directory, not a trace file") from None
    except UnicodeDecodeError:
        raise TraceError(f"{name}: not UTF-8 text") from None
    except OSError as err:
        raise TraceError(f"{name}: cannot read: {err.strerror}") from None
    return loads_json(text, name)


def loads_json(text: str, source: str) -> Any:
    """Parse JSON text; a TraceError says whether it is empty, truncated or malformed."""
    if not text.strip():
        raise TraceError(f"{source}: empty file, expected an ITF trace")
    try:
        return json.loads(text)
    except RecursionError:
        raise TraceError(f"{source}: {TOO_DEEP}") from None
    except json.JSONDecodeError as err:
        if err.pos >= len(text.rstrip()):
            raise TraceError(f"{source}: truncated JSON (it ends inside a value)") from None
        what = err.msg.removesuffix(" at")  # "Invalid control character at"
        raise TraceError(
            f"{source}: not valid JSON: {what} at line {err.lineno}, column {err.colno}"
        ) from None


def read_trace(path: Path) -> ItfTrace:
    """Read and validate one ITF trace file."""
    return decode_trace(read_json(path), printable(str(path)))


LINE_ID = re.compile(r"^(?P<path>.+):(?P<line>[0-9]+)$")
"""A trace id naming one line of a JSON-lines corpus, `PATH:LINE`, as `kreplica conform`
prints it."""


def trace_on_line(path: Path, line: int) -> tuple[str, ItfTrace]:
    """The trace on line `line` (from 1) of a JSON-lines file; TraceError if there is none."""
    name = f"{printable(str(path))}:{line}"
    try:
        with path.open(encoding="utf-8") as handle:
            text = next((t for n, t in enumerate(handle, start=1) if n == line), None)
    except (OSError, UnicodeDecodeError) as err:
        raise TraceError(f"{name}: cannot read: {err}") from None
    if line < 1 or text is None or not text.strip():
        raise TraceError(f"{name}: no trace on that line (lines are numbered from 1)")
    return name, decode_trace(loads_json(text, name), name)


def corpus_line(text: str) -> tuple[Path, int] | None:
    """The corpus and line `text` names as `PATH:LINE`, when no file is named `text` and the
    corpus is a file (None otherwise)."""
    found = LINE_ID.match(text)
    if Path(text).exists() or found is None or not Path(found["path"]).is_file():
        return None
    return Path(found["path"]), int(found["line"])


def read_named_trace(text: str) -> ItfTrace:
    """The one trace `text` names: an ITF file, or a line of a corpus (`PATH:LINE`)."""
    line = corpus_line(text)
    return read_trace(Path(text)) if line is None else trace_on_line(*line)[1]


def iter_jsonl_traces(path: Path) -> Iterator[ItfTrace]:
    """Read a JSON-lines corpus: one ITF trace per non-empty line."""
    name = printable(str(path))
    try:
        handle = path.open(encoding="utf-8")
    except OSError as err:
        raise TraceError(f"{name}: cannot read: {err.strerror}") from None
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if line.strip():
                source = f"{name}:{lineno}"
                yield decode_trace(loads_json(line, source), source)
