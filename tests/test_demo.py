"""`kreplica demo`, the main job, on a small set-up: two models, 20 fuzz runs per campaign, the
recorded traces checked on Spark local mode (a real Spark, in the child process conform
starts), the pictures and the report. A second run reuses every step and says so; a changed
input runs again what depends on it."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

KREPLICA = str(Path(sys.executable).parent / "kreplica")
SMALL = ["--config", "Acks1Loss", "--config", "WitnessCommit"]


class Links(HTMLParser):
    """Every href and src of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.targets += [v for k, v in attrs if k in ("href", "src") and v]


def demo(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [KREPLICA, "demo", "--out", str(out), *SMALL, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "out"
    done = demo(out, "--examples", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_the_main_job_runs_every_step_and_links_all_of_it(first: tuple[Path, str]) -> None:
    out, stdout = first
    steps = ("model-check the models", "fuzz the correct protocol",
             "fuzz the seeded bug early-ack", "check every recorded trace on Spark")  # fmt: skip
    for step in steps:
        assert re.search(rf"{step}: \d+ s", stdout), stdout
    assert f"report: {out / 'index.html'}" in stdout
    page = (out / "index.html").read_text(encoding="utf-8")
    links = Links()
    links.feed(page)
    assert links.targets and all((out / t).exists() for t in links.targets), links.targets
    assert "pictures/Acks1Loss.html" in links.targets  # the counterexample, drawn
    assert "pictures/rejected-1.html" in links.targets  # a trace of the bug, rejected, drawn
    assert "WitnessCommit" in page and "bug-early-ack.jsonl" in page
    rejected = (out / "pictures" / "rejected-1.html").read_text(encoding="utf-8")
    assert 'id="rejection"' in rejected and "why: KafkaReplication.tla:" in rejected


def test_a_second_run_reuses_every_step_and_says_so(first: tuple[Path, str]) -> None:
    out, _ = first
    again = demo(out, "--examples", "20")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("reused (inputs unchanged)") == 5, again.stdout
    assert "reused (inputs unchanged)" in (out / "index.html").read_text(encoding="utf-8")


def test_a_changed_input_runs_again_what_depends_on_it(first: tuple[Path, str]) -> None:
    """More fuzz runs: both campaigns, conformance and the pictures run again; the model
    checking is reused."""
    out, _ = first
    changed = demo(out, "--examples", "21")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "model-check the models: reused (inputs unchanged)" in changed.stdout
    for step in ("fuzz the correct protocol", "check every recorded trace on Spark"):
        assert re.search(rf"{step}: \d+ s", changed.stdout), changed.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--bug", "nope"], "unknown bug 'nope'"), (["--suite", "nope"], "unknown suite 'nope'")],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run([KREPLICA, "demo", "--out", str(tmp_path / "o"), *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
