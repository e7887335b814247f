"""A `kreplica conform` result set belongs to one run and is never mixed or lost (issue 12).

`--out` is written whole or not at all: a run writes into a hidden sibling directory of its own
and renames it into place at the end (validate/results.py, `ResultSet`), holding a lock beside
it (`<out>.lock`) for the whole run. Real TLC, real processes: a second run into a held `--out`
fails at once in one line, Ctrl-C leaves the older set as it was, the manifest records the run,
and the summary is this run's own rows.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_helpers import one_error_line
from click.testing import CliRunner, Result
from corpus_helpers import walks, write_corpus

from kreplica.conformance.cli import conform as conform_cli
from kreplica.conformance.cli.main import main
from kreplica.conformance.errors import CheckerError
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.validate import results as results_module
from kreplica.conformance.validate.results import RUN_METADATA, ResultSet, iter_rows

pytestmark = pytest.mark.tlc
KREPLICA = str(Path(sys.executable).parent / "kreplica")
SET = ("junit.xml", "manifest.json", "results.json", "results.parquet")


def violating(text: str) -> str:
    """`text` with a high watermark no action explains at step 3."""
    data = json.loads(text)
    data["states"][3]["hw"] = [9, 9, 9]
    return json.dumps(data)


def conform(*args: str) -> Result:
    return CliRunner().invoke(main, ["conform", *args])


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory`, by relative path, with its bytes."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def leftovers(out: Path) -> list[str]:
    """Staging or swapped-out directories of `out` left beside it."""
    return sorted(p.name for p in out.parent.glob(f".{out.name}.*"))


@pytest.fixture(scope="module")
def older(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished result set of three traces, one violating (exit 1), to copy as an older set."""
    root = tmp_path_factory.mktemp("older")
    good = walks(2, 6, seed=3)
    path = write_corpus(root / "old.jsonl", [*good, violating(good[0])])
    result = conform(str(path), "--no-spark", "--workers", "1", "--out", str(root / "set"))
    assert result.exit_code == 1, result.output
    return root / "set"


def older_set(older: Path, out: Path) -> dict[str, bytes]:
    """Copy the older set to `out`; return its files."""
    out.mkdir(parents=True)
    for name, data in snapshot(older).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return snapshot(out)


@contextmanager
def held(out: Path, pid: int = 4242) -> Iterator[None]:
    """Hold `out`'s lock as another run would, with `pid` written in it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent / f"{out.name}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, f"{pid}\n".encode())
        yield
    finally:
        os.close(fd)


def wait_for(condition: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def lock_holder(out: Path) -> int | None:
    """The pid in `out`'s lock file if the lock is held, else None."""
    path = out.parent / f"{out.name}.lock"
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = path.read_text().strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)
    return None


# ---------------------------------------------------------------- one run per --out


@pytest.mark.parametrize("runner", [["--no-spark"], ["--master", "local[2,2]"]])
def test_a_run_into_a_held_out_fails_at_once_in_one_line(
    tmp_path: Path, older: Path, runner: list[str]
) -> None:
    """With the lock held (as by a run in progress), a second run, pool or Spark, prints one
    line naming the holder's pid and exits 2 before checking anything (Spark never starts),
    and leaves the set in --out as it was."""
    path = write_corpus(tmp_path / "c.jsonl", walks(1, 4))
    out = tmp_path / "o"
    before = older_set(older, out)
    started = time.monotonic()
    with held(out, pid=4242):
        result = conform(str(path), *runner, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert one_error_line(result) == (
        f"kreplica: error: {out} is in use by another kreplica conform (pid 4242)"
    )
    assert result.stdout == ""
    assert time.monotonic() - started < 5
    assert snapshot(out) == before and leftovers(out) == []


def test_two_runs_at_once_the_second_refused_the_first_whole_and_its_own(tmp_path: Path) -> None:
    """A real run in a subprocess holds --out; a second run started meanwhile is refused with
    the first's pid; the first finishes with its own summary, exit code and a whole set."""
    texts = walks(3, 8, seed=5)
    first_corpus = write_corpus(tmp_path / "first.jsonl", [t for t in texts for _ in range(4)])
    second_corpus = write_corpus(tmp_path / "second.jsonl", [violating(texts[0])])
    out = tmp_path / "o"
    args = [KREPLICA, "conform", str(first_corpus), "--no-spark", "--workers", "1",
            "--batch-size", "4", "--out", str(out)]  # fmt: skip
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: lock_holder(out) == first.pid, "the first run's lock")
        second = conform(str(second_corpus), "--no-spark", "--out", str(out))
        stdout, stderr = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.exit_code == 2
    assert one_error_line(second) == (
        f"kreplica: error: {out} is in use by another kreplica conform (pid {first.pid})"
    )
    assert first.returncode == 0, stderr
    assert stderr == ""
    assert "│ 12 " in stdout  # its own twelve traces, not the second's one
    assert sorted(p.name for p in out.iterdir()) == list(SET)
    rows = list(iter_rows(out / "results.parquet"))
    assert Counter(r["verdict"] for r in rows) == {"conforms": 12}
    assert {r["trace_id"].rsplit(":", 1)[0] for r in rows} == {str(first_corpus)}
    assert len((out / "results.json").read_text().splitlines()) == 12
    assert ET.parse(out / "junit.xml").getroot().get("tests") == "12"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pid"] == first.pid and manifest["counts"]["traces"] == 12
    assert manifest["command"] == (
        f"kreplica conform {first_corpus} --no-spark --workers 1 --batch-size 4 --out {out}"
    )
    assert leftovers(out) == [] and lock_holder(out) is None


