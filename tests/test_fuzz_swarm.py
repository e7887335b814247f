"""`kreplica fuzz --master URL --seeds N`: a campaign as a swarm of seeded campaigns, a Spark task
each, is the same as those campaigns run one after the other without Spark.

What "the same" means was fixed before any swarm ran: the swarm's corpus is byte for byte the
corpora of `kreplica fuzz --seed S --corpus C` (same options) appended for S = the first seed,
the next, ...; the failure it reports is the lowest failing seed's, and the trace and schedule
it saves are byte for byte what `kreplica fuzz --seed S` saves for that seed. Bad Spark options
end in one stderr line and exit 2. On a standalone cluster of two workers whose Python has
neither kreplica nor Hypothesis (both are shipped), a swarm finds a seeded bug.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner
from test_spark_cluster import (  # the standalone master and workers on loopback
    PLAIN_PYTHON,
    _plain_python_version,
    _stop_driver,
    standalone_cluster,
)

from kreplica.conformance.cli.fuzz import build_setup
from kreplica.conformance.cli.main import main
from kreplica.conformance.fuzz.campaign import run_fuzz, save_failure
from kreplica.conformance.fuzz.corpus_writer import CorpusWriter
from kreplica.conformance.fuzz.runs import RunStats
from kreplica.conformance.fuzz.swarm import SHIPPED_MODULES, merged_stats
from kreplica.conformance.spark import installed_zip

ROOT = Path(__file__).resolve().parent.parent

NO_LESO_GUARD = ["--bug", "no-leso-guard", "--fault", "elect", "--max-faults", "2",
                 "--examples", "60", "--steps", "50", "--no-shrink"]  # fmt: skip
"""A seeded bug that seed 1 finds within 60 runs and seeds 0, 2 and 3 do not (about 2 s a
seed; no Hypothesis shrinking, the failure is still minimised): the reported failure is not
simply the first seed's."""


def _kreplica(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`kreplica ARGS` as a process of its own (its Spark JVM goes with it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "kreplica", *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )  # fmt: skip


def test_a_local_swarm_is_its_seeds_one_after_the_other(tmp_path: Path) -> None:
    corpus, out = tmp_path / "swarm.jsonl", tmp_path / "out"
    done = _kreplica("fuzz", "--master", "local[2]", "--seeds", "4", *NO_LESO_GUARD,
                     "--corpus", str(corpus), "--out", str(out))  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "seeds 0 to 3 on local[2]" in done.stdout
    assert "seed 1, the lowest of the 1 of 4 seeds that failed (1)" in done.stdout

    # the same seeds one after the other, in this process, as `kreplica fuzz --seed S` runs each
    setup = build_setup((), ("no-leso-guard",), 3, (True, True, True), 2, only=("elect",))
    alone, results = tmp_path / "alone.jsonl", []
    with CorpusWriter(alone) as writer:
        for seed in range(4):
            results.append(run_fuzz(setup, 60, 50, seed, shrink=False, corpus=writer))
    assert [r.failure is not None for r in results] == [False, True, False, False]
    assert corpus.read_bytes() == alone.read_bytes()
    assert f"corpus: {writer.written:,} traces appended" in done.stdout

    saved = save_failure(results[1], tmp_path / "alone-out")
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in saved)
    for path in saved:
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name
    totals = merged_stats([r.stats for r in results])
    assert f"runs {totals.runs:,}, steps {totals.steps:,} " in done.stdout


def test_the_counters_of_a_swarm_are_its_seeds_summed() -> None:
    one, two = RunStats(runs=3, steps=30, impl_steps=40), RunStats(runs=2, steps=5, impl_steps=6)
    one.actions.update({"Produce": 2, "Crash": 1})
    two.actions.update({"Produce": 1})
    two.leader_changes.update({1: 2})
    total = merged_stats([one, two])
    assert (total.runs, total.steps, total.impl_steps) == (5, 35, 46)
    assert total.actions == {"Produce": 3, "Crash": 1}
    assert total.leader_changes == {1: 2}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "2"], r"--seeds runs a swarm on Spark; give --master too"),
        (["--conf", "spark.x=1"], r"--conf sets Spark properties; give --master too"),
        (["--master", "local[1]", "--conf", "novalue"], r"'novalue' is not KEY=VALUE"),
        (["--master", "spark://127.0.0.1:{port}"], r"the Spark master spark://127\.0\.0\.1:\d+ "
                                                   r"is unreachable"),
        (["--master", "nowhere"], r"'nowhere' is not a Spark master URL \(local, local\[N\]"),
    ],
)  # fmt: skip
def test_a_bad_spark_option_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path
) -> None:
    args = [a.format(port=_free_port()) for a in args]
    result = CliRunner().invoke(main, ["fuzz", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert re.search(message, one_error_line(result)), result.stderr


@pytest.mark.skipif(
    _plain_python_version() != "{}.{}".format(*sys.version_info[:2]),
    reason=f"{PLAIN_PYTHON} is missing or not this Python's version",
)
def test_a_cluster_whose_python_lacks_kreplica_and_hypothesis_runs_a_swarm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # spark_context sets it: undone after
    out = tmp_path / "out"
    from pyspark import SparkContext

    archive = installed_zip(SHIPPED_MODULES).name  # what the swarm shipped

    def where(_: int) -> tuple[str, str, str]:  # on an executor: its Python, whence the imports
        import sys

        from pyspark import SparkFiles

        sys.path.insert(0, SparkFiles.get(archive))  # as spark.call_shipped does
        import hypothesis

        import kreplica

        return sys.executable, str(kreplica.__file__), str(hypothesis.__file__)

    with standalone_cluster(tmp_path / "cluster", workers=2) as url:
        try:
            result = CliRunner().invoke(main, [
                "fuzz", "--master", url, "--seeds", "4", "--bug", "early-ack", "--no-unclean",
                "--examples", "20", "--steps", "30", "--no-shrink", "--out", str(out),
                "--conf", f"spark.pyspark.python={PLAIN_PYTHON}",
                "--conf", "spark.executor.memory=512m",
            ])  # fmt: skip
            assert result.exit_code == 1, result.output
            executors = SparkContext.getOrCreate().parallelize([0, 1], 2).map(where).collect()
        finally:
            _stop_driver(SparkContext)
    assert f"seeds 0 to 3 on {url}" in result.stdout
    assert "violation ClientAnswersMatchLeader" in result.stdout
    assert "seed 0, the lowest of the 4 of 4 seeds that failed" in result.stdout
    assert sorted(p.suffixes[-2] for p in out.iterdir()) == [".itf", ".schedule"]
    for python, kreplica, hypothesis in executors:  # nothing came from the driver's venv
        assert python == str(PLAIN_PYTHON)
        assert kreplica.endswith("kreplica.zip/kreplica/__init__.py"), kreplica
        assert f"/{archive}/hypothesis/" in hypothesis and ".venv" not in hypothesis, hypothesis
