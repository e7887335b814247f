"""The binary trace data format and its Java reader, checked against real TLC.

The reader must give TLC exactly the value that the TLA+ rendering gives: a tiny spec reads
`TraceLog` through the reader and asserts it equals the same value written as TLA+ text.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from tlavalue_strategies import values

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.tla.itf import ItfState, ItfTrace
from kreplica.conformance.tla.specs import resolve_spec_dir
from kreplica.conformance.tla.tlavalue import (
    Map,
    ModelValue,
    Record,
    Value,
    format_value,
    parse_value,
)
from kreplica.conformance.tla.tlc import TlcOptions, find_tla2tools, run_tlc
from kreplica.conformance.tla.tlc_output import Verdict
from kreplica.conformance.tla.vocabulary import ACTION_ARGS
from kreplica.conformance.validate import tlcdata, tracecheck
from kreplica.conformance.validate.tracecheck import load, render

# Values whose TLC form is easy to get wrong: set order and duplicates, record field order,
# empty records (<<>>), negative and extreme integers, escapes, functions with integer keys.
TRICKY: list[Value] = [
    0,
    -1,
    2**31 - 1,
    -(2**31) + 1,
    True,
    False,
    "",
    'quote " backslash \\ newline \n tab \t',
    (),
    frozenset(),
    frozenset({3, -2, 10, 1}),
    frozenset({"b", "a", "c", "aa"}),
    frozenset({frozenset({2, 1}), frozenset(), frozenset({1})}),
    Record([("zeta", 1), ("alpha", (1, 2)), ("mid", frozenset({"x"}))]),
    Record([]),
    Map([]),
    frozenset({Record([("f", 2), ("g", "b")]), Record([("g", "a"), ("f", 1)])}),
    Map([(2, "two"), (1, "one")]),
    Map([("a", 1), ("b", 2)]),
    ((1, (2, ())), frozenset({(1, 2), (1,), ()})),
]


def _has_model_value(value: Value) -> bool:
    """Whether a model value occurs anywhere in `value`."""
    if isinstance(value, ModelValue):
        return True
    if isinstance(value, tuple | frozenset):
        return any(_has_model_value(v) for v in value)
    if isinstance(value, Record | Map):
        return any(_has_model_value(k) or _has_model_value(v) for k, v in value.items())
    return False


# ---------------------------------------------------------------- the format, in Python


@settings(max_examples=60, deadline=None)
@given(values)
def test_roundtrip_is_the_rendered_value(value: Value) -> None:
    """Decoding gives the value of the TLA+ rendering (empty mappings are <<>>)."""
    if _has_model_value(value):
        with pytest.raises(tlcdata.TlcDataError, match="model value"):
            tlcdata.encode_value(value)
        return
    assert tlcdata.decode_value(tlcdata.encode_value(value)) == parse_value(format_value(value))


def test_tricky_values_roundtrip() -> None:
    """The fixed examples survive the Python encoder and decoder."""
    for value in TRICKY:
        assert tlcdata.decode_value(tlcdata.encode_value(value)) == parse_value(format_value(value))


def _trace() -> tuple[Value, str]:
    """A small trace as the reader's value and as tracecheck's TLA+ rendering."""
    init = {"hw": (0, 0), "alive": frozenset({1, 2}), "msgs": frozenset()}
    step = {"hw": (1, 0), "alive": frozenset({1, 2}), "msgs": frozenset({Record([("to", 2)])})}
    states = [ItfState(init, "Init"), ItfState(step, "Produce", {"replica": 1, "record": 1})]
    trace = ItfTrace(vars=sorted(init), states=states)
    return tlcdata.trace_value(trace), render(trace)


def test_trace_value_is_the_rendering() -> None:
    """`trace_value` is the value `tracecheck.render` writes as TLA+."""
    value, text = _trace()
    assert value == parse_value(text)
    assert tlcdata.decode_value(tlcdata.encode_traces([])) == ()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a kreplica trace data file"),
        (b"KRTD\x02\x00T\x00", "not a kreplica trace data file"),
        (b"KRTD\x01\x00", "truncated"),
        (b"KRTD\x01\x00T\x02i\x00", "truncated"),
        (b"KRTD\x01\x00s\x00", "string index 0 out of range"),
        (b"KRTD\x01\x00?", "unknown tag"),
        (b"KRTD\x01\x00T\x00T\x00", "bytes after the value"),
    ],
)
def test_malformed_data(data: bytes, message: str) -> None:
    """Malformed files are rejected with the reason."""
    with pytest.raises(tlcdata.TlcDataError, match=message):
        tlcdata.decode_value(data)


def test_unencodable_values() -> None:
    """Integers beyond 32 bits and model values have no encoding."""
    with pytest.raises(tlcdata.TlcDataError, match="out of TLC's range"):
        tlcdata.encode_value((1, 2**31))
    with pytest.raises(tlcdata.TlcDataError, match="model value r1"):
        tlcdata.encode_value(frozenset({ModelValue("r1")}))


def test_missing_javac(tmp_path: Path) -> None:
    """Without javac, building the reader says what to install."""
    with pytest.raises(CheckerError, match=r"javac not found.*JDK"):
        tlcdata.build_reader(cache_dir=tmp_path, javac=str(tmp_path / "no-javac"))


# ---------------------------------------------------------------- through real TLC


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reader, compiled once for these tests (skipped without javac)."""
    if shutil.which("javac") is None:
        pytest.skip("needs a JDK (javac not on PATH)")
    cache = tmp_path_factory.mktemp("cache")
    built = tlcdata.build_reader(cache_dir=cache)
    assert tlcdata.build_reader(cache_dir=cache) == built  # cached
    assert {p.name for p in tlcdata.class_files(built)} >= {"TraceData.class"}
    return built


