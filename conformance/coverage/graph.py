"""The spec's state graph of one small model config, as TLC dumps it (`-dump dot,actionlabels`),
loaded into networkx, with the states where each reachability witness is false.

Contract: `load_state_graph(spec_dir, "CoverageCrash")` returns a `StateGraph` whose nodes are
the valuations of the spec's variables (`tla.vocabulary.VARIABLES`) that TLC reached, and whose
edges `(u, v, action)` are the steps between them, keyed by the spec action's name. It is cached
under `build/coverage/` (outside a checkout: the user's kreplica cache), keyed by the sha256
of the spec module and the config.

How it is built, in one TLC run (one worker, `-dump dot,actionlabels`, no deadlock check):
- The config is used without its VIEW, SYMMETRY, INVARIANTS and PROPERTIES: a VIEW would merge
  states that differ in `removed`, which the witnesses read, and an invariant would stop the
  dump at its first violation. Without a VIEW, TLC tells states apart by `action` too (the
  step that produced them), so its dump has more nodes than there are valuations of the other
  variables: `tlc_states` counts TLC's, and the graph merges those that differ in `action`
  alone. No action reads `action`, so a merged state's successors are those of any of its
  copies, and the merged graph is exact.
- TLC labels an edge with the disjunct of Next it took, and cannot split `\\E m \\in msgs`
  (a variable's value), so every message handler's edge says `Next`. The edge's action is read
  from its target instead: its `action` variable is the step that produced it.
- The witnesses are TLC's verdict, not a Python copy: the run checks a generated module that
  extends the spec with a state constraint that is always TRUE and prints, with PrintT, every
  state where some witness predicate is false, with the names of those predicates.

Rules: this module runs TLC and reads what it writes; it knows no corpus and no trace.
`tests/test_coverage.py` pins it: a hand-made dot text parses, and a tiny config's graph has
exactly TLC's distinct states before the merge.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx  # type: ignore[import-untyped]

from kreplica.conformance.errors import CheckerError, SpecError, TlaValueError
from kreplica.conformance.tla.itf import action_of
from kreplica.conformance.tla.specs import ModelConfig, load_config
from kreplica.conformance.tla.tlavalue import (
    Value,
    format_value,
    parse_assignments,
    parse_value,
)
from kreplica.conformance.tla.tlc import TlcOptions, find_java, spawn, stream, tlc_command
from kreplica.conformance.tla.tlc_output import TlcOutput, TlcResult, Verdict
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.conformance.validate.tlcdata import default_cache_dir as user_cache_dir

from .states import StateKey, state_key

WITNESSES = (
    "NeverCommitted",
    "NeverTruncatedAfterLeaderChange",
    "NeverLostToUncleanShutdown",
    "NeverHostedWithoutEpoch",
)
"""The spec's reachability witnesses: each is false exactly in the interesting states."""

DEFAULT_CONFIG = "CoverageCrash"
"""The config `kreplica coverage` maps a corpus onto unless told otherwise."""

GRAPH_FORMAT = 1
"""The cached graph's layout; a cache written with another is rebuilt."""

WRAPPER_MODULE = "CoverageGraph"
WITNESS_TAG = "kreplica-witness"

Phase = Callable[[str], None]
"""Told what is under way ('TLC is dumping ...'), for a progress line."""


# ---------------------------------------------------------------- the config's constants


@dataclass(frozen=True)
class Bounds:
    """The constants of a config that decide whether a trace can lie in its graph."""

    replicas: int
    max_records: int
    max_epoch: int
    max_crashes: int
    max_unclean_shutdowns: int
    max_fetch_records: int
    min_isr: int
    lossy_network: bool
    duplicating_network: bool
    variant: str = "default"
    """The variant label of the config's header (`\\* variant: ...`), as fuzz traces record it."""


_SECTION = re.compile(
    r"^(CONSTANTS?|INIT|NEXT|SPECIFICATION|INVARIANTS?|PROPERTY|PROPERTIES|VIEW|CONSTRAINTS?"
    r"|ACTION_CONSTRAINTS?|SYMMETRY|CHECK_DEADLOCK|ALIAS|POSTCONDITION)\b"
)
_ASSIGN = re.compile(r"^\s*(\w+)\s*=\s*(.+?)\s*$")
_DROPPED = frozenset({"INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES", "VIEW", "SYMMETRY",
                      "ALIAS", "POSTCONDITION", "CHECK_DEADLOCK"})  # fmt: skip


def _sections(text: str) -> Iterator[tuple[str, str]]:
    """(section keyword, line) for each non-comment line of a config."""
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("\\*"):
            continue
        found = _SECTION.match(stripped)
        section = found.group(1) if found else section
        yield section, line


