"""Golden traces: TLC's counterexamples replay step by step on the implementation.

Each file in traces/golden/ is a counterexample `kreplica check` wrote for a config of spec/.
Replayed on the implementation under the same variant (read from that config), every state
must match, and the implementation must break the invariant the config expects broken.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kreplica.conformance.replay.trace import replay_trace, setup_from_config
from kreplica.conformance.tla.itf import read_trace
from kreplica.conformance.tla.specs import load_config, resolve_spec_dir

GOLDEN = sorted((Path(__file__).parent.parent / "traces" / "golden").glob("*.itf.json"))
SPEC = resolve_spec_dir(None)


def test_there_are_golden_traces() -> None:
    names = {p.name.removesuffix(".itf.json") for p in GOLDEN}
    assert {"S1_HwTruncation", "S2_HwDivergence", "S3_Kip101FastFailover"} <= names
    assert {"S12_UncleanElection", "Acks1Loss", "FencingOff", "S14_DeletedOffsetReread"} <= names


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name.removesuffix(".itf.json"))
def test_golden_trace_replays_on_the_implementation(path: Path) -> None:
    trace = read_trace(path)
    name = trace.meta["config"]
    result = replay_trace(trace, setup_from_config(SPEC / f"{name}.cfg"))
    assert result.conforms, f"step {result.step} {result.action}: {result.reason}"
    invariant = load_config(SPEC, name).expect.name or ""
    if not invariant.startswith("Never"):  # witnesses are reachability, not safety
        assert invariant in {v for v, _ in result.violations}


def test_a_corrupted_golden_trace_is_pinpointed(tmp_path: Path) -> None:
    """Change one logged value: replay names that step and that variable."""
    trace = read_trace(GOLDEN[0].parent / "S1_HwTruncation.itf.json")
    state = trace.states[5]
    state.values["hw"] = tuple(h + 7 for h in state.values["hw"])
    result = replay_trace(trace, setup_from_config(SPEC / "S1_HwTruncation.cfg"))
    assert not result.conforms
    assert result.step == 5
    assert [d.variable for d in result.differences] == ["hw"]
