"""Parsing TLC's `-tool` output (recorded from real runs) and running real TLC."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.tla.specs import load_config
from kreplica.conformance.tla.tlavalue import Map, ModelValue, Record
from kreplica.conformance.tla.tlc import (
    TlcOptions,
    find_java,
    find_tla2tools,
    run_tlc,
    settled_jar,
    tlc_command,
)
from kreplica.conformance.tla.tlc_output import (
    MessageParser,
    Outcome,
    TlcOutput,
    TlcProgress,
    Verdict,
    parse_tlc_output,
)


def recorded(output_dir: Path, name: str) -> tuple[str, int | None]:
    """The stdout and exit code recorded for one fixture config."""
    codes = json.loads((output_dir / "exit_codes.json").read_text())
    return (output_dir / f"{name}.out").read_text(), codes[name]


# name -> (verdict, message fragment, states, distinct, depth, trace length)
EXPECTED = {
    "CounterOk": ("ok", "No error has been found", 97, 48, 9, 0),
    "CounterBug": ("violation Small", "Invariant Small is violated", 8, 8, 3, 3),
    "Deadlock": ("deadlock", "Deadlock reached", 3, 3, 3, 3),
    "Liveness": ("temporal", "Temporal properties were violated", 3, 3, 3, 3),
    "Assume": ("assumption", "Assumption line 4, col 8", None, None, None, 0),
    "Values": ("violation Inv", "violated by the initial state", None, None, None, 1),
    "Syntax": ("parse-error", 'Encountered "0" at line 4, column 15', None, None, None, 0),
    "Semantic": ("parse-error", "Unknown operator: `y'", None, None, None, 0),
    "BadCfg": ("config-error", "configuration file at line 10", None, None, None, 0),
    "UndefinedInvariant": ("config-error", "NoSuchInvariant specified", None, None, None, 0),
    "EvalError": ("eval-error", "out of domain. (at Line 5, column 24", 1, 1, 1, 1),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_outputs(tlc_output_dir: Path, name: str) -> None:
    """Each recorded run yields the right verdict, message, counts, depth and trace."""
    verdict, fragment, states, distinct, depth, length = EXPECTED[name]
    text, code = recorded(tlc_output_dir, name)
    result = parse_tlc_output(text, code)
    assert str(result.outcome) == verdict
    assert fragment in result.message
    assert (result.states, result.distinct, result.depth) == (states, distinct, depth)
    assert len(result.trace) == length
    assert result.trace_error is None
    assert result.version is not None and "2.15" in result.version
    assert result.seconds is not None and result.seconds > 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict_does_not_need_the_exit_code(tlc_output_dir: Path, name: str) -> None:
    """The messages alone decide the verdict; the exit code is only a fallback."""
    text, code = recorded(tlc_output_dir, name)
    assert parse_tlc_output(text).outcome == parse_tlc_output(text, code).outcome


def test_counterexample_trace(tlc_output_dir: Path) -> None:
    """The error trace has numbered states, action names, locations and parsed values."""
    result = parse_tlc_output(*recorded(tlc_output_dir, "CounterBug"))
    first, second, last = result.trace
    assert (first.number, first.action, first.location) == (1, "Init", None)
    assert first.values["seen"] == Map(
        {ModelValue("r1"): frozenset(), ModelValue("r2"): frozenset()}
    )
    assert first.values["leader"] == ModelValue("NoLeader")
    assert (second.number, second.action) == (2, "Inc")
    assert second.location == "line 19, col 14 to line 24, col 82 of module Counter"
    assert second.values["action"] == Record(
        {"name": "Inc", "args": Record({"amount": 1, "replica": ModelValue("r1")})}
    )
    assert last.values["x"] == 3
    note = last.values["log"]
    assert isinstance(note, tuple) and note[0]["note"] == 'inc "quoted"'  # type: ignore[index]


def test_single_variable_states_and_deadlock(tlc_output_dir: Path) -> None:
    """With one variable TLC prints `x = 1` without `/\\`."""
    result = parse_tlc_output(*recorded(tlc_output_dir, "Deadlock"))
    assert [s.values for s in result.trace] == [{"x": 0}, {"x": 1}, {"x": 2}]
    assert [s.action for s in result.trace] == ["Init", "Next", "Next"]


def test_liveness_stuttering_sets_the_loop(tlc_output_dir: Path) -> None:
    """A liveness counterexample that ends in stuttering loops on its last state."""
    result = parse_tlc_output(*recorded(tlc_output_dir, "Liveness"))
    assert result.loop == 2


def test_initial_state_violation_values(tlc_output_dir: Path) -> None:
    """The odd values of Values.tla, printed in a message without a state header."""
    result = parse_tlc_output(*recorded(tlc_output_dir, "Values"))
    (state,) = result.trace
    values = state.values
    assert (state.number, state.action) == (1, "Init")
    assert values["neg"] == -5
    assert values["str"] == 'tab\there\nnl \\ back "q"'
    assert values["big"] == 2**31 - 1
    assert values["empties"] == (frozenset(), (), ())
    assert values["strfn"] == Map({"a b": "a b", "c": "c"})
    assert values["tuplekeys"] == Map({(1, 2): 3, (2, 1): 4})
    assert values["mv"] == ModelValue("B")
    longset = values["longset"]
    assert isinstance(longset, frozenset) and len(longset) == 12
    assert Record({"name": "record", "idx": 7, "payload": (7, -7, 21)}) in longset
    deep = values["deep"]
    assert isinstance(deep, tuple) and deep[2]["log"][2] == (2, 1, "rec")  # type: ignore[index]


def test_lasso_back_to_state() -> None:
    """`N: Back to state` makes the trace loop to state N (0-based index N - 1)."""
    text = "\n".join(
        [
            "@!@!@STARTMSG 2116:1 @!@!@",
            "Temporal properties were violated.",
            "@!@!@ENDMSG 2116 @!@!@",
            "@!@!@STARTMSG 2217:4 @!@!@",
            "1: <Initial predicate>",
            "x = 0",
            "@!@!@ENDMSG 2217 @!@!@",
            "@!@!@STARTMSG 2217:4 @!@!@",
            "2: <Next line 5, col 9 to line 6, col 42 of module Lasso>",
            "x = 1",
            "@!@!@ENDMSG 2217 @!@!@",
            "@!@!@STARTMSG 2122:4 @!@!@",
            "1: Back to state: <Next line 5, col 9 to line 6, col 42 of module Lasso>",
            "@!@!@ENDMSG 2122 @!@!@",
        ]
    )
    result = parse_tlc_output(text)
    assert result.outcome == Outcome(Verdict.TEMPORAL)
    assert result.loop == 0 and len(result.trace) == 2


def test_nested_messages() -> None:
    """A message may open in the middle of another's line (TLC nests them)."""
    parser = MessageParser()
    lines = [
        "@!@!@STARTMSG 1000:1 @!@!@",
        "The exception was a tlc2.tool.ConfigFileException",
        ": @!@!@STARTMSG 5001:0 @!@!@",
        "File not found.",
        "@!@!@ENDMSG 5001 @!@!@",
        "@!@!@ENDMSG 1000 @!@!@",
        "loose text",
    ]
    done = [msg for line in lines for msg in parser.feed(line)]
    (top,) = done
    assert top.code == 1000 and top.text.endswith(": ")
    assert [(c.code, c.text) for c in top.children] == [(5001, "File not found.")]
    assert "".join(parser.loose) == "loose text\n"