def _spec(workdir: Path, expected: str) -> tuple[Path, Path]:
    """A spec that asserts TraceLog (read by the reader) equals `expected` (TLA+ text)."""
    module = workdir / "ReadBack.tla"
    module.write_text(
        "---- MODULE ReadBack ----\nEXTENDS TraceData, TLC, Integers, Sequences\n"
        f"Expected == {expected}\n"
        "ASSUME TraceLog = Expected\n"
        "ASSUME ToString(TraceLog) = ToString(Expected)\n"  # same normal form (set order)
        'ASSUME PrintT(<<"read", TraceLog>>)\n'
        "VARIABLE x\nInit == x = Len(TraceLog)\nNext == UNCHANGED x\n====\n",
        encoding="utf-8",
    )
    config = workdir / "ReadBack.cfg"
    config.write_text("INIT Init\nNEXT Next\n", encoding="utf-8")
    return module, config


@pytest.mark.tlc
def test_tlc_reads_the_rendered_values(reader: Path, tmp_path: Path) -> None:
    """TLC, reading the data file, gets the values of their TLA+ text; traces too."""
    trace, trace_text = _trace()
    batch: tuple[Value, ...] = (*TRICKY, trace)
    expected = "<<" + ", ".join([*(format_value(v) for v in TRICKY), trace_text]) + ">>"
    module, config = _spec(tmp_path, expected)
    tlcdata.install(tmp_path, [], reader)  # stub module and classes; the data is ours
    (tmp_path / tlcdata.DATA_FILE).write_bytes(tlcdata.encode_value(batch))
    result = run_tlc(module, config, TlcOptions(time_limit=60))
    assert result.outcome.verdict == Verdict.OK, result.message
    assert '<<"read", <<0, -1, 2147483647' in result.output


@pytest.mark.tlc
def test_tlc_classpath_and_missing_file(reader: Path, tmp_path: Path) -> None:
    """On the classpath, with the file named by the property; a missing file is a clear error."""
    module, _ = _spec(tmp_path, "<<>>")
    (tmp_path / "TraceData.tla").write_text(tlcdata.STUB_MODULE, encoding="utf-8")
    missing = tmp_path / "nowhere" / "batch.kdat"
    cmd = [
        "java",
        *tlcdata.jvm_args(reader, missing),
        "tlc2.TLC",
        "-metadir",
        str(tmp_path / "meta"),
        module.name,
    ]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f"kreplica TraceData: trace data file not found: {missing}" in done.stdout
    assert str(find_tla2tools()) in cmd[2]


