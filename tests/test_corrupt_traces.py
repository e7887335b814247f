"""One trace, one verdict, its own: a corrupt trace costs no other trace its verdict.

Hypothesis mutates real conforming traces (random walks of the correct protocol) in the ways
that used to take verdicts away from other traces or crash the run: a raw NUL or another
control character in a string, nesting 10,000 levels deep, a value of the wrong type, an
unknown variable or action, a truncation, a flipped byte, bytes that are not UTF-8. The
mutants go into one corpus with unmodified traces, both as lines of a JSON-lines file and as
separate ITF files, some named with bytes that are not UTF-8 or with control characters, and
one `kreplica conform` run (the process pool, real TLC) checks them all.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kreplica.conformance.cli.main import main
from kreplica.conformance.fuzz.random_walk import corpus
from kreplica.conformance.tla.itf import dumps_trace, printable
from kreplica.conformance.tla.vocabulary import VARIABLES
from kreplica.conformance.validate.results import iter_rows
from kreplica.conformance.validate.shapes import VARIABLE_SHAPES, ShapeError
from kreplica.conformance.validate.sources import variant_note
from kreplica.impl.variants import Variant

pytestmark = pytest.mark.tlc

DEPTH = 10_000
WRONG_VALUES: list[Any] = ["x", True, 7, [1, "a"], {"#set": [1]}, {"a": 1}, -(2**40)]


def _good() -> list[str]:
    """Four conforming random walks of 20 steps, one JSON line each."""
    return [
        json.dumps(json.loads(dumps_trace(t)), separators=(",", ":"))
        for t in corpus(4, 20, 0, Variant(), replicas=3)
    ]


GOOD = _good()


# ---------------------------------------------------------------- mutations


Mutant = tuple[str, bytes, dict[str, Any]]
"""(kind, the mutated trace's bytes, what its row must say: verdict, reason, step, variable)."""


def _state_var(data: st.DataObject, obj: dict[str, Any]) -> tuple[int, str]:
    """A state (not the first: its variables all count) and one of its variables."""
    index = data.draw(st.integers(0, len(obj["states"]) - 1), label="state")
    return index, data.draw(st.sampled_from(sorted(VARIABLES)), label="variable")


def _with_value(obj: dict[str, Any], index: int, var: str, raw: str) -> bytes:
    """The trace with state `index`'s variable `var` replaced by the raw JSON text `raw`."""
    obj["states"][index][var] = "\ue000PLACEHOLDER"
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace('"\ue000PLACEHOLDER"', raw).encode()


def nul_byte(data: st.DataObject, text: str) -> Mutant:
    obj = json.loads(text)
    index = data.draw(st.integers(0, len(obj["states"]) - 1), label="state")
    obj["states"][index]["fetchState"][0] = "Id\x00le"
    raw = json.dumps(obj, separators=(",", ":")).replace("\\u0000", "\x00").encode()
    expect = {"verdict": "error", "reason": "control character"}
    return "nul", raw, {**expect, "step": index, "variables": ["fetchState"]}


def control_char(data: st.DataObject, text: str) -> Mutant:
    obj = json.loads(text)
    char = data.draw(st.sampled_from([c for c in map(chr, range(1, 32)) if c != "\n"]))
    index = data.draw(st.integers(0, len(obj["states"]) - 1), label="state")
    obj["states"][index]["fetchState"][1] = "Fetch" + char + "ing"
    escaped = json.dumps(char)[1:-1]
    raw = json.dumps(obj, separators=(",", ":")).replace("Fetch" + escaped, "Fetch" + char)
    expect = {"verdict": "error", "reason": "control character"}
    return "control", raw.encode(), {**expect, "step": index, "variables": ["fetchState"]}


def deep_nesting(data: st.DataObject, text: str) -> Mutant:
    obj = json.loads(text)
    index, var = _state_var(data, obj)
    raw = _with_value(obj, index, var, "[" * DEPTH + "]" * DEPTH)
    return "deep", raw, {"verdict": "error", "reason": "nested too deeply"}


def wrong_type(data: st.DataObject, text: str) -> Mutant:
    obj = json.loads(text)
    index, var = _state_var(data, obj)
    wrong = [v for v in WRONG_VALUES if not _fits(var, v)]
    value = data.draw(st.sampled_from(wrong), label="wrong value")
    raw = _with_value(obj, index, var, json.dumps(value))
    expect: dict[str, Any] = {"verdict": "error", "step": index, "variables": [var]}
    expect["reason"] = f"step {index}: variable {var!r}"
    return "wrong-type", raw, expect


def _fits(var: str, value: Any) -> bool:
    from kreplica.conformance.tla.itf import from_itf

    try:
        VARIABLE_SHAPES[var].check(from_itf(value), var)
    except ShapeError:
        return False
    return True


def unknown_name(data: st.DataObject, text: str) -> Mutant:
    obj = json.loads(text)
    if data.draw(st.booleans(), label="unknown variable"):
        obj["vars"].append("bogus")
        for state in obj["states"]:
            state["bogus"] = 0
        reason = "unknown variable 'bogus'"
    else:
        index = data.draw(st.integers(1, len(obj["states"]) - 1), label="step")
        obj["states"][index]["#meta"]["action"] = "Teleport"
        reason = f"step {index}: unknown action 'Teleport'"
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return "unknown", raw, {"verdict": "error", "reason": reason}


def truncation(data: st.DataObject, text: str) -> Mutant:
    raw = text.encode()
    cut = data.draw(st.integers(1, len(raw) - 1), label="cut")
    return "truncated", raw[:cut], {"verdict": "error"}


def byte_flip(data: st.DataObject, text: str) -> Mutant:
    raw = bytearray(text.encode())
    at = data.draw(st.integers(0, len(raw) - 1), label="at")
    raw[at] = data.draw(st.integers(0, 255).filter(lambda b: b not in (10, raw[at])))
    return "flipped", bytes(raw), {}  # any verdict: a flip may even leave a valid trace


def invalid_utf8(data: st.DataObject, text: str) -> Mutant:
    raw = text.encode()
    at = data.draw(st.integers(0, len(raw)), label="at")
    junk = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
    return "not-utf8", raw[:at] + junk + raw[at:], {"verdict": "error", "reason": "not UTF-8"}


MUTATIONS: list[Callable[[st.DataObject, str], Mutant]] = [
    nul_byte,
    control_char,
    deep_nesting,
    wrong_type,
    unknown_name,
    truncation,
    byte_flip,
    invalid_utf8,
]


# ---------------------------------------------------------------- the corpus


def _build(data: st.DataObject, root: Path) -> tuple[list[Path], dict[str, dict[str, Any]]]:
    """Write the corpus under `root`: a JSON-lines file of good traces and one mutant of each
    kind, shuffled, and single ITF files (good and mutant, some with awkward names). Return
    the paths to check and, by expected trace id, what each row must say."""
    lines: list[tuple[bytes, dict[str, Any]]] = [
        (g.encode(), {"verdict": "conforms", "good": True}) for g in GOOD
    ]
    for mutate in MUTATIONS:
        source = data.draw(st.sampled_from(GOOD), label="source")
        kind, raw, expect = mutate(data, source)
        lines.append((raw, {**expect, "kind": kind}))
    lines = data.draw(st.permutations(lines), label="order")
    jsonl = root / "corpus.jsonl"
    jsonl.write_bytes(b"".join(raw + b"\n" for raw, _ in lines))
    expected = {f"{jsonl}:{n}": expect for n, (_, expect) in enumerate(lines, start=1)}

    files = root / "files"
    files.mkdir()
    kinds = data.draw(st.lists(st.sampled_from(MUTATIONS), min_size=2, max_size=2), label="files")
    singles: list[tuple[bytes, bytes, dict[str, Any]]] = [
        (b"plain.itf.json", GOOD[0].encode(), {"verdict": "conforms", "good": True}),
        (b"bad\xffname.itf.json", GOOD[1].encode(), {"verdict": "conforms", "good": True}),
        (b"ctl\x01\x1b[31mname.itf.json", GOOD[2].encode(), {"verdict": "conforms", "good": True}),
    ]
    for n, mutate in enumerate(kinds):
        kind, raw, expect = mutate(data, GOOD[3])
        name = b"mutant%d\xfe\x07.itf.json" % n if n % 2 else b"mutant%d.itf.json" % n
        singles.append((name, raw, {**expect, "kind": kind}))
    for name, raw, expect in singles:
        path = os.fsdecode(os.fsencode(files) + b"/" + name)
        Path(path).write_bytes(raw)
        expected[printable(path)] = expect
    return [jsonl, files], expected


def _mentions(reason: str, trace_id: str) -> bool:
    """Whether `reason` names `trace_id` (not merely a longer id it begins, `c.jsonl:12`)."""
    return re.search(re.escape(trace_id) + r"(?![0-9])", reason) is not None


def _check_rows(found: list[dict[str, Any]], expected: dict[str, dict[str, Any]]) -> None:
    """Every input has one row; each says what its trace's mutation makes it say, and nothing
    of any other trace; good traces conform."""
    got = Counter(r["trace_id"] for r in found)
    assert got == Counter(list(expected)), (
        "one row per trace",
        got - Counter(list(expected)),
        Counter(list(expected)) - got,
    )
    for row in found:
        expect = expected[row["trace_id"]]
        where = f"{row['trace_id']} ({expect.get('kind', 'good')}): {row}"
        if "verdict" in expect:
            assert row["verdict"] == expect["verdict"], where
        if "reason" in expect:
            assert expect["reason"] in row["reason"], where
        if "step" in expect:
            assert (row["step"], row["variables"]) == (expect["step"], expect["variables"]), where
        others = [i for i in expected if i != row["trace_id"]]
        assert not [i for i in others if _mentions(row["reason"] or "", i)], where
        assert printable(row["reason"] or "") == (row["reason"] or ""), where


# ---------------------------------------------------------------- the properties


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # a failing corpus is not shrunk: TLC runs are slow
)
@given(data=st.data())
def test_each_corrupt_trace_gets_its_own_error_row_and_good_traces_keep_their_verdicts(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One `kreplica conform` run on the pool over the mixed corpus: no traceback, one row per
    input trace, every unmodified trace conforms, every mutant's row says what is wrong with
    it (the step and the variable for a wrong type) and names no other trace, and the
    JUnit report is well-formed XML with one test case per trace."""
    root = tmp_path_factory.mktemp("corrupt")
    paths, expected = _build(data, root)
    out = root / "out"
    args = ["conform", *map(str, paths), "--no-spark", "--workers", "2", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    assert printable(result.output.replace("\n", " ")) == result.output.replace("\n", " ")
    _check_rows(list(iter_rows(out / "results.parquet")), expected)
    cases = ET.parse(out / "junit.xml").getroot().findall("testcase")
    assert Counter(c.get("name") for c in cases) == Counter(list(expected))


def test_replay_of_a_trace_nested_10000_deep_is_one_error_line_and_exit_2(
    tmp_path: Path,
) -> None:
    """`kreplica replay` on a 10,000-deep trace: one `kreplica: error:` line, exit code 2."""
    obj = json.loads(GOOD[0])
    path = tmp_path / "deep\x1b.itf.json"
    path.write_bytes(_with_value(obj, 3, "hw", "[" * DEPTH + "]" * DEPTH))
    result = CliRunner().invoke(main, ["replay", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert lines == [f"kreplica: error: {printable(str(path))}: nested too deeply"], lines


def test_replay_of_a_value_of_the_wrong_type_names_the_step_and_variable(tmp_path: Path) -> None:
    """A wrong type is bad input (exit 2) naming the step and the variable, not a difference."""
    obj = json.loads(GOOD[0])
    path = tmp_path / "typed.itf.json"
    path.write_bytes(_with_value(obj, 2, "hw", '"x"'))
    result = CliRunner().invoke(main, ["replay", str(path)])
    assert result.exit_code == 2, result.output
    assert "step 2: variable 'hw'" in result.output, result.output


def test_on_spark_a_deep_or_ill_typed_line_is_that_lines_error_alone(tmp_path: Path) -> None:
    """The same on Spark: the deep, NUL and ill-typed lines get their own error rows, the
    good lines conform, and the run ends normally."""
    obj = json.loads(GOOD[1])
    deep = _with_value(obj, 2, "log", "[" * DEPTH + "]" * DEPTH)
    typed = _with_value(json.loads(GOOD[2]), 3, "alive", "[1,2,3]")
    nul = GOOD[3].replace('"Idle"', '"Id\x00le"', 1).encode()
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\n".join([GOOD[0].encode(), deep, typed, nul, GOOD[1].encode()]) + b"\n")
    out = tmp_path / "out"
    args = ["conform", str(path), "--master", "local[2,2]", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    found = {r["trace_id"]: r for r in iter_rows(out / "results.parquet")}
    assert {i: r["verdict"] for i, r in found.items()} == {
        f"{path}:1": "conforms",
        f"{path}:2": "error",
        f"{path}:3": "error",
        f"{path}:4": "error",
        f"{path}:5": "conforms",
    }
    assert "nested too deeply" in found[f"{path}:2"]["reason"]
    assert "step 3: variable 'alive'" in found[f"{path}:3"]["reason"]
    assert "control character" in found[f"{path}:4"]["reason"]


def test_a_recorded_variant_with_a_control_character_is_noted_printably() -> None:
    """A flipped byte in a trace's recorded variant (DEL, 0x7f: found by the property above on
    a fresh clone) reaches the note column and the terminal as an escape, not as the byte."""
    text = json.dumps({"#meta": {"variant": "d\x7ffault"}, "vars": [], "states": []})
    note = variant_note(text, "default")
    assert note == r"recorded with variant d\x7ffault, checked against default"
    assert printable(note) == note