# ---------------------------------------------------------------- Ctrl-C and failures


def _marked(mark: str) -> list[int]:
    """The processes whose environment holds `mark` (a run's, inherited by its workers and
    their TLC processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes().split(b"\0") if entry.name.isdigit() else []
            if mark.encode() in environ:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    """A process's command line, shortened (empty once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
    except OSError:
        return ""


def _tlc_running(mark: str) -> bool:
    """A TLC process of the marked run is running."""
    for pid in _marked(mark):
        try:
            if b"tla2tools" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _interrupted_run(
    tmp_path: Path, out: Path, whole_group: bool, spark: bool = False
) -> subprocess.CompletedProcess[str]:
    """Start a run of some 20 s (40 TLC runs), Ctrl-C it once a TLC process of it runs (the
    run alone, or its whole process group as a terminal does; the rows reach `--out` only at
    the end), and return how it ended. It must stop at once (about 0.2 s; awaiting the batches
    in flight took 4-5 s), leaving no staging directory and no process it started (workers,
    TLC). Under Spark (local[2]) the run has 10 s to cancel its job, kill its workers and
    checkers and stop Spark's JVM (about 0.5 s; sweeping for TLC processes four times over,
    0.5 s apart, took 4 s quiet and 10.2 s in CI)."""
    path = write_corpus(tmp_path / "big.jsonl", walks(2, 20, seed=9) * 40)
    runner = ["--master", "local[2]"] if spark else ["--no-spark", "--workers", "2"]
    args = [KREPLICA, "conform", str(path), *runner,
            "--batch-size", "2", "--out", str(out)]  # fmt: skip
    token = uuid.uuid4().hex
    mark = f"KREPLICA_TEST_RUN={token}"
    env = {**os.environ, "KREPLICA_TEST_RUN": token}
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env, start_new_session=True)  # fmt: skip
    try:
        # the run, a worker and a TLC process, seen at once (one TLC process may end, and
        # the next start, between two looks at the process table)
        wait_for(lambda: _tlc_running(mark) and len(_marked(mark)) >= 3,
                 "a worker and a TLC process of the run", limit=120)  # fmt: skip
        assert run.poll() is None, "the run ended before it was interrupted"
        signalled = time.monotonic()
        if whole_group:
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=20)
        stopped = time.monotonic() - signalled
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert leftovers(out) == []
    assert lock_holder(out) is None
    left = {pid: _cmdline(pid) for pid in _marked(mark)}
    assert left == {}, f"a process of the run outlived it: {left}"
    limit = 10 if spark else 3
    assert stopped < limit, f"{stopped:.1f} s from Ctrl-C to exit: batches in flight were awaited"
    return subprocess.CompletedProcess(args, run.returncode, stdout, stderr)


def test_ctrl_c_keeps_the_older_set_whole_and_says_so_in_one_line(
    tmp_path: Path, older: Path
) -> None:
    out = tmp_path / "o"
    before = older_set(older, out)
    ended = _interrupted_run(tmp_path, out, whole_group=False)
    assert ended.returncode == 130, ended.stderr
    assert ended.stderr.splitlines() == [
        f"kreplica: error: interrupted: the older results in {out} are kept unchanged, "
        "this run's partial results removed"
    ]
    assert "Traceback" not in ended.stdout + ended.stderr
    assert snapshot(out) == before


