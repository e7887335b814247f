"""Shared fixtures: the toy spec under tests/fixtures/tlc and a skip for tests that need Java."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TLC_FIXTURES = FIXTURES / "tlc"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the `tlc` tests when no Java is installed."""
    if shutil.which("java"):
        return
    skip = pytest.mark.skip(reason="needs Java (java not on PATH)")
    for item in items:
        if item.get_closest_marker("tlc") is not None:
            item.add_marker(skip)


@pytest.fixture
def spec_dir() -> Path:
    """The toy spec directory of the TLC tests."""
    return TLC_FIXTURES / "spec"


@pytest.fixture
def tlc_output_dir() -> Path:
    """Recorded TLC stdout, one file per config of the toy spec."""
    return TLC_FIXTURES / "output"


@pytest.fixture(scope="session")
def rejected_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The result set of `kreplica conform` on corpus_helpers.REJECTED (a real TLC run, once
    per session)."""
    from click.testing import CliRunner
    from corpus_helpers import REJECTED

    from kreplica.conformance.cli.main import main

    out = tmp_path_factory.mktemp("rejected") / "conform"
    args = ["conform", str(REJECTED), "--no-spark", "--workers", "1", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    return out
