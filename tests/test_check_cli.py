"""`kreplica check` end to end on the toy spec, every bad input, and the spec-dir contract."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner, Result

from kreplica.conformance.cli.main import main
from kreplica.conformance.errors import SpecError
from kreplica.conformance.tla import suite as suite_module
from kreplica.conformance.tla.itf import read_trace
from kreplica.conformance.tla.specs import (
    default_spec_dir,
    load_config,
    load_suites,
    parse_header,
    resolve_spec_dir,
    select_configs,
)
from kreplica.conformance.tla.suite import CheckRow, exit_code
from kreplica.conformance.tla.tlc import TlcOptions
from kreplica.conformance.tla.tlc_output import Outcome, TlcResult, Verdict
from kreplica.conformance.validate.locks import lock_output


def check(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run `kreplica check ARGS` in-process."""
    return CliRunner().invoke(main, ["check", *args], env=env)


# ---------------------------------------------------------------- good runs


@pytest.mark.tlc
def test_ci_suite(spec_dir: Path, tmp_path: Path) -> None:
    """The ci suite: table, summary, counterexamples, markdown and JSON reports, exit 0."""
    out, report, js = tmp_path / "ce", tmp_path / "r" / "report.md", tmp_path / "r.json"
    args = ["--spec-dir", str(spec_dir), "--jobs", "3", "--out", str(out)]
    result = check(*args, "--report", str(report), "--json", str(js))
    assert result.exit_code == 0, result.output
    assert "3 configs, 3 as expected" in result.stdout
    assert "violation Small" in result.stdout and result.stderr == ""
    assert sorted(p.name for p in out.iterdir()) == ["CounterBug.itf.json", "Deadlock.itf.json"]
    trace = read_trace(out / "CounterBug.itf.json")
    assert [s.action for s in trace.states] == ["Init", "Inc", "Inc"]
    assert trace.meta["verdict"] == "violation Small"
    md = report.read_text()
    assert "| CounterBug | the counter reaches 3 when Max = 4 | Max=4, 2 replicas |" in md
    assert "`kreplica check --config CounterBug --spec-dir " in md
    data = json.loads(js.read_text())
    assert data["summary"] == {"configs": 3, "as_expected": 3, "exit_code": 0}
    run = data["run"]
    assert run["started"] < run["finished"] and run["command"]  # in-process: pytest's argv
    assert set(run["spec_sha256"]) >= {"Counter.tla", "CounterBug.cfg", "CounterOk.cfg"}
    assert all(len(h) == 64 for h in run["spec_sha256"].values())
    assert run["kreplica_version"] != ""
    row = data["results"][0]
    assert (row["config"], row["got"], row["states"], row["distinct"]) == (
        "CounterOk",
        "ok",
        97,
        48,
    )


