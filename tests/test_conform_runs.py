"""The TLC runs of a local input (`validate/runs.py`): traces of one kind checked in one TLC
process across batches, with the rows, the `--why` and the order every batch gave alone.

The laying out is held to the readers it replaces (`sources.iter_local`, `sources.read_share`)
on generated files; the rows of `kreplica conform`, pool and Spark, to those of checking each
batch on its own (`check_items`, as the runners did before the runs), on a corpus of two kinds
(min.insync.replicas 1 and 2) with rejections and more of them per batch than `--why` explains.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from corpus_helpers import REJECTED, trace_tlc, walks, write_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreplica.conformance.cli.main import main
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.validate.conform import SLACK, check_items
from kreplica.conformance.validate.results import iter_rows
from kreplica.conformance.validate.runs import (
    pool_batches,
    read_places,
    runs,
    scan,
    share_batches,
)
from kreplica.conformance.validate.sources import (
    Share,
    balanced_batch_size,
    iter_local,
    newlines,
    number_lines,
    plan,
    read_share,
)
from kreplica.conformance.validate.tlcdata import build_reader
from kreplica.conformance.validate.tracecheck import CheckSettings, SpecParams

LINES = st.lists(st.sampled_from(["", " ", '{"a": 1}', '{"hw":[0,0]}', "\xe9", "x" * 40]))
"""Corpus lines: blank ones (skipped, but counted), short and longer text, non-ASCII."""


def _files(root: Path, files: list[list[str] | None], bad: bool) -> list[Path]:
    """Corpora of `files` (None: an ITF file), then a line that is not UTF-8 and a missing
    file when `bad`."""
    paths = []
    for n, lines in enumerate(files):
        paths.append(root / (f"t{n}.itf.json" if lines is None else f"c{n}.jsonl"))
        paths[-1].write_text("{}" if lines is None else "\n".join(lines), encoding="utf-8")
    if bad:
        paths.append(root / "bad.jsonl")
        paths[-1].write_bytes(b'{"hw":[0]}\n\xff\xfe\n')
        paths.append(root / "missing.jsonl")
    return paths


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(files=st.lists(st.one_of(st.none(), LINES), max_size=5), bad=st.booleans())
def test_a_scan_reads_every_trace_as_the_pool_did(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[str] | None], bad: bool
) -> None:
    """The places of a scan read back as `iter_local` reads the files: the same ids, the same
    texts (an unreadable file or line says why in the same words), in the same order."""
    paths = _files(tmp_path_factory.mktemp("scan"), files, bad)
    places = scan(paths, 1)
    assert [p.number for p in places] == list(range(len(places)))
    assert list(zip([p.trace_id for p in places], read_places(places), strict=True)) == list(
        iter_local(paths)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    files=st.lists(st.one_of(st.none(), LINES), max_size=5),
    bad=st.booleans(),
    batch=st.integers(1, 5),
    workers=st.integers(1, 3),
)
def test_spark_batches_are_the_shares_read_and_cut_as_a_task_did(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[list[str] | None],
    bad: bool,
    batch: int,
    workers: int,
) -> None:
    """`share_batches` holds the traces each share of `plan` reads, cut into a task's batches."""
    paths = _files(tmp_path_factory.mktemp("shares"), files, bad)
    shares = _numbered(plan(paths, batch, workers))
    found = share_batches(shares, scan(paths, 1), batch, batch // SLACK)
    read = [[i for i, _ in read_share(share)] for share in shares]
    cut = [b for ids in read for b in _batches(ids, batch, batch // SLACK)]
    assert [[p.trace_id for p in b] for b in found] == cut


def _numbered(shares: list[Share]) -> list[Share]:
    """Shares with the line numbers of their ranges, as the runners numbered them."""
    return number_lines(shares, lambda segments: [newlines(*s) for s in segments])


def _batches(ids: list[str], size: int, slack: int) -> list[list[str]]:
    """`sources.batches` of ids."""
    from kreplica.conformance.validate.sources import batches

    return list(batches(ids, size, slack))


def _two_kinds(root: Path) -> list[Path]:
    """A corpus of 14 random walks, every third recorded with min.insync.replicas 2 (some of
    those the spec rejects: a produce a lone leader acknowledged), and a rejected ITF trace."""
    lines = []
    for n, line in enumerate(walks(14, 12, seed=3)):
        trace = json.loads(line)
        trace["#meta"]["min_insync_replicas"] = 2 if n % 3 == 0 else 1
        lines.append(json.dumps(trace))
    return [write_corpus(root / "c.jsonl", lines), REJECTED]


@pytest.fixture(scope="module")
def two_kinds(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """`_two_kinds`, written once for the module: the pool's test and Spark's check one corpus,
    whose batches are checked alone once (`_alone`)."""
    return _two_kinds(tmp_path_factory.mktemp("two-kinds"))


def test_a_run_holds_one_kind_and_every_trace_once(tmp_path: Path) -> None:
    """Runs of the two kinds: each of one kind, in the input's order, every trace in one."""
    places = scan(_two_kinds(tmp_path), 1)
    cut = runs(places, 4, 2)
    assert sorted(p.number for run in cut for p in run) == list(range(len(places)))
    assert all(len({p.kind for p in run}) == 1 for run in cut)
    assert all([p.number for p in run] == sorted(p.number for p in run) for run in cut)
    assert {len(run) for run in runs(places, 100, 1)} == {5, 10}  # one run a kind


REJECTING = ("--why", "1", "--fetch-max-records", "1")
"""The walks fetch two records at a time: checked against one at a time, many are rejected,
more than one a batch."""


def _expected(batches_: list[list[tuple[str, str]]], why: int) -> list[dict[str, Any]]:
    """The rows of checking each batch alone, as the runners did before the runs."""
    return [row for batch in batches_ for row in _alone(tuple(batch), why)]


@functools.cache
def _alone(batch: tuple[tuple[str, str], ...], why: int) -> list[dict[str, Any]]:
    """The rows of checking `batch` alone (TLC, then `--why`), once per module: the pool's
    batches and Spark's shares of one corpus are the same batches."""
    tlc = trace_tlc()
    params = SpecParams(fetch_max_records=1)
    settings_ = CheckSettings(params, default_spec_dir(), tlc, build_reader(tlc.jar), why)
    return [_bare(row) for row in check_items(list(batch), settings_)]


def _bare(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its seconds (a batch's wall time, shared out)."""
    return {k: v for k, v in row.items() if k != "seconds"}


@pytest.mark.tlc
def test_the_pool_gives_every_row_each_batch_gave_alone(
    tmp_path: Path, two_kinds: list[Path]
) -> None:
    """`--no-spark`: the rows of a two-kind corpus with rejections (`REJECTING`), `--why 1`
    and batches of about 4, in the input's order, are those of checking each batch alone."""
    paths = two_kinds
    size = balanced_batch_size(paths, 4, 2)
    laid_out = pool_batches(scan(paths, 1), size)
    texts = dict(iter_local(paths))
    expected = _expected([[(p.trace_id, texts[p.trace_id]) for p in b] for b in laid_out], 1)
    out = tmp_path / "out"
    args = ["conform", *map(str, paths), "--no-spark", "--workers", "2", "--batch-size", "4"]
    result = CliRunner().invoke(main, [*args, *REJECTING, "--out", str(out)])
    assert result.exit_code == 1, result.output
    found = [_bare(json.loads(line)) for line in (out / "results.json").read_text().splitlines()]
    assert found == expected
    rejected = [r for r in found if r["verdict"] == "violates"]
    assert len(rejected) > 3 and 2 <= sum(1 for r in rejected if r["why"]) < len(rejected)


@pytest.mark.tlc
def test_spark_gives_every_row_each_batch_gave_alone(
    tmp_path: Path, two_kinds: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Spark (local[2]): the same corpus, each share's batches as its task checked them.
    Nothing is shipped (no addFile, no addPyFile): the workers run this Python, which imports
    the installed kreplica, and take the spec, the jar and the reader where the driver has them
    (`spark.workers_run_this_python`); a cluster's are shipped (tests/test_spark_cluster.py)."""
    from pyspark import SparkContext

    shipped: list[str] = []
    for method in ("addFile", "addPyFile", "addArchive"):
        monkeypatch.setattr(SparkContext, method, lambda _, path, *a, **k: shipped.append(path))
    paths = two_kinds
    texts = dict(iter_local(paths))
    laid_out = share_batches(plan(paths, 4, 2), scan(paths, 1), 4, 4 // SLACK)
    expected = _expected([[(p.trace_id, texts[p.trace_id]) for p in b] for b in laid_out], 1)
    out = tmp_path / "out"
    args = ["conform", *map(str, paths), "--master", "local[2]", "--batch-size", "4"]
    result = CliRunner().invoke(main, [*args, *REJECTING, "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert [_bare(r) for r in iter_rows(out / "results.parquet")] == expected
    assert shipped == []
