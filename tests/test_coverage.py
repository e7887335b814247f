"""Spec coverage (`kreplica coverage`): TLC's dump becomes a graph with TLC's distinct states, a
trace that walks the graph covers every state and step of its walk, what lies outside the
config's bounds is counted apart, the path to a missed action ends with it, corpora merge as a
union, Spark and the process agree, and bad input is one line and exit 2.

One tiny config (2 replicas, 1 record, no faults, epoch 0) is dumped once by real TLC."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner

from kreplica.conformance.cli.main import main
from kreplica.conformance.coverage.graph import (
    DumpRun,
    StateGraph,
    graph_digest,
    graph_of,
    parse_dot,
    run_dump,
)
from kreplica.conformance.coverage.mapping import (
    Coverage,
    GraphIndex,
    covered_nodes,
    map_trace,
    map_traces,
)
from kreplica.conformance.coverage.report import build_report
from kreplica.conformance.coverage.states import state_key
from kreplica.conformance.tla.itf import ItfState, ItfTrace, decode_trace, dumps_trace
from kreplica.conformance.tla.specs import default_spec_dir, load_config
from kreplica.conformance.tla.tlavalue import Value, parse_assignments
from kreplica.conformance.tla.vocabulary import VARIABLES

pytestmark = pytest.mark.tlc

TINY = """\\* expect: ok
\\* module: KafkaReplication
\\* about: a tiny coverage graph for the tests
\\* bounds: 2 replicas, 1 record, epoch 0, no faults
CONSTANTS
    Replicas = {1, 2}
    MaxRecords = 1
    MaxEpoch = 0
    MaxCrashes = 0
    MaxUncleanShutdowns = 0
    MaxFetchRecords = 2
    MinIsr = 1
    Truncation = "kip279"
    Election = "clean"
    Acks = "-1"
    Fencing = "kip320"
    Bugs = {}
    LossyNetwork = FALSE
    DuplicatingNetwork = FALSE
    FireAndForget = FALSE
    RecordDeletion = FALSE
    LogDirFailures = FALSE
    ControlledShutdowns = FALSE
    DeposedLeaderHwRace = FALSE
INIT Init
NEXT Next
VIEW View
INVARIANTS
    TypeOK
"""


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A spec directory holding the spec and the tiny config `Tiny`."""
    directory = tmp_path_factory.mktemp("spec")
    shutil.copyfile(default_spec_dir() / "KafkaReplication.tla", directory / "KafkaReplication.tla")
    (directory / "Tiny.cfg").write_text(TINY)
    return directory


@pytest.fixture(scope="module")
def tiny(spec_dir: Path) -> tuple[DumpRun, StateGraph]:
    """The tiny config's TLC run and graph (TLC runs once for the module)."""
    config = load_config(spec_dir, "Tiny")
    run = run_dump(config)
    return run, graph_of(config, run)


def _states_by_node(run: DumpRun, graph: StateGraph) -> dict[int, dict[str, Value]]:
    """A valuation of the spec's variables for each node, from the dump's labels."""
    out: dict[int, dict[str, Value]] = {}
    for label in run.dump.labels.values():
        values = parse_assignments(label)
        out.setdefault(graph.keys[state_key(values)], {v: values[v] for v in VARIABLES})
    return out


def _walk(run: DumpRun, graph: StateGraph, length: int) -> ItfTrace:
    """An ITF trace of a shortest walk from Init to a node `length` steps deep."""
    depth = nx.single_source_shortest_path_length(graph.graph, min(graph.initial))
    target = min(n for n, d in depth.items() if d == length)
    nodes = nx.shortest_path(graph.graph, min(graph.initial), target)
    values = _states_by_node(run, graph)
    states = [ItfState(values[nodes[0]], action="Init")]
    for u, v in itertools.pairwise(nodes):
        states.append(ItfState(values[v], action=min(graph.graph.get_edge_data(u, v))))
    return ItfTrace(vars=list(VARIABLES), states=states, meta={"replicas": 2})


def test_a_hand_made_dot_text_parses_into_states_initial_states_and_edges() -> None:
    text = [
        "strict digraph DiskGraph {\n",
        '1 [label="/\\\\ x = 1\\n/\\\\ s = \\"a\\"",style = filled]\n',
        '1 -> -2 [label="Next",color="black",fontcolor="black"];\n',
        '-2 [label="/\\\\ x = 2\\n/\\\\ s = \\"b\\""];\n',
        "-2 -> -2;\n",
        "{rank = same; 1;}\n",
        "}\n",
    ]
    dump = parse_dot(text)
    assert dump.initial == [1]
    assert dump.edges == [(1, -2, "Next"), (-2, -2, "")]
    assert parse_assignments(dump.labels[-2]) == {"x": 2, "s": "b"}


def test_the_graph_holds_tlcs_distinct_states_and_merges_those_differing_in_action_alone(
    tiny: tuple[DumpRun, StateGraph],
) -> None:
    run, graph = tiny
    assert graph.tlc_states == run.result.distinct == graph.tlc_distinct
    assert len(run.dump.edges) == graph.tlc_edges
    merged = {state_key(parse_assignments(label)) for label in run.dump.labels.values()}
    assert graph.graph.number_of_nodes() == len(merged) == len(graph.keys)
    assert graph.witnesses["NeverCommitted"]  # an acked record is committed within 1 record
    assert not graph.witnesses["NeverLostToUncleanShutdown"]  # no power loss allowed