@pytest.mark.tlc
def test_a_config_with_every_core_runs_alone_first(spec_dir: Path, tmp_path: Path) -> None:
    """A config whose header says `cores: all` is checked before the others, by itself, with
    a TLC worker per job (the real TLC runs, its options observed); the rows keep the suite's
    order."""
    spec = tmp_path / "spec"
    shutil.copytree(spec_dir, spec)
    bug = spec / "CounterBug.cfg"
    bug.write_text("\\* cores: all\n" + bug.read_text())
    started: list[tuple[str, int]] = []
    real = suite_module.run_tlc

    def recording(module: Path, config: Path, options: TlcOptions, *rest: Any) -> TlcResult:
        started.append((config.stem, options.workers))
        return real(module, config, options, *rest)

    args = ["--spec-dir", str(spec), "--jobs", "2", "--out", str(tmp_path / "ce")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suite_module, "run_tlc", recording)
        result = check(*args, "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert started[0] == ("CounterBug", 2)
    assert sorted(started[1:]) == [("CounterOk", 1), ("Deadlock", 1)]
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    assert [r["config"] for r in rows] == ["CounterOk", "CounterBug", "Deadlock"]
    assert rows[1]["got"] == "violation Small"


def test_a_second_check_into_the_same_out_fails_at_once(spec_dir: Path, tmp_path: Path) -> None:
    """Two checks into one --out would interleave their counterexamples: the second is refused
    in one line, naming the first's pid, before it checks anything."""
    out = tmp_path / "ce"
    held = lock_output(tmp_path / "ce.lock", out, "check")  # the first run's hold on it
    try:
        result = check("--spec-dir", str(spec_dir), "--config", "CounterBug", "--out", str(out))
    finally:
        os.close(held)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line == f"kreplica: error: {out} is in use by another kreplica check (pid {os.getpid()})"
    assert not out.exists()


@pytest.mark.tlc
def test_unexpected_verdict_exits_1(spec_dir: Path, tmp_path: Path) -> None:
    """A config that gets another verdict than it expects: exit 1 and one line saying so."""
    result = check(
        "--spec-dir", str(spec_dir), "--config", "CounterSurprise", "--out", str(tmp_path)
    )
    assert result.exit_code == 1
    assert one_error_line(result) == (
        "kreplica: CounterSurprise: expected ok, got violation Small: Invariant Small is violated."
    )
    assert (tmp_path / "CounterSurprise.itf.json").is_file()


@pytest.mark.tlc
def test_stale_counterexample_is_removed(spec_dir: Path, tmp_path: Path) -> None:
    """A config that passes now loses the counterexample file of an earlier run."""
    stale = tmp_path / "CounterOk.itf.json"
    stale.write_text("{}")
    result = check("--spec-dir", str(spec_dir), "--config", "CounterOk.cfg", "--out", str(tmp_path))
    assert result.exit_code == 0 and not stale.exists()


@pytest.mark.tlc
@pytest.mark.parametrize("name", ["Syntax", "BadCfg", "EvalError"])
def test_a_check_that_did_not_complete_keeps_the_older_counterexample(
    spec_dir: Path, tmp_path: Path, name: str
) -> None:
    """A parse error, a bad config or an evaluation error says nothing about whether the config
    still violates: the counterexample of an earlier run stays."""
    older = tmp_path / f"{name}.itf.json"
    older.write_text('{"older": "run"}')
    result = check("--spec-dir", str(spec_dir), "--config", name, "--out", str(tmp_path))
    assert result.exit_code == 2
    assert older.read_text() == '{"older": "run"}'


@pytest.mark.tlc
def test_other_verdicts(spec_dir: Path, tmp_path: Path) -> None:
    """Temporal properties and assumptions can be expected too."""
    names = ["--config", "Liveness", "--config", "Assume", "--config", "Values"]
    result = check("--spec-dir", str(spec_dir), *names, "--out", str(tmp_path), "--jobs", "3")
    assert result.exit_code == 0, result.output
    assert "3 configs, 3 as expected" in result.stdout
    assert read_trace(tmp_path / "Liveness.itf.json").loop == 2


# ---------------------------------------------------------------- bad input: exit 2


def test_unknown_config(spec_dir: Path) -> None:
    """An unknown config name is one line listing the known ones."""
    result = check("--spec-dir", str(spec_dir), "--config", "Nope")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith(f"kreplica: error: unknown config 'Nope' in {spec_dir} (known: Assume,")


def test_unknown_suite(spec_dir: Path) -> None:
    """An unknown suite is one line listing the known ones."""
    result = check("--spec-dir", str(spec_dir), "--suite", "nightly")
    assert result.exit_code == 2
    expected = "kreplica: error: unknown suite 'nightly' (known: broken, ci, full, typo)"
    assert one_error_line(result) == expected


def test_suite_naming_a_missing_config(spec_dir: Path) -> None:
    """A suite that lists a config that does not exist fails before running anything."""
    result = check("--spec-dir", str(spec_dir), "--suite", "typo")
    assert result.exit_code == 2
    assert "unknown config 'NoSuchConfig'" in one_error_line(result)


@pytest.mark.tlc
def test_spec_that_does_not_parse(spec_dir: Path, tmp_path: Path) -> None:
    """A parse error in the module: exit 2, one line with SANY's reason."""
    result = check("--spec-dir", str(spec_dir), "--config", "Syntax", "--out", str(tmp_path))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith("kreplica: error: Syntax: parse-error: ")
    assert 'Encountered "0" at line 4, column 15' in line


@pytest.mark.tlc
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("BadCfg", "configuration file at line 10"),
        ("UndefinedInvariant", "The invariant NoSuchInvariant specified in the configuration"),
    ],
)
def test_bad_cfg(spec_dir: Path, tmp_path: Path, name: str, reason: str) -> None:
    """A config TLC rejects: exit 2, one line with TLC's reason."""
    result = check("--spec-dir", str(spec_dir), "--config", name, "--out", str(tmp_path))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith(f"kreplica: error: {name}: config-error: ") and reason in line


