"""ITF: value encoding, traces from TLC counterexamples, and reading/validating trace files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tlavalue_strategies import values

from kreplica.conformance.errors import TraceError
from kreplica.conformance.tla.itf import (
    ItfState,
    ItfTrace,
    build_trace,
    decode_trace,
    dumps_trace,
    from_itf,
    iter_jsonl_traces,
    lift_action,
    printable,
    read_trace,
    to_itf,
    write_text_atomic,
    write_trace,
)
from kreplica.conformance.tla.tlavalue import Map, ModelValue, Record, Value
from kreplica.conformance.tla.tlc_output import parse_tlc_output


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (True, True),
        (7, 7),
        (-(2**53) + 1, -(2**53) + 1),
        (2**53, {"#bigint": str(2**53)}),
        (-(2**60), {"#bigint": str(-(2**60))}),
        ("s", "s"),
        (frozenset({3, 1}), {"#set": [1, 3]}),
        ((1, "a"), [1, "a"]),
        ((), []),
        (Record({"b": 1, "a": (2,)}), {"b": 1, "a": [2]}),
        (Map({2: "x", 1: "y"}), {"#map": [[1, "y"], [2, "x"]]}),
        (Map({(1, 2): 3}), {"#map": [[[1, 2], 3]]}),
        (ModelValue("r1"), {"#unserializable": "r1"}),
        (Record({"#odd": 1}), {"#map": [["#odd", 1]]}),
    ],
)
def test_encode(value: Value, encoded: Any) -> None:
    """Each value has its ITF form."""
    assert to_itf(value) == encoded
    assert from_itf(encoded) == value


def test_decode_extras() -> None:
    """`#tup` and `#bigint` decode too."""
    assert from_itf({"#tup": [1, {"#bigint": "-5"}]}) == (1, -5)
    assert from_itf({"#set": []}) == frozenset()


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (1.5, "1.5 is not an ITF value"),
        (None, "null is not an ITF value"),
        ({"#set": 3}, r"value.#set: expected a JSON array"),
        ({"#bigint": "12a"}, "expected a string of decimal digits"),
        ({"#map": [[1]]}, r"\[0\]: expected a \[key, value\] pair"),
        ({"#frob": 1}, "unknown ITF tag '#frob'"),
        ({"#set": [], "x": 1}, "exactly one key"),
        ({"#unserializable": 3}, "expected a string"),
        ({"a": [1, {"#set": {}}]}, r"value.a\[1\].#set: expected a JSON array"),
    ],
)
def test_decode_errors(obj: Any, message: str) -> None:
    """Bad ITF values raise TraceError saying where."""
    with pytest.raises(TraceError, match=message):
        from_itf(obj)


@given(values)
def test_itf_round_trip(value: Value) -> None:
    """Encoding to ITF JSON text and decoding gives the same value back."""
    assert from_itf(json.loads(json.dumps(to_itf(value)))) == value


@given(st.integers())
def test_itf_integers(n: int) -> None:
    """Any integer survives, as a JSON number when safe and a #bigint beyond 2^53."""
    encoded = to_itf(n)
    assert isinstance(encoded, int) == (abs(n) < 2**53)
    assert from_itf(encoded) == n


# ---------------------------------------------------------------- traces


def _counter_bug(tlc_output_dir: Path) -> ItfTrace:
    """The ITF trace of the recorded CounterBug counterexample."""
    codes = json.loads((tlc_output_dir / "exit_codes.json").read_text())
    text = (tlc_output_dir / "CounterBug.out").read_text()
    trace = parse_tlc_output(text, codes["CounterBug"]).to_itf({"source": "Counter.tla"})
    assert trace is not None
    return trace


def test_tlc_counterexample_to_itf(tlc_output_dir: Path) -> None:
    """Our `action` variable moves into each state's #meta and out of `vars`."""
    obj = _counter_bug(tlc_output_dir).to_json()
    assert obj["#meta"]["format"] == "ITF" and obj["#meta"]["source"] == "Counter.tla"
    assert obj["vars"] == ["leader", "log", "seen", "x"]
    first, second, _ = obj["states"]
    assert first["#meta"] == {"index": 0, "action": "Init", "args": {}}
    assert second["#meta"] == {
        "index": 1,
        "action": "Inc",
        "args": {"amount": 1, "replica": {"#unserializable": "r1"}},
    }
    assert second["seen"] == {
        "#map": [
            [{"#unserializable": "r1"}, {"#set": [1]}],
            [{"#unserializable": "r2"}, {"#set": []}],
        ]
    }
    assert "action" not in second and list(second)[1:] == obj["vars"]


def test_trace_without_action_variable_keeps_tlc_names() -> None:
    """Without an `action` variable, the action TLC printed is used, with empty args."""
    trace = build_trace([("Init", {"x": 0}), ("Next", {"x": 1})], {"source": "t"})
    assert [(s.action, s.args) for s in trace.states] == [("Init", {}), ("Next", {})]
    assert trace.vars == ["x"]


def test_malformed_action_variable_is_left_alone() -> None:
    """An `action` variable not of our shape stays an ordinary variable."""
    trace = build_trace([("Init", {"x": 0, "action": 3})], {})
    assert trace.vars == ["action", "x"] and trace.states[0].action == "Init"


def test_lift_action_on_a_decoded_trace() -> None:
    """Traces from other tools (Apalache) get the same treatment."""
    raw = {
        "vars": ["action", "x"],
        "states": [
            {"action": {"name": "Init", "args": []}, "x": 0},
            {"action": {"name": "Produce", "args": {"replica": 1}}, "x": 1},
        ],
    }
    trace = lift_action(decode_trace(raw))
    assert [(s.action, s.args) for s in trace.states] == [("Init", {}), ("Produce", {"replica": 1})]


