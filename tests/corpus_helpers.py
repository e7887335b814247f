"""Helpers the conformance tests share: small random-walk corpora of the correct protocol, and
TLC as `kreplica conform` runs it."""

from __future__ import annotations

import json
from pathlib import Path

from kreplica.conformance.fuzz.random_walk import corpus
from kreplica.conformance.tla.itf import dumps_trace
from kreplica.conformance.tla.tlc import TlcOptions, find_java, find_tla2tools
from kreplica.conformance.validate.tracecheck import trace_tlc_options
from kreplica.impl.variants import Variant


def walks(n: int, steps: int, seed: int = 7) -> list[str]:
    """`n` random-walk traces of the correct protocol, one JSON line each."""
    return [
        json.dumps(json.loads(dumps_trace(t)))
        for t in corpus(n, steps, seed, Variant(), replicas=3)
    ]


def write_corpus(path: Path, lines: list[str]) -> Path:
    """`lines` as a JSON-lines corpus at `path`."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


REJECTED = (
    Path(__file__).resolve().parent.parent
    / "traces"
    / "regressions"
    / ("bug-hw-not-clamped-r3-s3.itf.json")
)
"""A trace `kreplica conform` rejects (recorded with the seeded bug hw-not-clamped): at step 7
a follower takes its leader's HW beyond its own log end."""


def trace_tlc(time_limit: float = 300) -> TlcOptions:
    """TLC as `kreplica conform` runs a batch (`tracecheck.trace_tlc_options`), so a test's own
    checking costs what the command's does."""
    return trace_tlc_options(find_java(), find_tla2tools(), time_limit)