def _odd_trace() -> str:
    """ITF JSON with the forms the JSON reader must get right: variables the trace leaves out,
    one left unchanged, #map, #tup, #bigint, {}, keys that are not identifiers, escapes."""
    first = {
        "#meta": {"index": 0},
        "hw": [0, 0],
        "alive": {"#set": [2, 1]},
        "msgs": {"#set": []},
        "log": [[], {"#tup": []}],
        "remoteLeo": {"#map": [[1, {"a b": 1, "c": {"#bigint": "-7"}}], [2, {}]]},
    }
    second = {
        "#meta": {"index": 1, "action": "Crash", "args": dict.fromkeys(ACTION_ARGS["Crash"], 1)},
        "hw": [1, 0],
        "alive": {"#set": [2, 1]},
        "msgs": {"#set": [{"to": 2, "note": 'say "hi" \\ \u0041'}]},
        "log": [[{"epoch": 0, "record": 1}], []],
        "remoteLeo": {"#map": []},
    }
    entry = {"epoch": 2147483647, "record": -2147483647, "extra": [[], {}, [-0, 10]]}
    third = {  # the reader's fast path: values repeated across variables, extremes, nesting
        "#meta": {"index": 2, "action": "Flush", "args": dict.fromkeys(ACTION_ARGS["Flush"], 2)},
        "hw": [1, 0],
        "alive": {"#set": [entry, entry]},
        "msgs": {"#set": [{"to": 2, "note": "plain"}, {"to": 3, "note": "a longer note, plain"}]},
        "log": [[entry, entry], [entry]],
        "remoteLeo": {"#map": [[1, {"#tup": [entry]}], [2, {"#set": []}]]},
    }
    obj = {"vars": ["hw", "alive", "msgs", "log", "remoteLeo"], "states": [first, second, third]}
    return json.dumps(obj)


def _json_traces() -> list[str]:
    from kreplica.conformance.fuzz.random_walk import corpus
    from kreplica.conformance.tla.itf import dumps_trace
    from kreplica.impl.variants import Variant

    return [dumps_trace(t) for t in corpus(3, 25, 9, Variant(), 3)] + [_odd_trace()]


def test_json_traces_decode_as_rendered() -> None:
    """The Python decoder reads a JSON trace ('J', after the vocabulary) as `render` writes it."""
    texts = _json_traces()
    data = tlcdata.join_traces([tlcdata.json_blob(t) for t in texts])
    expected = tlcdata.decode_value(tlcdata.encode_traces([load("t", t) for t in texts]))
    assert tlcdata.decode_value(data) == expected


@pytest.mark.tlc
def test_tlc_reads_json_traces_as_rendered(reader: Path, tmp_path: Path) -> None:
    """The Java reader, given traces as ITF JSON, hands TLC the value of their TLA+ rendering
    (with the sharing of their prefixes off: it adds fields, tests/test_conform_prefixes.py)."""
    texts = _json_traces()
    expected = "<<" + ", ".join(render(load("t", t)) for t in texts) + ">>"
    module, config = _spec(tmp_path, expected)
    tlcdata.install_blobs(tmp_path, [tlcdata.json_blob(t) for t in texts], reader)
    unshared = (*TlcOptions().jvm_flags, "-Dkreplica.tracedata.share=false")
    result = run_tlc(module, config, TlcOptions(time_limit=120, jvm_flags=unshared))
    assert result.outcome.verdict == Verdict.OK, result.message
    for number, text in enumerate(texts, start=1):
        events = len(load("t", text).states) - 1
        assert f'<<"kreplica-events", {number}, {events}>>' in result.output


def _spoiled(text: str, spoil: Callable[[dict[str, Any]], None]) -> str:
    """`text` with `spoil` applied to its JSON."""
    obj = json.loads(text)
    spoil(obj)
    return json.dumps(obj)


