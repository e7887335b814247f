"""The binary trace data format and its Java reader, checked against real TLC.

The reader must give TLC exactly the value that the TLA+ rendering gives: a tiny spec reads
`TraceLog` through the reader and asserts it equals the same value written as TLA+ text.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from kreplica.conformance import tlcdata
from kreplica.conformance.errors import CheckerError
from kreplica.conformance.itf import ItfState, ItfTrace
from kreplica.conformance.tlavalue import Map, ModelValue, Record, Value, format_value, parse_value
from kreplica.conformance.tlc import TlcOptions, Verdict, find_tla2tools, run_tlc
from kreplica.conformance.tracecheck import render
from tlavalue_strategies import values

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


def test_traces_encoded_from_json_equal_the_decoded_path() -> None:
    """The fast path (ITF JSON straight to bytes, one string table per trace) gives the same
    TraceLog as encoding decoded traces."""
    import json

    from kreplica.conformance.corpus import corpus
    from kreplica.conformance.itf import decode_trace, dumps_trace
    from kreplica.conformance.tlcdata import (
        decode_value,
        encode_json_trace,
        encode_traces,
        join_traces,
    )
    from kreplica.impl.variants import Variant

    objs = [json.loads(dumps_trace(t)) for t in corpus(3, 25, 9, Variant(), 3)]
    fast = join_traces([encode_json_trace(o["vars"], o["states"]) for o in objs])
    slow = encode_traces([decode_trace(o) for o in objs])
    assert decode_value(fast) == decode_value(slow)
