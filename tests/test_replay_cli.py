"""`kreplica replay`: verdicts, pinpointing, and every kind of bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner, Result

from kreplica.conformance.cli.main import main
from kreplica.conformance.replay.trace import SPEC_ACTIONS

ROOT = Path(__file__).parent.parent
S1 = ROOT / "traces" / "golden" / "S1_HwTruncation.itf.json"


def replay(*args: str) -> Result:
    """Run `kreplica replay ARGS` in-process."""
    return CliRunner().invoke(main, ["replay", *args])


def edited(tmp_path: Path, change: dict[str, object] | None = None, text: str | None = None) -> str:
    """A copy of the S1 golden trace, with one change, as a file path."""
    path = tmp_path / "t.itf.json"
    if text is None:
        data = json.loads(S1.read_text())
        for where, value in (change or {}).items():
            index, key = where.split(":")
            data["states"][int(index)]["#meta" if key == "action" else key] = value
        text = json.dumps(data)
    path.write_text(text)
    return str(path)


def test_the_spec_and_the_replayer_name_the_same_actions() -> None:
    spec = (ROOT / "spec" / "KafkaReplication.tla").read_text()
    assert set(re.findall(r'Act\("([A-Za-z]+)"', spec)) == SPEC_ACTIONS


def test_a_golden_trace_conforms() -> None:
    result = replay(str(S1))
    assert result.exit_code == 0, result.output
    assert "conforms: 12 steps" in result.stdout
    assert "breaks AckedRecordsNeverLost" in result.stdout


def test_the_same_trace_under_kip279_differs_where_truncation_does() -> None:
    result = replay(str(S1), "--variant", "truncation=kip279")
    assert result.exit_code == 1
    assert "differs at step 11 (FollowerTruncateToHighWatermark" in result.stdout


def test_a_changed_value_is_reported_with_expected_and_got(tmp_path: Path) -> None:
    result = replay(edited(tmp_path, {"4:nextRecord": 9}))
    assert result.exit_code == 1
    assert "differs at step 4" in result.stdout and "nextRecord" in result.stdout


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: str(tmp / "missing.itf.json"), "no such file"),
        (lambda tmp: edited(tmp, text='{"vars": ["log"], "states": ['), "truncated"),
        (lambda tmp: edited(tmp, text='{"hello": 1}'), "ITF"),
        (lambda tmp: edited(tmp, text="not json"), "JSON"),
        (
            lambda tmp: edited(tmp, {"3:action": {"index": 3, "action": "Teleport", "args": {}}}),
            "unknown action 'Teleport'",
        ),
    ],
    ids=["missing", "truncated", "not-itf", "not-json", "unknown-action"],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, make: object, message: str) -> None:
    result = replay(make(tmp_path))  # type: ignore[operator]
    assert result.exit_code == 2
    assert message in one_error_line(result)


def test_an_unknown_variable_is_bad_input(tmp_path: Path) -> None:
    data = json.loads(S1.read_text())
    data["vars"].append("wormholes")
    for state in data["states"]:
        state["wormholes"] = 0
    result = replay(edited(tmp_path, text=json.dumps(data)))
    assert result.exit_code == 2
    assert "unknown variable 'wormholes'" in one_error_line(result)


def test_an_unknown_variant_is_bad_input() -> None:
    result = replay(str(S1), "--bug", "gremlins")
    assert result.exit_code == 2
    assert "unknown bug 'gremlins'" in one_error_line(result)


def test_the_help_documents_every_exit_code() -> None:
    result = replay("--help")
    assert result.exit_code == 0
    for code in ("0  the implementation conforms", "1  it does not", "2  bad input", "4  a step"):
        assert code in result.stdout, result.stdout