@pytest.mark.tlc
def test_eval_error_and_unexpected_together(spec_dir: Path, tmp_path: Path) -> None:
    """When one config cannot be checked and another is unexpected, exit 2 wins."""
    names = ["--config", "EvalError", "--config", "CounterSurprise"]
    result = check("--spec-dir", str(spec_dir), *names, "--out", str(tmp_path), "--jobs", "2")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("kreplica: error: EvalError: eval-error: Attempted to apply")
    assert lines[1].startswith("kreplica: CounterSurprise: expected ok")


def test_a_report_never_overwrites_a_page_that_is_not_a_report(
    spec_dir: Path, tmp_path: Path
) -> None:
    """`--report docs/model-checking.md` would have replaced the narrative doc with a table."""
    page = tmp_path / "model-checking.md"
    page.write_text("# Model checking\n\nprose a person wrote\n")
    args = ["--config", "CounterBug", "--out", str(tmp_path / "ce"), "--report", str(page)]
    result = check("--spec-dir", str(spec_dir), *args)
    assert result.exit_code == 2
    assert one_error_line(result).startswith(f"kreplica: error: refusing to overwrite {page}: ")
    assert page.read_text() == "# Model checking\n\nprose a person wrote\n"


@pytest.mark.tlc
def test_a_report_replaces_an_older_report(spec_dir: Path, tmp_path: Path) -> None:
    report = tmp_path / "table.md"
    args = ["--config", "CounterOk", "--out", str(tmp_path / "ce"), "--report", str(report)]
    assert check("--spec-dir", str(spec_dir), *args).exit_code == 0
    first = report.read_text()
    assert check("--spec-dir", str(spec_dir), *args).exit_code == 0
    assert report.read_text().splitlines()[0] == first.splitlines()[0]


@pytest.mark.parametrize("option", ["--out", "--report", "--json"])
def test_an_unwritable_output_is_one_line_before_any_checking(
    spec_dir: Path, tmp_path: Path, option: str
) -> None:
    """An output path that cannot be written is one line, exit 2, and nothing is checked: no
    table on stdout (a long run would otherwise end with its results lost)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    where = ["--out", str(tmp_path / "ce")] if option != "--out" else []
    args = [*where, option, str(blocker / "x")]
    result = check("--spec-dir", str(spec_dir), "--config", "CounterBug", *args)
    assert result.exit_code == 2
    assert one_error_line(result).startswith("kreplica: error: cannot write ")
    assert one_error_line(result).endswith(f"{blocker / 'x'}: {blocker} is not a directory")
    assert result.stdout == ""


@pytest.mark.parametrize("how", ["option", "env"])
def test_java_missing(spec_dir: Path, how: str) -> None:
    """No Java: one line saying how to get it, exit 2, before anything runs."""
    if how == "option":
        result = check("--spec-dir", str(spec_dir), "--java", "/nonexistent")
    else:
        result = check("--spec-dir", str(spec_dir), env={"KREPLICA_JAVA": "/nonexistent"})
    assert result.exit_code == 2
    assert one_error_line(result) == (
        "kreplica: error: Java not found: '/nonexistent' is not an executable; install Java 17 "
        "(e.g. apt-get install openjdk-17-jre-headless) or pass --java"
    )


def test_jar_missing(spec_dir: Path, tmp_path: Path) -> None:
    """A --jar that does not exist is one line too."""
    result = check("--spec-dir", str(spec_dir), "--jar", str(tmp_path / "x.jar"))
    assert result.exit_code == 2
    assert one_error_line(result) == f"kreplica: error: tla2tools.jar not found: {tmp_path}/x.jar"


def test_apalache_missing(spec_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither apalache-mc nor Docker: the documented line and exit 2."""
    monkeypatch.setenv("PATH", str(tmp_path))
    result = check("--spec-dir", str(spec_dir), "--checker", "apalache")
    assert result.exit_code == 2
    assert one_error_line(result) == (
        "kreplica: error: apalache-mc not found and no Docker engine is running; "
        "install Apalache or use --checker tlc"
    )


FAKE_APALACHE = """#!/bin/sh
for a in "$@"; do case $a in --out-dir=*) out=${a#--out-dir=};; esac; done
mkdir -p "$out/Counter.tla/run"
cat > "$out/Counter.tla/run/violation1.itf.json" <<'JSON'
{"vars": ["action", "x"], "states": [
  {"action": {"name": "Init", "args": []}, "x": 0},
  {"action": {"name": "Inc", "args": {"amount": 2}}, "x": {"#bigint": "3"}}]}
JSON
echo "State 1: state invariant 0 violated."
exit 12
"""