def test_unclosed_messages_are_closed_at_the_end() -> None:
    """Output cut short (TLC killed) still yields its messages."""
    out = TlcOutput()
    out.feed("@!@!@STARTMSG 2200:0 @!@!@")
    out.feed(
        "Progress(2) at x: 10 states generated, 7 distinct states found, 3 states left on queue."
    )
    result = out.result(exit_code=-9)
    assert (result.states, result.distinct, result.queue, result.depth) == (10, 7, 3, 2)
    assert result.outcome == Outcome(Verdict.CRASH)


def test_progress_is_reported_while_streaming(tlc_output_dir: Path) -> None:
    """Feeding TLC's output line by line reports phases and counts as they come."""
    seen: list[TlcProgress] = []
    out = TlcOutput(seen.append)
    text, _ = recorded(tlc_output_dir, "Slow")
    out.feed_all(text.splitlines(keepends=True))
    phases = [p.phase for p in seen]
    assert phases[:3] == ["parsing", "initial states", "checking"]
    last = seen[-1]
    assert last.distinct is not None and last.distinct > 100_000
    assert last.states is not None and last.states >= last.distinct
    assert last.depth is not None and last.depth > 10


@pytest.mark.parametrize(
    ("text", "code", "verdict"),
    [
        ("", None, Verdict.CRASH),
        ("", 0, Verdict.CRASH),  # exit 0 without TLC's success message proves nothing
        ("", 12, Verdict.VIOLATION),
        ("", 150, Verdict.PARSE_ERROR),
        ("", 151, Verdict.CONFIG_ERROR),
        ("", 255, Verdict.CRASH),
        ("Exception in thread main java.lang.OutOfMemoryError", 1, Verdict.CRASH),
        ("@!@!@STARTMSG 1001:1 @!@!@\nJava ran out of memory.\n@!@!@ENDMSG 1001 @!@!@", 153,
         Verdict.CRASH),
    ],
)  # fmt: skip
def test_exit_code_fallback(text: str, code: int | None, verdict: Verdict) -> None:
    """Without a decisive message the exit code decides; unknown codes are a crash."""
    assert parse_tlc_output(text, code).outcome.verdict == verdict