def _set(state: int, name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["states"][state].__setitem__(name, value)


def _set_meta(state: int, name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["states"][state]["#meta"].__setitem__(name, value)


SPOILS: list[tuple[Callable[[str], str], str]] = [
    (lambda t: _spoiled(t, _set_meta(3, "action", "Bogus")), "step 3: unknown action 'Bogus'"),
    (lambda t: _spoiled(t, _set_meta(2, "args", {"extra": 1})), "step 2: "),
    (lambda t: _spoiled(t, _set(2, "nextRecord", 1.5)), "1.5 is not an ITF value"),
    (lambda t: _spoiled(t, _set(4, "hw", [2**40, 0, 0])), "out of TLC's range"),
    (lambda t: _spoiled(t, lambda o: o["states"][2].pop("isr")), "missing variable 'isr'"),
    (lambda t: t[: len(t) // 2], "JSON"),
    (lambda t: _spoiled(t, _set(3, "msgs", {"#set": [], "x": 1})), "exactly one key"),
    (lambda t: _spoiled(t, _set(3, "msgs", {"x": 1, "#set": []})), "exactly one key"),
    (lambda t: _spoiled(t, _set(3, "msgs", {"#sets": []})), "unknown ITF tag"),
]


@pytest.mark.tlc
def test_the_reader_refuses_bad_traces_alone(reader: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces the Java reader refuses get an error row with Python's precise complaint, while
    the good traces of the same batch are checked in the same, single, TLC run."""
    good = _json_traces()[:2]
    bad = [spoil(good[0]) for spoil, _ in SPOILS]
    runs: list[Path] = []

    def counting_run_tlc(module: Path, config: Path, options: TlcOptions) -> Any:
        runs.append(module)
        return run_tlc(module, config, options)

    monkeypatch.setattr(tracecheck, "run_tlc", counting_run_tlc)
    settings = tracecheck.CheckSettings(
        tracecheck.SpecParams(fetch_max_records=2),
        resolve_spec_dir(None),
        TlcOptions(time_limit=300),
        reader,
    )
    items = [(f"good{i}", t) for i, t in enumerate(good)] + [
        (f"bad{i}", t) for i, t in enumerate(bad)
    ]
    results = tracecheck.check_texts(items, settings)
    assert [r.verdict for r in results[:2]] == ["conforms", "conforms"]
    for result, (_, complaint) in zip(results[2:], SPOILS, strict=True):
        assert result.verdict == "error", result
        assert complaint in result.reason, result.reason
    assert len(runs) == 1


@pytest.mark.tlc
def test_allagree_in_java_gives_the_verdicts_of_its_definition(
    reader: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLC evaluates the trace spec's AllAgree through TraceAgreement.java when the reader's
    classes are beside the spec, and through its TLA+ definition (spec/TraceAgreement.tla)
    when traces are checked as a TLA+ module: both ways give the same rows, conforming or not,
    down to the step and the differing variables."""
    good = _json_traces()[:3]
    spoiled = [
        _spoiled(good[0], _set(5, "hw", [9, 9, 9])),  # a recorded change that is wrong
        _spoiled(good[1], lambda o: o["states"][6].__setitem__("crashes", 7)),
        _spoiled(good[2], _set(9, "nextRecord", 99)),
    ]
    items = [(f"t{i}", t) for i, t in enumerate(good + spoiled)]
    outputs: list[str] = []

    def recording_run_tlc(module: Path, config: Path, options: TlcOptions) -> Any:
        result = run_tlc(module, config, options)
        outputs.append(result.output)
        return result

    monkeypatch.setattr(tracecheck, "run_tlc", recording_run_tlc)

    def rows(with_reader: Path | None) -> list[tuple[Any, ...]]:
        settings = tracecheck.CheckSettings(
            tracecheck.SpecParams(fetch_max_records=2),
            resolve_spec_dir(None),
            TlcOptions(time_limit=300),
            with_reader,
        )
        return [
            (r.trace_id, r.verdict, r.step, r.action, r.variables)
            for r in tracecheck.check_texts(items, settings)
        ]

    in_java = rows(reader)
    assert all("AllAgree operator override" in out for out in outputs), "override not loaded"
    outputs.clear()
    in_tla = rows(None)
    assert not any("AllAgree operator override" in out for out in outputs)
    assert in_java == in_tla
    assert [row[1] for row in in_java] == ["conforms"] * 3 + ["violates"] * 3
    assert [row[2] for row in in_java[3:]] == [5, 6, 9]