def config_constants(text: str) -> dict[str, Value]:
    """The `Name = value` constants of a config's CONSTANTS section (TlaValueError if bad)."""
    out: dict[str, Value] = {}
    for section, line in _sections(text):
        body = _SECTION.sub("", line.strip()) if _SECTION.match(line.strip()) else line
        found = _ASSIGN.match(body)
        if section.startswith("CONSTANT") and found:
            out[found.group(1)] = parse_value(found.group(2))
    return out


def bounds_of(config: ModelConfig) -> Bounds:
    """The Bounds a config sets; SpecError names the constant that is missing or wrong."""
    try:
        constants = config_constants(config.path.read_text(encoding="utf-8"))
    except (OSError, TlaValueError) as err:
        raise SpecError(f"{config.path}: cannot read its constants: {err}") from None

    def get(name: str, kind: type) -> object:
        value = constants.get(name)
        if not isinstance(value, kind):
            raise SpecError(f"{config.path}: constant {name} is missing or not a {kind.__name__}")
        return value

    replicas = get("Replicas", frozenset)
    return Bounds(
        replicas=len(replicas) if isinstance(replicas, frozenset) else 0,
        max_records=int(str(get("MaxRecords", int))),
        max_epoch=int(str(get("MaxEpoch", int))),
        max_crashes=int(str(get("MaxCrashes", int))),
        max_unclean_shutdowns=int(str(get("MaxUncleanShutdowns", int))),
        max_fetch_records=int(str(get("MaxFetchRecords", int))),
        min_isr=int(str(get("MinIsr", int))),
        lossy_network=get("LossyNetwork", bool) is True,
        duplicating_network=get("DuplicatingNetwork", bool) is True,
        variant=config.header.get("variant", "default"),
    )


def dump_config(text: str) -> str:
    """The config TLC dumps the graph with: `text` without VIEW, SYMMETRY, INVARIANTS and
    PROPERTIES, plus the constraint that prints the witness states."""
    kept = [line for section, line in _sections(text) if section not in _DROPPED]
    return "\n".join([*kept, "CONSTRAINT CoverageReport", ""])


def wrapper_module(spec_module: str) -> str:
    """The generated module: the spec plus `CoverageReport`, a state constraint that is always
    TRUE and prints every state where a witness is false (its names, then the variables)."""
    names = ", ".join(f'"{w}"' for w in WITNESSES)
    tests = "\n".join(f'                  \\/ w = "{w}" /\\ ~{w}' for w in WITNESSES)
    values = ", ".join(VARIABLES)
    return (
        f"---- MODULE {WRAPPER_MODULE} ----\nEXTENDS {spec_module}, TLC\n"
        f"CoverageReport ==\n"
        f"    LET bad == {{w \\in {{{names}}} :\n{tests}}}\n"
        f'    IN bad = {{}} \\/ PrintT(<<"{WITNESS_TAG}", bad, <<{values}>>>>)\n====\n'
    )


# ---------------------------------------------------------------- the dot file


@dataclass
class TlcDump:
    """TLC's dump as written: states by fingerprint, the initial ones, the edges."""

    labels: dict[int, str] = field(default_factory=dict)
    """Fingerprint -> the state as TLC prints it (`/\\ x = 1` lines)."""
    initial: list[int] = field(default_factory=list)
    edges: list[tuple[int, int, str]] = field(default_factory=list)
    """(source, target, TLC's label) for every step."""


_NODE = re.compile(r'^(-?\d+) \[label="(.*)"(,style = filled)?\];?$')
_EDGE = re.compile(r'^(-?\d+) -> (-?\d+)(?: \[label="([^"]*)"[^\]]*\])?;?$')
_DOT_ESCAPE = re.compile(r"\\(.)")


def _unescape(text: str) -> str:
    """A dot string's body as text: `\\n` is a line break, `\\x` is x."""
    return _DOT_ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse_dot(lines: Iterable[str]) -> TlcDump:
    """Read TLC's `-dump dot,actionlabels` output (initial states are the filled nodes)."""
    dump = TlcDump()
    for line in lines:
        text = line.rstrip("\n")
        node = _NODE.match(text)
        if node:
            fingerprint = int(node.group(1))
            dump.labels[fingerprint] = _unescape(node.group(2))
            if node.group(3):
                dump.initial.append(fingerprint)
            continue
        edge = _EDGE.match(text)
        if edge:
            dump.edges.append((int(edge.group(1)), int(edge.group(2)), edge.group(3) or ""))
    return dump


# ---------------------------------------------------------------- the graph