def test_ctrl_c_under_spark_keeps_the_older_set_and_leaves_no_process(
    tmp_path: Path, older: Path
) -> None:
    out = tmp_path / "o"
    before = older_set(older, out)
    ended = _interrupted_run(tmp_path, out, whole_group=True, spark=True)
    assert ended.returncode == 130, ended.stderr
    assert ended.stderr.splitlines()[-1] == (
        f"kreplica: error: interrupted: the older results in {out} are kept unchanged, "
        "this run's partial results removed"
    ), ended.stderr
    assert "Traceback" not in ended.stdout + ended.stderr
    assert snapshot(out) == before


def test_ctrl_c_at_a_terminal_of_a_first_run_leaves_no_results(tmp_path: Path) -> None:
    """SIGINT to the whole process group, as Ctrl-C at a terminal: the workers ignore it (no
    tracebacks), the run stops them and their TLC processes, and says nothing was written."""
    out = tmp_path / "nested" / "o"
    ended = _interrupted_run(tmp_path, out, whole_group=True)
    assert ended.returncode == 130, ended.stderr
    assert ended.stderr.splitlines() == [
        f"kreplica: error: interrupted: no results were written to {out}"
    ]
    assert not out.exists()


def test_a_run_that_fails_midway_keeps_the_older_set(
    tmp_path: Path, older: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after rows were written (here a runner that writes a part and raises): one
    line saying the older set is kept, its exit code, and no staging directory left."""

    def failing_pool(run: Any, out: Path, progress: Any) -> int:
        (out / "results.json").write_text('{"trace_id": "partial"}\n')
        raise CheckerError("TLC failed: out of memory")

    monkeypatch.setattr(conform_cli, "run_pool", failing_pool)
    path = write_corpus(tmp_path / "c.jsonl", walks(1, 4))
    out = tmp_path / "o"
    before = older_set(older, out)
    result = conform(str(path), "--no-spark", "--out", str(out))
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"kreplica: error: TLC failed: out of memory; the older results in {out} are kept "
        "unchanged, this run's partial results removed"
    )
    assert snapshot(out) == before and leftovers(out) == []


# ---------------------------------------------------------------- what a set holds


def test_the_summary_and_exit_code_are_this_runs_own(tmp_path: Path, older: Path) -> None:
    """--out holds an older set with a violation (exit 1) and a stray Parquet part; a run of
    two conforming traces reports two traces and exits 0, and the set holds only its rows."""
    out = tmp_path / "o"
    older_set(older, out)
    stray = out / "results.parquet"
    pq.write_table(pq.read_table(older / "results.parquet"), tmp_path / "stray.parquet")
    stray.unlink()
    stray.mkdir()  # the older set as Spark writes it: a directory of parts
    (tmp_path / "stray.parquet").rename(stray / "part-00000.parquet")
    path = write_corpus(tmp_path / "c.jsonl", walks(2, 6, seed=8))
    result = conform(str(path), "--no-spark", "--workers", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert [line.split("│")[1:4] for line in result.stdout.splitlines() if "│ 2 " in line] == [
        [" 2      ", " 2       ", " 0       "]
    ]
    rows = list(iter_rows(out / "results.parquet"))
    assert sorted(r["trace_id"] for r in rows) == [f"{path}:1", f"{path}:2"]
    assert len((out / "results.json").read_text().splitlines()) == 2
    suite = ET.parse(out / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "0")
    assert json.loads((out / "manifest.json").read_text())["counts"]["traces"] == 2


def test_the_manifest_records_the_run(tmp_path: Path) -> None:
    """manifest.json, written last: the variant, the bugs, the spec's hash, the version, the
    start and end, the inputs, the counts by verdict (as the rows have them) and the command
    line; the Parquet schema carries the same record as known at the start."""
    good = walks(2, 6, seed=12)
    path = write_corpus(tmp_path / "c.jsonl", [*good, violating(good[1]), "{"])
    out = tmp_path / "o"
    started = datetime.now().astimezone()
    result = conform(str(path), "--no-spark", "--workers", "1", "--out", str(out),
                     "--variant", "truncation=hw", "--bug", "early-ack")  # fmt: skip
    assert result.exit_code == 2, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kreplica_version"] == version("kreplica")
    assert manifest["variant"]["truncation"] == "hw"
    assert manifest["variant"]["label"] == "truncation=hw,bug=early-ack"
    assert manifest["bugs"] == ["early-ack"]
    spec = default_spec_dir()
    together = hashlib.sha256()
    for name in ("KafkaReplication.tla", "KafkaReplicationTrace.tla", "TraceAgreement.tla"):
        digest = hashlib.sha256((spec / name).read_bytes())
        assert manifest["spec_files_sha256"][name] == digest.hexdigest()
        together.update(name.encode() + b"\0" + digest.digest())
    assert manifest["spec_sha256"] == together.hexdigest()
    begun, ended = (datetime.fromisoformat(manifest[k]) for k in ("started", "finished"))
    assert started <= begun <= ended <= datetime.now().astimezone()
    assert manifest["inputs"] == [str(path)]
    verdicts = Counter(r["verdict"] for r in iter_rows(out / "results.parquet"))
    assert sum(verdicts.values()) == 4 and verdicts["error"] == 1
    assert manifest["counts"] == {"traces": 4, "events": manifest["counts"]["events"],
                                  "conforms": verdicts["conforms"],
                                  "violates": verdicts["violates"], "error": 1}  # fmt: skip
    assert manifest["options"]["variants"] == ["truncation=hw"]
    assert manifest["options"]["no_spark"] is True
    assert "command" in manifest and manifest["argv"]
    meta = pq.read_schema(out / "results.parquet").metadata[RUN_METADATA.encode()]
    at_start = json.loads(meta)
    assert at_start["run_id"] == manifest["run_id"] and at_start["started"] == begun.isoformat(
        timespec="milliseconds"
    )
    assert "counts" not in at_start


def test_an_out_holding_other_files_is_refused(tmp_path: Path) -> None:
    """A run replaces --out whole, so a directory with anything but results is refused, in one
    line, before any checking, and nothing in it changes."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    path = write_corpus(tmp_path / "c.jsonl", walks(1, 4))
    result = conform(str(path), "--no-spark", "--out", str(out))
    assert result.exit_code == 2
    assert one_error_line(result).startswith(
        f"kreplica: error: cannot write results to {out}: it holds 'notes.txt'"
    )
    assert snapshot(out) == {"notes.txt": b"mine"} and leftovers(out) == []


# ---------------------------------------------------------------- ResultSet itself (no TLC)


def _stage(out: Path, text: str) -> ResultSet:
    result_set = ResultSet.claim(out)
    (result_set.staging / "results.json").write_text(text)
    return result_set


@pytest.mark.parametrize("atomic", [True, False], ids=["exchange", "two-renames"])
def test_commit_replaces_the_older_set_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, atomic: bool
) -> None:
    """The new set replaces the older one whole (the older one's other files go too), by an
    atomic exchange where the kernel has one and by two renames where not."""
    if not atomic:
        monkeypatch.setattr(results_module, "_exchange", lambda a, b: False)
    out = tmp_path / "o"
    out.mkdir()
    (out / "results.json").write_text("old\n")
    (out / "junit.xml").write_text("old")
    with _stage(out, "new\n") as result_set:
        assert result_set.older and snapshot(out) == {"results.json": b"old\n", "junit.xml": b"old"}
        result_set.commit()
    assert snapshot(out) == {"results.json": b"new\n"} and leftovers(out) == []


