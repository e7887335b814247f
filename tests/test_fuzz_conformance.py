"""Every trace `kreplica fuzz` records on the correct protocol conforms to the spec (real TLC).

A small campaign with every fault on (crashes, power losses, elections, lost and duplicated
messages, network partitions) and producers that mix acks=-1 with acks=0 is recorded with
`kreplica fuzz --corpus`, then checked with `kreplica conform --no-spark`: one rejected trace
is a divergence between the spec and the implementation (as projected and recorded) that the
random walks of tests/test_trace_conformance.py do not reach (docs/vocabulary.md).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kreplica.conformance.cli.main import main

pytestmark = pytest.mark.tlc

RECEIVING = frozenset(
    {
        "LeaderHandleFetch",
        "FollowerHandleFetchResponse",
        "LeaderHandleOffsetsForLeaderEpoch",
        "FollowerHandleOffsetsForLeaderEpochResponse",
        "LeaderHandleListOffsets",
        "FollowerHandleListOffsetsResponse",
        "BecomeLeaderOrFollower",
        "LoseMessage",
    }
)
"""The actions that take a message out of the network (unless a copy of it stays)."""


def cli(*args: str) -> Result:
    """Run `kreplica ARGS` in this process."""
    return CliRunner().invoke(main, list(args))


def traces(corpus: Path) -> list[dict[str, Any]]:
    """The corpus's traces, as JSON."""
    return [json.loads(line) for line in corpus.read_text().splitlines()]


def fired_and_forgot(trace: dict[str, Any]) -> bool:
    """Some producer sent acks=0."""
    return any(
        s["#meta"].get("action") == "Produce" and s["#meta"]["args"]["acks"] == 0
        for s in trace["states"]
    )