@dataclass
class StateGraph:
    """A config's state graph: node ids 0..n-1 (one per valuation of the spec's variables),
    edges keyed by action name with the first-seen arguments as `args`; the node of each
    state key; the initial nodes; the nodes where each witness is false."""

    config: str
    digest: str
    bounds: Bounds
    graph: nx.MultiDiGraph
    keys: dict[StateKey, int]
    initial: frozenset[int]
    witnesses: dict[str, frozenset[int]]
    tlc_states: int
    """The dump's nodes, told apart by `action` too: TLC's distinct states."""
    tlc_distinct: int | None
    """The distinct states TLC reported (equal to tlc_states)."""
    tlc_edges: int
    seconds: float
    """How long TLC took to dump it."""


def _read_state(label: str) -> tuple[StateKey, str, str]:
    """A dumped state's key, its action's name and its arguments as text."""
    values = parse_assignments(label)
    step = action_of(values.get("action"))
    name, args = step if step else ("?", {})
    text = ", ".join(f"{k}={format_value(v)}" for k, v in sorted(args.items()))
    return state_key(values), name, text


def build_graph(dump: TlcDump) -> tuple[nx.MultiDiGraph, dict[StateKey, int], frozenset[int]]:
    """Merge the dump's states that differ in `action` alone; an edge's key is the action
    recorded in its target. Returns the graph, the node of each key, the initial nodes."""
    keys: dict[StateKey, int] = {}
    node_of: dict[int, int] = {}
    step_of: dict[int, tuple[str, str]] = {}
    graph = nx.MultiDiGraph()
    for fingerprint in [*dump.initial, *dump.labels]:
        if fingerprint in node_of:
            continue
        key, name, args = _read_state(dump.labels[fingerprint])
        node = keys.setdefault(key, len(keys))
        node_of[fingerprint], step_of[fingerprint] = node, (name, args)
        graph.add_node(node)
    for source, target, _ in dump.edges:
        name, args = step_of[target]
        u, v = node_of[source], node_of[target]
        if not graph.has_edge(u, v, key=name):
            graph.add_edge(u, v, key=name, args=args)
    return graph, keys, frozenset(node_of[f] for f in dump.initial)


def witness_nodes(prints: Iterable[str], keys: Mapping[StateKey, int]) -> dict[str, frozenset[int]]:
    """The nodes where each witness is false, from TLC's printed `<<tag, names, values>>`;
    CheckerError if TLC printed a state the dump does not hold."""
    found: dict[str, set[int]] = {w: set() for w in WITNESSES}
    for text in prints:
        tag, names, values = _witness_print(text)
        node = keys.get(state_key(dict(zip(VARIABLES, values, strict=True))))
        if tag != WITNESS_TAG or node is None:
            raise CheckerError(f"TLC printed a witness state its dump does not hold: {text[:80]}")
        for name in names:
            found[str(name)].add(node)
    return {w: frozenset(nodes) for w, nodes in found.items()}


def _witness_print(text: str) -> tuple[object, frozenset[Value], tuple[Value, ...]]:
    """One PrintT of `CoverageReport`, parsed."""
    value = parse_value(text)
    if not (isinstance(value, tuple) and len(value) == 3):
        raise CheckerError(f"unexpected witness print from TLC: {text[:80]}")
    tag, names, values = value
    if not isinstance(names, frozenset) or not isinstance(values, tuple):
        raise CheckerError(f"unexpected witness print from TLC: {text[:80]}")
    return tag, names, values


# ---------------------------------------------------------------- running TLC


class _Collector:
    """Routes TLC's stdout: witness prints (several lines each) apart, the rest to TlcOutput."""

    def __init__(self) -> None:
        """Start with no print under way."""
        self.output = TlcOutput()
        self.prints: set[str] = set()
        self._chunk: list[str] | None = None

    def feed(self, line: str) -> None:
        """Take one line of TLC's output."""
        if line.startswith(f'<< "{WITNESS_TAG}"') or line.startswith("@!@!@"):
            self.close()
        if line.startswith(f'<< "{WITNESS_TAG}"'):
            self._chunk = [line]
        elif self._chunk is not None:
            self._chunk.append(line)
        else:
            self.output.feed(line)

    def close(self) -> None:
        """Finish the print under way, if any."""
        if self._chunk is not None:
            self.prints.add(" ".join("".join(self._chunk).split()))
            self._chunk = None


def graph_digest(config: ModelConfig) -> str:
    """The sha256 of the spec module, the config and the graph layout: the cache key."""
    sha = hashlib.sha256(f"kreplica-coverage-{GRAPH_FORMAT}\n".encode())
    for path in (config.module_path, config.path):
        sha.update(path.read_bytes())
    return sha.hexdigest()