def test_what_a_killed_run_left_is_tidied_by_the_next(tmp_path: Path) -> None:
    """A run killed outright (SIGKILL) leaves its staging directory, or, between the two
    renames of a non-atomic swap, the older set under another name: the next run deletes the
    first and puts the second back before it starts."""
    out = tmp_path / "o"
    (tmp_path / ".o.tmp-1-dead").mkdir()
    (tmp_path / ".o.tmp-1-dead" / "results.json").write_text("partial")
    (tmp_path / ".o.old-2-dead").mkdir()
    (tmp_path / ".o.old-2-dead" / "results.json").write_text("older")
    with ResultSet.claim(out) as result_set:
        assert result_set.older
        assert snapshot(out) == {"results.json": b"older"}
        assert leftovers(out) == [result_set.staging.name]
    assert leftovers(out) == [] and snapshot(out) == {"results.json": b"older"}


def test_a_tasks_rows_travel_packed_and_come_back_equal() -> None:
    """Spark tasks return rows packed (compact JSON, compressed): the same rows come back,
    a file name's undecodable bytes (surrogates) and a NaN included, in far fewer bytes."""
    import math
    import pickle

    from kreplica.conformance.validate.conform import pack_rows, unpack_rows

    rows = [
        {"trace_id": f"/c/b\udcff{i}.jsonl:{i}", "verdict": "conforms", "events": 10,
         "step": None, "variables": ["hw", "log"], "seconds": 0.012, "note": ""}
        for i in range(2_000)
    ]  # fmt: skip
    rows[0]["seconds"] = float("nan")
    back = unpack_rows(pack_rows(rows))
    assert math.isnan(back[0].pop("seconds")) and math.isnan(rows[0].pop("seconds"))
    assert back == rows
    assert len(pack_rows(rows)) * 10 < len(pickle.dumps(rows))