def test_warnings_do_not_decide() -> None:
    """A warning (class 3) such as the GC hint never makes a verdict."""
    text = "@!@!@STARTMSG 2401:3 @!@!@\nPlease run with ParallelGC.\n@!@!@ENDMSG 2401 @!@!@\n"
    success = "@!@!@STARTMSG 2193:0 @!@!@\nModel checking completed.\n@!@!@ENDMSG 2193 @!@!@\n"
    assert parse_tlc_output(text + success, 0).outcome == Outcome(Verdict.OK)


def test_unparsable_trace_is_reported_not_raised() -> None:
    """A state TLC printed in a form we do not know leaves the trace empty, with a reason."""
    text = "@!@!@STARTMSG 2110:1 @!@!@\nInvariant I is violated.\n@!@!@ENDMSG 2110 @!@!@\n"
    text += "@!@!@STARTMSG 2217:4 @!@!@\n1: <Initial predicate>\n/\\ x = Nat \\X Nat\n"
    text += "@!@!@ENDMSG 2217 @!@!@\n"
    result = parse_tlc_output(text, 12)
    assert result.outcome == Outcome(Verdict.VIOLATION, "I")
    assert result.trace == [] and result.trace_error is not None


@pytest.mark.parametrize(
    ("expected", "got", "ok"),
    [
        ("ok", Outcome(Verdict.OK), True),
        ("violation Inv", Outcome(Verdict.VIOLATION, "Inv"), True),
        ("violation Inv", Outcome(Verdict.VIOLATION, "Other"), False),
        ("violation", Outcome(Verdict.VIOLATION, "Other"), True),
        ("violation Inv", Outcome(Verdict.VIOLATION), True),  # the checker did not say which
        ("temporal Live", Outcome(Verdict.TEMPORAL), True),
        ("deadlock", Outcome(Verdict.OK), False),
        ("ok", Outcome(Verdict.TIMEOUT), False),
    ],
)
def test_outcome_satisfies(expected: str, got: Outcome, ok: bool) -> None:
    """An outcome satisfies an expectation with the same verdict and a compatible name."""
    assert got.satisfies(Outcome.parse(expected)) is ok