@dataclass
class DumpRun:
    """One TLC run of `run_dump`: the dump, the witness prints, TLC's result and time."""

    dump: TlcDump
    prints: set[str]
    result: TlcResult
    seconds: float


def run_dump(
    config: ModelConfig, java: str | None = None, on_phase: Phase | None = None
) -> DumpRun:
    """Run TLC on `config` with the witness constraint and read its dump (CheckerError if TLC
    does not finish the search)."""
    tell = on_phase or (lambda _: None)
    workdir = Path(tempfile.mkdtemp(prefix="kreplica-coverage-"))
    try:
        (workdir / "tmp").mkdir()
        for module in config.path.parent.glob("*.tla"):
            shutil.copyfile(module, workdir / module.name)
        module = workdir / f"{WRAPPER_MODULE}.tla"
        module.write_text(wrapper_module(config.module))
        cfg = workdir / "coverage.cfg"
        cfg.write_text(dump_config(config.path.read_text(encoding="utf-8")))
        dot = workdir / "graph.dot"
        dump_args = ("-dump", "dot,actionlabels", str(dot))
        options = TlcOptions(java=find_java(java), extra_args=dump_args)
        tell(f"TLC is dumping the state graph of {config.name}")
        start = time.monotonic()
        result, prints = _run(tlc_command(module, cfg, options, workdir), workdir)
        seconds = time.monotonic() - start
        if result.outcome.verdict != Verdict.OK:
            why = f"{result.outcome}: {result.message}"
            raise CheckerError(f"TLC did not dump the graph of {config.name}: {why}")
        tell(f"reading {dot.stat().st_size >> 20} MB of TLC's dump ({result.distinct:,} states)")
        with dot.open(encoding="utf-8") as handle:
            return DumpRun(parse_dot(handle), prints, result, seconds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def graph_of(config: ModelConfig, run: DumpRun) -> StateGraph:
    """The StateGraph of a config from its TLC run."""
    graph, keys, initial = build_graph(run.dump)
    return StateGraph(
        config=config.name,
        digest=graph_digest(config),
        bounds=bounds_of(config),
        graph=graph,
        keys=keys,
        initial=initial,
        witnesses=witness_nodes(run.prints, keys),
        tlc_states=len(run.dump.labels),
        tlc_distinct=run.result.distinct,
        tlc_edges=len(run.dump.edges),
        seconds=run.seconds,
    )


def _run(cmd: list[str], workdir: Path) -> tuple[TlcResult, set[str]]:
    """Run TLC (stopped with this process), returning its result and its witness prints."""
    collector = _Collector()
    try:
        proc = spawn(cmd, workdir, workdir / "stderr.txt")
    except OSError as err:
        raise CheckerError(f"cannot run {cmd[0]!r}: {err.strerror or err}") from None
    stream(proc, collector.feed, None)
    collector.close()
    stderr = (workdir / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    return collector.output.result(proc.returncode, stderr), collector.prints


def default_cache_dir(spec_dir: Path) -> Path:
    """`build/coverage/` of the checkout that holds `spec_dir`; for the spec of an installed
    wheel (its parent is the `kreplica` package, in site-packages), `coverage/` of the user's
    kreplica cache (`validate.tlcdata.default_cache_dir`): nothing is written into a package."""
    if (spec_dir.parent / "__init__.py").is_file():
        return user_cache_dir() / "coverage"
    return spec_dir.parent / "build" / "coverage"


def load_state_graph(
    spec_dir: Path,
    name: str = DEFAULT_CONFIG,
    cache_dir: Path | None = None,
    java: str | None = None,
    on_phase: Phase | None = None,
) -> StateGraph:
    """The StateGraph of config `name`: from the cache when the spec and the config are
    unchanged, else dumped by TLC and cached (SpecError for an unknown config)."""
    config = load_config(spec_dir, name)
    cache = (
        cache_dir or default_cache_dir(spec_dir)
    ) / f"{config.name}-{graph_digest(config)[:16]}.pickle"
    cached = _read_cache(cache)
    if cached is not None:
        return cached
    graph = graph_of(config, run_dump(config, java, on_phase))
    _write_cache(cache, graph)
    return graph


def _read_cache(path: Path) -> StateGraph | None:
    """A cached graph, or None when there is none or it cannot be read."""
    try:
        with path.open("rb") as handle:
            graph = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    return graph if isinstance(graph, StateGraph) else None


def _write_cache(path: Path, graph: StateGraph) -> None:
    """Cache a graph atomically (an unwritable cache only costs the next run's time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(graph, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass
