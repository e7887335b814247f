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