@pytest.mark.parametrize("text", ["", "fine", "parse-error", "ok Inv", "violation A B"])
def test_outcome_parse_rejects(text: str) -> None:
    """Only checkable verdicts can be expected."""
    with pytest.raises(ValueError):
        Outcome.parse(text)


def test_find_java_and_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java and the jar come from the argument, else the environment, else the defaults."""
    with pytest.raises(CheckerError, match="Java not found: '/nonexistent'"):
        find_java("/nonexistent")
    monkeypatch.setenv("KREPLICA_JAVA", "/nonexistent/java")
    with pytest.raises(CheckerError, match="/nonexistent/java"):
        find_java()
    with pytest.raises(CheckerError, match=r"tla2tools\.jar not found"):
        find_tla2tools(tmp_path / "missing.jar")
    monkeypatch.delenv("KREPLICA_TLA2TOOLS", raising=False)
    assert find_tla2tools().name == "tla2tools.jar"


def test_find_java_makes_a_relative_path_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLC runs in a directory of its own, so `--java build/.../java` (what make passes) must
    come back absolute, or every config fails with java-missing."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert find_java("jdk/bin/java") == str(java)


def test_tlc_command(tmp_path: Path, spec_dir: Path) -> None:
    """The command uses its own tmpdir and metadir, -deadlock unless asked, relative paths."""
    options = TlcOptions(java="java", jar=Path("/x/tla2tools.jar"), workers=3)
    cmd = tlc_command(spec_dir / "Counter.tla", spec_dir / "CounterOk.cfg", options, tmp_path)
    assert cmd[:2] == ["java", "-XX:+UseParallelGC"]
    assert f"-Djava.io.tmpdir={tmp_path / 'tmp'}" in cmd
    assert cmd[cmd.index("-metadir") + 1] == str(tmp_path / "meta")
    assert cmd[cmd.index("-workers") + 1] == "3"
    assert "-deadlock" in cmd and "-tool" in cmd
    assert cmd[-3:] == ["-config", "CounterOk.cfg", "Counter.tla"]
    strict = TlcOptions(java="java", jar=Path("/x.jar"), check_deadlock=True)
    assert "-deadlock" not in tlc_command(spec_dir / "A.tla", spec_dir / "A.cfg", strict, tmp_path)


# ---------------------------------------------------------------- real TLC


def _options(**kwargs: object) -> TlcOptions:
    """TLC options with the real Java and jar."""
    return TlcOptions(java=find_java(), jar=find_tla2tools(), **kwargs)  # type: ignore[arg-type]


@pytest.mark.tlc
def test_run_tlc_finds_the_violation(spec_dir: Path) -> None:
    """Real TLC on the toy spec: verdict, trace, and no leftover temp dirs."""
    config = load_config(spec_dir, "CounterBug")
    progress: list[TlcProgress] = []
    result = run_tlc(config.module_path, config.path, _options(), progress.append)
    assert result.outcome == Outcome(Verdict.VIOLATION, "Small")
    assert result.exit_code == 12 and len(result.trace) == 3
    assert result.seconds is not None and result.command[0] == find_java()
    assert progress and progress[-1].distinct == 8
    assert not list(spec_dir.glob("states")) and not list(spec_dir.glob("*_TTrace_*"))


@pytest.mark.tlc
def test_run_tlc_parallel_runs(spec_dir: Path) -> None:
    """Parallel TLC processes do not trip over each other (own tmpdir and metadir each)."""
    from concurrent.futures import ThreadPoolExecutor

    config = load_config(spec_dir, "CounterOk")
    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda _: run_tlc(config.module_path, config.path, _options()), "abc"))
    assert [r.outcome.verdict for r in runs] == [Verdict.OK] * 3


@pytest.mark.tlc
def test_run_tlc_class_archive(spec_dir: Path, tmp_path: Path) -> None:
    """The first short run writes a class-data-sharing archive, later runs load it; a broken
    archive is ignored without a word, and the verdict never changes."""
    config = load_config(spec_dir, "CounterBug")
    options = _options(class_archives=tmp_path / "cds")
    first = run_tlc(config.module_path, config.path, options)
    archives = list((tmp_path / "cds").glob("tlc-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 0
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in first.command)
    second = run_tlc(config.module_path, config.path, options)
    assert f"-XX:SharedArchiveFile={archives[0]}" in second.command
    archives[0].write_bytes(b"not an archive")
    third = run_tlc(config.module_path, config.path, options)
    for result in (first, second, third):
        assert result.outcome == Outcome(Verdict.VIOLATION, "Small")
        assert len(result.trace) == 3 and "cds" not in result.output


@pytest.mark.tlc
def test_shipped_jar_keeps_its_class_archive(spec_dir: Path, tmp_path: Path) -> None:
    """A jar shipped to a new directory in each Spark application runs from one settled path,
    so the second application's TLC maps the archive the first one's wrote."""
    cds, commands = tmp_path / "cds", []
    for application in ("app-1", "app-2"):
        shipped = tmp_path / application / "tla2tools.jar"
        shipped.parent.mkdir()
        shipped.write_bytes(find_tla2tools().read_bytes())  # a new path and mtime each time
        jar = settled_jar(shipped, cds)
        assert jar.parent.parent == cds / "jars" and jar.read_bytes() == shipped.read_bytes()
        config = load_config(spec_dir, "CounterBug")
        options = TlcOptions(java=find_java(), jar=jar, class_archives=cds)
        commands.append(run_tlc(config.module_path, config.path, options).command)
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in commands[0])
    assert any(a.startswith("-XX:SharedArchiveFile=") for a in commands[1])
    assert len(list(cds.glob("tlc-*.jsa"))) == 1


def test_settled_jar_without_a_cache(tmp_path: Path) -> None:
    """No directory, or one that cannot be written: the shipped jar itself."""
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"jar")
    assert settled_jar(jar, None) == jar
    (tmp_path / "file").write_text("not a directory")
    assert settled_jar(jar, tmp_path / "file") == jar


@pytest.mark.tlc
def test_run_tlc_time_limit(spec_dir: Path) -> None:
    """The time limit kills the JVM's process group; the verdict is a timeout."""
    config = load_config(spec_dir, "Slow")
    result = run_tlc(config.module_path, config.path, _options(time_limit=1.5))
    assert result.outcome == Outcome(Verdict.TIMEOUT)
    assert result.message == "time limit of 1.5s reached"
    assert result.seconds is not None and result.seconds < 10


@pytest.mark.tlc
def test_run_tlc_without_java(spec_dir: Path) -> None:
    """A Java that cannot start gives the java-missing verdict, not an exception."""
    config = load_config(spec_dir, "CounterOk")
    options = TlcOptions(java="/nonexistent/java", jar=find_tla2tools())
    result = run_tlc(config.module_path, config.path, options)
    assert result.outcome == Outcome(Verdict.JAVA_MISSING)
    assert "/nonexistent/java" in result.message


@pytest.mark.tlc
def test_run_tlc_with_a_java_that_is_not_java(spec_dir: Path, tmp_path: Path) -> None:
    """A program that prints nothing and fails is a TLC crash, with its stderr as the reason."""
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'Error: could not create the Java VM' >&2\nexit 1\n")
    os.chmod(fake, 0o755)
    config = load_config(spec_dir, "CounterOk")
    result = run_tlc(config.module_path, config.path, TlcOptions(java=str(fake), jar=fake))
    assert result.outcome == Outcome(Verdict.CRASH)
    assert result.message == "Error: could not create the Java VM"