def test_write_then_read(tmp_path: Path, tlc_output_dir: Path) -> None:
    """A written trace reads back equal; the file has one state per line."""
    trace = _counter_bug(tlc_output_dir)
    path = tmp_path / "sub" / "CounterBug.itf.json"
    write_trace(path, trace)
    assert read_trace(path) == trace
    text = path.read_text()
    assert json.loads(text) == trace.to_json()
    assert text.count('{"#meta": {"index"') == 3 and len(text.splitlines()) == 9
    assert [p.name for p in path.parent.iterdir()] == ["CounterBug.itf.json"]


def test_round_trip_keeps_meta_loop_params() -> None:
    """Top-level meta, params and loop survive; states' extra meta too."""
    state = ItfState({"x": 1}, action="A", args={"n": 2}, meta={"seed": 42})
    trace = ItfTrace(["x"], [state], meta={"source": "s"}, params=["p"], loop=0)
    assert decode_trace(json.loads(dumps_trace(trace))) == trace


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path) -> None:
    """A failed write leaves the previous file and no temp file."""
    path = tmp_path / "report.md"
    write_text_atomic(path, "old")

    with pytest.raises(TypeError):
        write_text_atomic(path, 3)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def _write(tmp_path: Path, text: str) -> Path:
    """A trace file with `text`."""
    path = tmp_path / "t.itf.json"
    path.write_text(text)
    return path


GOOD = {"vars": ["x"], "states": [{"#meta": {"index": 0}, "x": 1}]}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ('{"vars": ["x"], "states": [{"x": ', "truncated JSON"),
        ("{vars: 1}", "not valid JSON: Expecting property name .* at line 1, column 2"),
        ("[]", "not an ITF trace: expected a JSON object"),
        ('{"states": []}', "not an ITF trace: missing 'vars'"),
        ('{"vars": []}', "not an ITF trace: missing 'states'"),
        ('{"vars": "x", "states": []}', "'vars' must be a JSON list"),
        ('{"vars": [1], "states": [{}]}', "'vars' and 'params' must hold strings"),
        ('{"vars": ["x"], "states": []}', "the trace has no states"),
        ('{"vars": ["x", "y"], "states": [{"x": 1}]}', "state 0: missing variable 'y'"),
        ('{"vars": ["x"], "states": [{"x": 1, "z": 2}]}', "variable 'z' is not declared"),
        ('{"vars": ["x"], "states": [3]}', "state 0: expected a JSON object"),
        ('{"vars": ["x"], "states": [{"x": 1.5}]}', "state 0, variable 'x': 1.5 is not"),
        ('{"vars": ["x"], "states": [{"#meta": 1, "x": 1}]}', "'#meta' must be a JSON object"),
        ('{"vars": ["x"], "states": [{"#meta": {"action": 1}, "x": 1}]}', "action must be a"),
        ('{"vars": ["x"], "states": [{"#meta": {"args": []}, "x": 1}]}', "args must be a JSON"),
        ('{"vars": ["x"], "states": [{"x": 1}], "loop": "a"}', "'loop' must be a JSON int"),
    ],
)
def test_read_errors(tmp_path: Path, content: str, message: str) -> None:
    """Every malformed file raises TraceError naming the file and the problem."""
    path = _write(tmp_path, content)
    with pytest.raises(TraceError, match=message) as err:
        read_trace(path)
    assert str(err.value).startswith(str(path))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    """A missing path and a directory are clear errors too."""
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "nope.itf.json")
    with pytest.raises(TraceError, match="is a directory"):
        read_trace(tmp_path)
    (tmp_path / "bin.itf.json").write_bytes(b"\xff\xfe")
    with pytest.raises(TraceError, match="not UTF-8"):
        read_trace(tmp_path / "bin.itf.json")


def test_jsonl_corpus(tmp_path: Path) -> None:
    """A JSON-lines corpus yields one trace per non-empty line; errors name the line."""
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(GOOD) + "\n")
    assert len(list(iter_jsonl_traces(path))) == 2
    path.write_text(json.dumps(GOOD) + "\n{}\n")
    with pytest.raises(TraceError, match=r"corpus.jsonl:2: not an ITF trace"):
        list(iter_jsonl_traces(path))


def test_atomic_write_gives_the_usual_file_mode(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    old = os.umask(0o022)
    try:
        write_text_atomic(target, "x\n")
    finally:
        os.umask(old)
    assert target.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("depth", [990, 10_000])
def test_json_nested_too_deeply_is_a_trace_error_not_a_recursion_error(
    tmp_path: Path, depth: int
) -> None:
    """However deep, a trace's nesting is one TraceError naming the file, never a traceback."""
    text = json.dumps(GOOD).replace("1}", "[" * depth + "]" * depth + "}")
    path = _write(tmp_path, text)
    with pytest.raises(TraceError, match="nested too deeply") as err:
        read_trace(path)
    assert str(err.value).startswith(str(path))


def test_printable_escapes_control_characters_and_bytes_that_are_not_utf8() -> None:
    """File names and reasons are written with backslash escapes where a terminal, Parquet or
    XML cannot take them; ordinary text (accents included) is left alone."""
    name = os.fsdecode(b"dir/bad\xffname\x01\x1b[31m.itf.json")
    assert printable(name) == "dir/bad\\xffname\\x01\\x1b[31m.itf.json"
    assert printable("caf\u00e9 \u2028 ok") == "caf\u00e9 \u2028 ok"
    assert printable("a\x00b\ud800") == "a\\x00b\\ud800"