def copy_stayed(trace: dict[str, Any]) -> bool:
    """Some message was received while a copy of it stayed in flight: a duplicate."""
    states = trace["states"]
    for before, after in itertools.pairwise(states):
        if after["#meta"].get("action") in RECEIVING and all(
            m in after["msgs"]["#set"] for m in before["msgs"]["#set"]
        ):
            return True
    return False


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 fuzz runs of the correct protocol of up to 50 steps, every fault on, seed 4 (the
    first seed since the local partitions, 2026-11-27, whose runs take every action the test
    below looks for; `--stages correct`: the correct protocol's campaign alone, as `kreplica
    fuzz` ran it before its default campaign had a stage per variant)."""
    out = tmp_path_factory.mktemp("fuzz")
    path = out / "corpus.jsonl"
    result = cli(
        "fuzz", "--stages", "correct", "--examples", "40", "--steps", "50", "--seed", "4",
        "--corpus", str(path), "--out", str(out / "failure"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return path


def started_at_log_start(trace: dict[str, Any]) -> bool:
    """Some follower dropped its log to start it at its leader's log start offset (R9): after
    a FollowerHandleListOffsetsResponse its log holds nothing but deleted offsets."""
    for state in trace["states"]:
        if state["#meta"].get("action") == "FollowerHandleListOffsetsResponse":
            f = state["#meta"]["args"]["replica"]
            log = state["log"][f - 1]
            if log and all(entry["record"] == 0 for entry in log):
                return True
    return False


def test_the_corpus_has_duplicates_acks_0_partitions_and_deletions(corpus: Path) -> None:
    """The campaign exercises what the random walks do not."""
    found = traces(corpus)
    assert len(found) >= 30
    assert all("isolate" in t["#meta"]["faults"] for t in found)
    assert any(fired_and_forgot(t) for t in found)
    assert any(copy_stayed(t) for t in found)
    actions = {s["#meta"].get("action") for t in found for s in t["states"]}
    assert {"DeleteRecords", "LeaderHandleListOffsets", "FailLogDir"} <= actions
    assert any(started_at_log_start(t) for t in found)


def test_every_fuzz_trace_conforms(corpus: Path, tmp_path: Path) -> None:
    """kreplica conform: every trace of the campaign conforms (exit code 0)."""
    result = cli(
        "conform", str(corpus), "--no-spark", "--workers", "1", "--out", str(tmp_path / "res"),
        "--fetch-max-records", "2",
    )  # fmt: skip
    rows = [
        json.loads(line) for line in (tmp_path / "res" / "results.json").read_text().splitlines()
    ]
    rejected = [
        f"{r['trace_id']}: step {r['step']} {r['action']} {r['args']}: {r['reason']} {r['diff']}"
        for r in rows
        if r["verdict"] != "conforms"
    ]
    assert rejected == []
    assert len(rows) == len(traces(corpus))
    assert result.exit_code == 0, result.output


def refused_for_few_replicas(trace: dict[str, Any]) -> bool:
    """Some acks=-1 produce to a leader alone in its ISR left the leader's log as it was:
    NOT_ENOUGH_REPLICAS under min.insync.replicas 2 (its log dir still working)."""
    for before, after in itertools.pairwise(trace["states"]):
        meta = after["#meta"]
        if meta.get("action") == "Produce" and meta["args"]["acks"] == -1:
            leader = meta["args"]["replica"]
            alone = len(before["isr"][leader - 1]["#set"]) < 2
            working = leader not in before["logDirOffline"]["#set"]
            if alone and working and before["log"][leader - 1] == after["log"][leader - 1]:
                return True
    return False


def test_durable_runs_are_checked_under_their_own_min_isr(tmp_path: Path) -> None:
    """Half the runs of three replicas take Kafka's durable set-up (min.insync.replicas 2);
    each trace records its value, and `kreplica conform` checks it under that MinIsr: the
    durable runs whose producers were refused for too small an ISR conform as recorded, and
    are rejected when relabelled as runs with 1 (R14). (Seed 0's 80 runs hold such
    refusals.)"""
    path = tmp_path / "corpus.jsonl"
    result = cli(
        "fuzz", "--stages", "correct", "--examples", "80", "--steps", "40", "--seed", "0",
        "--no-shrink",
        "--corpus", str(path), "--out", str(tmp_path / "f"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    found = traces(path)
    durable = [t for t in found if t["#meta"]["min_insync_replicas"] == 2]
    assert durable and len(durable) < len(found)
    refused = [t for t in durable if refused_for_few_replicas(t)]
    assert refused
    as_recorded, relabelled = tmp_path / "refused.jsonl", tmp_path / "as-if-min-isr-1.jsonl"
    as_recorded.write_text("".join(json.dumps(t) + "\n" for t in refused))
    relabelled.write_text(
        "".join(
            json.dumps({**t, "#meta": {**t["#meta"], "min_insync_replicas": 1}}) + "\n"
            for t in refused
        )
    )
    result = cli(
        "conform", str(as_recorded), "--no-spark", "--workers", "1", "--out", str(tmp_path / "a")
    )
    assert result.exit_code == 0, result.output
    result = cli(
        "conform", str(relabelled), "--no-spark", "--workers", "1", "--out", str(tmp_path / "r")
    )
    assert result.exit_code == 1, result.output
    rows = [json.loads(line) for line in (tmp_path / "r" / "results.json").read_text().splitlines()]
    assert len(rows) == len(refused)
    assert all(r["verdict"] == "violates" for r in rows)
    # the first step MinIsr decides: the refusal, or an earlier produce completed without
    # an ack when the ISR shrank below it (NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert "Produce" in {r["action"] for r in rows}


def test_a_variants_out_of_range_reset_conforms(tmp_path: Path) -> None:
    """truncation=hw (pre-KIP-101): a follower that truncated to its HW fetches past a new
    leader's LEO, gets OFFSET_OUT_OF_RANGE and resets with LIST_OFFSETS (R9), sent at once as
    Kafka's fetcher thread makes the call; the variant's traces conform to the spec under the
    same variant. (Seed 0 is one whose 60 runs take the reset.)"""
    path = tmp_path / "hw.jsonl"
    result = cli(
        "fuzz", "--variant", "truncation=hw", "--no-invariants", "--examples", "60",
        "--steps", "40", "--seed", "0", "--corpus", str(path), "--out", str(tmp_path / "f"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    actions = [s["#meta"].get("action") for t in traces(path) for s in t["states"]]
    assert "FollowerHandleListOffsetsResponse" in actions
    result = cli(
        "conform", str(path), "--variant", "truncation=hw", "--no-spark", "--workers", "1",
        "--out", str(tmp_path / "res"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