def test_a_trace_that_walks_the_graph_covers_every_state_and_step_of_its_walk(
    tiny: tuple[DumpRun, StateGraph],
) -> None:
    run, graph = tiny
    trace = _walk(run, graph, 6)
    cover = map_trace(trace, GraphIndex.of(graph))
    assert len(cover.nodes) == 7 and cover.steps_covered == cover.steps == 6
    assert cover.states_outside == cover.states_unmatched == 0
    assert covered_nodes([trace], graph) == cover.nodes


def test_a_state_printed_by_tlc_and_recorded_in_itf_has_one_key(
    tiny: tuple[DumpRun, StateGraph],
) -> None:
    run, graph = tiny
    trace = _walk(run, graph, 6)
    again = decode_trace(json.loads(dumps_trace(trace)))  # through the ITF text and back
    index = GraphIndex.of(graph)
    assert map_trace(again, index).nodes == map_trace(trace, index).nodes


def test_a_trace_with_three_replicas_is_outside_and_one_beyond_max_records_is_outside_from_there(
    tiny: tuple[DumpRun, StateGraph],
) -> None:
    run, graph = tiny
    index = GraphIndex.of(graph)
    trace = _walk(run, graph, 4)
    three = ItfTrace(trace.vars, trace.states, meta={"replicas": 3})
    assert map_trace(three, index).traces_outside == 1
    assert map_trace(three, index).states_outside == 5 and not map_trace(three, index).nodes
    beyond = {**trace.states[-1].values, "nextRecord": 3}
    longer = ItfTrace(trace.vars, [*trace.states, ItfState(beyond, action="Produce")], trace.meta)
    cover = map_trace(longer, index)
    assert cover.states_outside == 1 and len(cover.nodes) == 5 and cover.traces_outside == 0


def test_the_shortest_path_to_a_missed_action_ends_with_that_action(
    tiny: tuple[DumpRun, StateGraph],
) -> None:
    run, graph = tiny
    report = build_report(graph, map_trace(_walk(run, graph, 2), GraphIndex.of(graph)))
    assert report.missed
    for missed in report.missed:
        assert missed.path[-1].startswith(f"{missed.action}(")
    assert report.states == graph.graph.number_of_nodes() and report.states_covered == 3


def _write_corpus(path: Path, traces: list[ItfTrace]) -> Path:
    """A JSON-lines corpus of `traces`."""
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in traces))
    return path


@pytest.fixture()
def two_corpora(tiny: tuple[DumpRun, StateGraph], tmp_path: Path) -> Iterator[list[Path]]:
    """Two corpora of different walks."""
    run, graph = tiny
    yield [
        _write_corpus(tmp_path / "a.jsonl", [_walk(run, graph, 3)]),
        _write_corpus(tmp_path / "b.jsonl", [_walk(run, graph, 5), _walk(run, graph, 8)]),
    ]


def test_two_corpora_aggregate_to_the_union_of_their_coverage(
    tiny: tuple[DumpRun, StateGraph], two_corpora: list[Path], spec_dir: Path, tmp_path: Path
) -> None:
    run, graph = tiny
    index = GraphIndex.of(graph)
    a = map_traces([_walk(run, graph, 3)], index)
    b = map_traces([_walk(run, graph, 5), _walk(run, graph, 8)], index)
    both = a.merge(b)
    assert both.nodes == a.nodes | b.nodes and both.edges == a.edges | b.edges
    assert both.traces == 3
    out = tmp_path / "both.json"
    args = ["coverage", *map(str, two_corpora), "--config", "Tiny", "--spec-dir", str(spec_dir)]
    cache = spec_dir.parent / "build" / "coverage"
    _seed_cache(cache, graph, spec_dir)
    result = CliRunner().invoke(main, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert Coverage.from_json(json.loads(out.read_text())["coverage"]) == both


def _seed_cache(cache: Path, graph: StateGraph, spec_dir: Path) -> None:
    """Put the fixture's graph where `kreplica coverage` looks, so the CLI runs no TLC."""
    import pickle

    digest = graph_digest(load_config(spec_dir, "Tiny"))
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"Tiny-{digest[:16]}.pickle").write_bytes(pickle.dumps(graph))


def test_spark_and_the_process_give_the_same_coverage(
    tiny: tuple[DumpRun, StateGraph], two_corpora: list[Path]
) -> None:
    from kreplica.conformance.coverage.mapping import map_items
    from kreplica.conformance.coverage.spark import map_on_spark
    from kreplica.conformance.validate.sources import iter_local

    _, graph = tiny
    index = GraphIndex.of(graph)
    assert map_on_spark(two_corpora, index, "local[2]") == map_items(iter_local(two_corpora), index)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing.jsonl"], "missing.jsonl: no such file or directory"),
        (["NOT_A_TRACE"], "not an ITF trace"),
        (["GOOD", "--config", "NoSuchConfig"], "unknown config 'NoSuchConfig'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str],
    says: str,
    tiny: tuple[DumpRun, StateGraph],
    two_corpora: list[Path],
    spec_dir: Path,
    tmp_path: Path,
) -> None:
    _seed_cache(spec_dir.parent / "build" / "coverage", tiny[1], spec_dir)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"vars": 1}\n')
    words = [{"NOT_A_TRACE": str(bad), "GOOD": str(two_corpora[0])}.get(a, a) for a in args]
    config = [] if "--config" in words else ["--config", "Tiny"]
    result = CliRunner().invoke(main, ["coverage", *words, *config, "--spec-dir", str(spec_dir)])
    assert result.exit_code == 2
    assert says in one_error_line(result)
