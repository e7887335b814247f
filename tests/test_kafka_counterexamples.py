"""TLC's real output for the project's own spec, parsed into ITF traces.

The fixtures in tests/fixtures/tlc/kafka/ are TLC's `-tool` stdout for two configs of
spec/KafkaReplication.tla (one worker, so the trace is the shortest and deterministic).
`test_fixture_matches_a_live_run` re-runs TLC to keep them honest when the spec changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kreplica.conformance.tla.itf import from_itf
from kreplica.conformance.tla.specs import load_config, resolve_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions, find_java, find_tla2tools, run_tlc
from kreplica.conformance.tla.tlc_output import parse_tlc_output

FIXTURES = Path(__file__).parent / "fixtures" / "tlc" / "kafka"

ACKS1_STEPS = [
    ("Init", {}),
    ("Produce", {"record": 1, "replica": 1, "acks": 1}),
    ("ControllerElectLeader", {"replica": 2}),
    ("BecomeLeaderOrFollower", {"leader": 2, "epoch": 1, "replica": 2}),
]

KAFKA_7164_STEPS = [
    ("Init", {}),
    ("Produce", {"record": 1, "replica": 1, "acks": -1}),
    ("LeaderShrinkIsr", {"replica": 1, "followers": frozenset({2})}),
    ("FollowerTruncateToHighWatermark", {"leader": 1, "replica": 2}),
    ("LeaderHandleFetch", {"replica": 1, "offset": 0, "follower": 2}),
    ("UncleanShutdown", {"replica": 1}),
    ("Restart", {"replica": 1}),  # a bounce: offline in epoch 1, replica 1 re-elected in 2
    ("BecomeLeaderOrFollower", {"leader": 1, "epoch": 2, "replica": 1}),
    ("FollowerHandleFetchResponse", {"leader": 1, "replica": 2}),
    ("BecomeLeaderOrFollower", {"leader": 1, "epoch": 2, "replica": 2}),
]


def itf_of(name: str) -> Any:
    """The ITF trace of one recorded counterexample (the `action` variable lifted to #meta)."""
    result = parse_tlc_output((FIXTURES / f"{name}.out").read_text(), exit_code=12)
    trace = result.to_itf({"config": name})
    assert trace is not None
    return trace


def steps(trace: Any) -> list[tuple[str, dict[str, int]]]:
    """(action, args) of every state."""
    return [(s.action, dict(s.args)) for s in trace.states]


def test_acks1_loss_trace() -> None:
    trace = itf_of("Acks1Loss")
    assert steps(trace) == ACKS1_STEPS
    assert "action" not in trace.vars
    last = trace.states[-1].values
    # Record 1 was acked by replica 1 alone; replica 2 now leads epoch 2 with an empty log.
    assert last["acked"] == frozenset({1})
    assert last["ctrlLeader"] == 2 and last["ctrlEpoch"] == 1
    assert last["log"] == (({"epoch": 0, "record": 1},), ())


def test_kafka_7164_trace() -> None:
    trace = itf_of("BugSkipSameLeaderTruncation")
    assert steps(trace) == KAFKA_7164_STEPS
    last = trace.states[-1].values
    # Follower 2 kept record 1, which the leader lost in its unclean shutdown, and is fetching:
    # the leader is unchanged, so the seeded bug skipped its truncation.
    assert last["log"] == ((), ({"epoch": 0, "record": 1},))
    assert last["fetchState"] == ("Idle", "Fetching")
    assert last["leaderEpoch"] == (2, 2)


def test_itf_json_round_trip() -> None:
    trace = itf_of("BugSkipSameLeaderTruncation")
    encoded = trace.to_json()
    assert encoded["states"][0]["#meta"] == {"index": 0, "action": "Init", "args": {}}
    assert encoded["states"][4]["#meta"]["args"] == {"replica": 1, "offset": 0, "follower": 2}
    assert encoded["states"][2]["#meta"]["args"]["followers"] == {"#set": [2]}
    # Message sets survive the trip through ITF.
    msgs = from_itf(encoded["states"][4]["msgs"])
    assert {m["type"] for m in msgs} == {"FetchResponse"}


@pytest.mark.tlc
@pytest.mark.parametrize("name", ["Acks1Loss", "BugSkipSameLeaderTruncation"])
def test_fixture_matches_a_live_run(name: str) -> None:
    spec_dir = resolve_spec_dir(None)
    config = load_config(spec_dir, name)
    options = TlcOptions(java=find_java(), jar=find_tla2tools(), workers=1)
    live = run_tlc(config.module_path, config.path, options).to_itf({"config": name})
    assert live is not None
    assert steps(live) == steps(itf_of(name))
    assert [s.values for s in live.states] == [s.values for s in itf_of(name).states]