def test_apalache_counterexample(
    spec_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With apalache-mc on PATH (here a stand-in), its ITF counterexample is kept."""
    fake = tmp_path / "bin" / "apalache-mc"
    fake.parent.mkdir()
    fake.write_text(FAKE_APALACHE)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out"
    args = ["--checker", "apalache", "--config", "CounterBug", "--out", str(out)]
    result = check("--spec-dir", str(spec_dir), *args)
    assert result.exit_code == 0, result.output
    trace = read_trace(out / "CounterBug.itf.json")
    assert [(s.action, s.args) for s in trace.states] == [("Init", {}), ("Inc", {"amount": 2})]
    assert trace.vars == ["x"] and trace.meta["checker"] == "apalache"


def test_spec_dir_missing(tmp_path: Path) -> None:
    """A spec dir that does not exist."""
    result = check("--spec-dir", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert one_error_line(result) == f"kreplica: error: spec directory not found: {tmp_path}/nope"


def _spec(tmp_path: Path, cfg: str, suites: str | None = None, tla: bool = True) -> Path:
    """A one-config spec dir with the given config text."""
    (tmp_path / "M.cfg").write_text(cfg)
    if tla:
        (tmp_path / "M.tla").write_text("---- MODULE M ----\n====\n")
    if suites is not None:
        (tmp_path / "suites.toml").write_text(suites)
    return tmp_path


@pytest.mark.parametrize(
    ("cfg", "tla", "message"),
    [
        ("INIT Init\n", True, "no '\\* expect: ...' line in the header comment"),
        ("\\* expect: fine\nINIT Init\n", True, "bad 'expect' header: expected one of"),
        ("\\* expect: ok Inv\n", True, "bad 'expect' header: 'ok' takes no name"),
        ("\\* expect: ok\n\\* module: a-b\n", True, "bad 'module' header: 'a-b'"),
        ("\\* expect: ok\n\\* deadlock: maybe\n", True, "bad 'deadlock' header: 'maybe'"),
        ("\\* expect: ok\n\\* cores: two\n", True, "bad 'cores' header: 'two'"),
        ("\\* expect: ok\n", False, "module file M.tla not found"),
    ],
)
def test_bad_headers(tmp_path: Path, cfg: str, tla: bool, message: str) -> None:
    """Config headers that break the contract with the spec author are one line each."""
    spec = _spec(tmp_path, cfg, tla=tla)
    result = check("--spec-dir", str(spec), "--config", "M")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith("kreplica: error: ") and message in line


def test_the_full_suite_holds_the_ci_suite() -> None:
    """spec/suites.toml's full suite is the ci suite plus larger configs: a config added to
    the ci suite alone is checked by `make check-full` too (WitnessAckedOnNewLeader was not)."""
    suites = load_suites(default_spec_dir())
    assert set(suites["ci"]) <= set(suites["full"])


@pytest.mark.parametrize(
    ("suites", "message"),
    [
        (None, "suites.toml not found (name configs with --config instead)"),
        ("[suites.ci\n", "suites.toml: cannot read: "),
        ("suites = 3\n", "expected a [suites.<name>] table"),
        ("[suites.ci]\nconfigs = [1]\n", 'needs configs = ["Name", ...]'),
    ],
)
def test_bad_suites_file(tmp_path: Path, suites: str | None, message: str) -> None:
    """A missing or malformed suites.toml is one line."""
    spec = _spec(tmp_path, "\\* expect: ok\n", suites)
    result = check("--spec-dir", str(spec))
    assert result.exit_code == 2 and message in one_error_line(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--frob"], "kreplica: error: No such option '--frob'."),
        (["--frob"], "(see 'kreplica check --help')"),
        (["--jobs", "0"], "Invalid value for '--jobs': 0 is not in the range x>=1."),
        (["--checker", "spin"], "Invalid value for '--checker': 'spin' is not one of"),
    ],
)
def test_bad_options(args: list[str], message: str) -> None:
    """Bad options are one line and exit 2, like every other user mistake."""
    result = check(*args)
    assert result.exit_code == 2 and message in one_error_line(result)


def test_help_documents_exit_codes() -> None:
    """`kreplica check --help` lists the exit codes; `kreplica --help` lists `check`."""
    result = CliRunner().invoke(main, ["check", "--help"])
    assert result.exit_code == 0
    assert "Exit codes:" in result.stdout and "3  a time limit was hit" in result.stdout
    top = CliRunner().invoke(main, ["--help"])
    assert top.exit_code == 0 and "check" in top.stdout


# ---------------------------------------------------------------- time limit: exit 3


@pytest.mark.tlc
def test_time_limit(spec_dir: Path, tmp_path: Path) -> None:
    """A config that runs out of time: exit 3 and one line."""
    args = ["--config", "Slow", "--time-limit", "1", "--out", str(tmp_path)]
    result = check("--spec-dir", str(spec_dir), *args)
    assert result.exit_code == 3
    assert one_error_line(result) == "kreplica: Slow: timeout: time limit of 1s reached"
    assert "timeout" in result.stdout


# ---------------------------------------------------------------- pieces


def _row(spec_dir: Path, expect: str, got: Outcome) -> CheckRow:
    """A result row for exit-code tests."""
    config = load_config(spec_dir, "CounterOk")
    config = type(config)(**{**config.__dict__, "expect": Outcome.parse(expect)})
    return CheckRow(config, TlcResult(got), "cmd")


def test_exit_code_precedence(spec_dir: Path) -> None:
    """2 (could not check) beats 1 (unexpected) beats 3 (time limit) beats 0."""
    ok = _row(spec_dir, "ok", Outcome(Verdict.OK))
    bad = _row(spec_dir, "ok", Outcome(Verdict.VIOLATION, "X"))
    slow = _row(spec_dir, "ok", Outcome(Verdict.TIMEOUT))
    crash = _row(spec_dir, "ok", Outcome(Verdict.CRASH))
    assert exit_code([ok]) == 0
    assert exit_code([ok, slow]) == 3
    assert exit_code([slow, bad]) == 1
    assert exit_code([bad, slow, crash]) == 2


def test_parse_header() -> None:
    """Header lines are `\\* key: value` at the top; the first non-comment line ends them."""
    text = (
        "\\* expect: violation Inv\n\\*  About :  x: y  \n\n\\* plain comment\nINIT I\n\\* k: v\n"
    )
    assert parse_header(text) == {"expect": "violation Inv", "about": "x: y"}


def test_load_config_reads_the_header(spec_dir: Path) -> None:
    """The module, expectation, about, bounds and deadlock switch come from the header."""
    config = load_config(spec_dir, "CounterBug")
    assert (config.module, str(config.expect)) == ("Counter", "violation Small")
    assert config.bounds == "Max=4, 2 replicas" and not config.check_deadlock
    assert config.module_path == spec_dir / "Counter.tla"
    assert load_config(spec_dir, "Deadlock").check_deadlock
    assert load_config(spec_dir, "Syntax").module == "Syntax"


def test_select_configs(spec_dir: Path) -> None:
    """--config overrides the suite and duplicates collapse."""
    names = [c.name for c in select_configs(spec_dir, "ci")]
    assert names == ["CounterOk", "CounterBug", "Deadlock"]
    picked = select_configs(spec_dir, "nope", ["Values", "Values.cfg"])
    assert [c.name for c in picked] == ["Values"]
    with pytest.raises(SpecError):
        select_configs(spec_dir, "ci", ["../spec/Values"])


def test_spec_dir_resolution(
    spec_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--spec-dir, else $KREPLICA_SPEC_DIR, else spec/ beside the conformance package."""
    assert default_spec_dir() == Path(__file__).resolve().parent.parent / "spec"
    monkeypatch.setenv("KREPLICA_SPEC_DIR", str(spec_dir))
    assert resolve_spec_dir() == spec_dir
    assert resolve_spec_dir(tmp_path) == tmp_path.resolve()
    result = check("--config", "Nope")
    assert f"in {spec_dir} (known:" in one_error_line(result)


def test_console_script(spec_dir: Path) -> None:
    """The installed `kreplica` script: one stderr line and exit 2, no traceback."""
    script = Path(sys.executable).parent / "kreplica"
    if not script.exists():
        pytest.skip("the kreplica console script is not installed")
    done = subprocess.run(
        [str(script), "check", "--spec-dir", str(spec_dir), "--config", "Nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("kreplica: error: unknown")
