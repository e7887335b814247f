"""`make test` runs the suite on two pytest-xdist workers with `--dist loadgroup`, and
tests/conftest.py keeps the tests that share a real cluster's ports, or a fixture wider than a
test, on one worker. These tests check that the groups take effect with the pytest and
pytest-xdist installed (pytest 9.2 derives a test's id in a way xdist 3.8 cannot suffix with
its group, so every group silently spread over both workers: pyproject.toml pins pytest below
it), by running a small suite with this conftest on two workers."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

TRIVIAL = "\n".join(f"def test_{i}() -> None:\n    pass\n" for i in range(6))


def run_on_two_workers(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    """Run `files` beside a copy of tests/conftest.py on two xdist workers; each reported test
    id (with its group suffix, if any) and the workers it ran on."""
    suite = tmp_path / "tests"  # the conftest groups only the fixtures defined under tests/
    suite.mkdir()
    shutil.copy(TESTS / "conftest.py", suite / "conftest.py")
    for name, text in files.items():
        (suite / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tmp_path), "tests"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran: dict[str, set[str]] = {}
    for worker, test in re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", done.stdout, re.M):
        ran.setdefault(test.split("::", 1)[1], set()).add(worker)
    return ran


def test_a_file_that_shares_the_cluster_ports_runs_on_one_worker(tmp_path: Path) -> None:
    ran = run_on_two_workers(
        tmp_path,
        {"test_kafka_real.py": TRIVIAL, "test_other.py": TRIVIAL.replace("test_", "test_o")},
    )
    grouped = {test: workers for test, workers in ran.items() if test.endswith("@kafka-cluster")}
    assert len(grouped) == 6, ran
    assert len(set().union(*grouped.values())) == 1, grouped
    assert len(ran) == 12 and all(not t.startswith("test_o") or "@" not in t for t in ran), ran


def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    shared = (
        "import pytest\n\n@pytest.fixture(scope='module')\ndef made() -> int:\n    return 1\n\n"
        + "\n".join(f"def test_m{i}(made: int) -> None:\n    assert made\n" for i in range(6))
    )
    ran = run_on_two_workers(tmp_path, {"test_shared.py": shared, "test_free.py": TRIVIAL})
    grouped = {test: workers for test, workers in ran.items() if "@" in test}
    assert len(grouped) == 6 and all(t.startswith("test_m") for t in grouped), ran
    assert len(set().union(*grouped.values())) == 1, grouped
