"""Shared fixtures: the toy spec under tests/fixtures/tlc, a skip for tests that need Java, and
the groups that keep tests sharing something on one worker when `make test` runs the suite in
parallel (pytest-xdist, `-n 2 --dist loadgroup`).

Each xdist worker is a session of its own, with its own Spark context; TLC runs each take a
directory of their own (tla/tlc.py), and every other file a test writes is under its tmp_path.
What remains shared is grouped, and a group runs on one worker, one test after another:
- every test that starts a real Kafka cluster (marker `kafka`), and every test of the files whose
  tests all watch one port base (`KAFKA_FILES`): clusters on one port base would collide, and
  `assert_nothing_left` (tests/test_kafka_real.py) would see another test's JVMs and ports; two
  clusters at once would also halve the CPU the real-time budgets of these tests were set with;
- the tests that use one module- or session-scoped fixture, so that it is made once, not once per
  worker (the wheel's venv, the demo's run, a Spark cluster, a browser, a TLC run).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TLC_FIXTURES = FIXTURES / "tlc"


KAFKA_FILES = frozenset({"test_kafka_real.py", "test_kafka_agent.py"})
"""Files whose every test uses or checks the file's port bases (its cluster's ports and
iptables chain), a real cluster or not."""
KAFKA_GROUP = "kafka-cluster"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the `tlc` tests when no Java is installed; put the tests that share a cluster, a port
    base or a fixture into one xdist group each."""
    if not shutil.which("java"):
        skip = pytest.mark.skip(reason="needs Java (java not on PATH)")
        for item in items:
            if item.get_closest_marker("tlc") is not None:
                item.add_marker(skip)
    for item, group in shared_groups(items).items():
        item.add_marker(pytest.mark.xdist_group(group))


def shared_groups(items: list[pytest.Item]) -> dict[pytest.Item, str]:
    """The xdist group of each test that shares something: tests joined by a shared thing (the
    Kafka cluster, or a fixture wider than a test, defined under tests/) are one group, named
    after the first thing, in collection order."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    shared: dict[pytest.Item, list[str]] = {}
    for item in items:
        keys = [KAFKA_GROUP] if _needs_the_cluster(item) else []
        keys += _wide_fixtures(item)
        if keys:
            shared[item] = keys
            for key in keys[1:]:
                parent[root(key)] = root(keys[0])
    return {item: root(keys[0]) for item, keys in shared.items()}


def _needs_the_cluster(item: pytest.Item) -> bool:
    return item.get_closest_marker("kafka") is not None or item.path.name in KAFKA_FILES


def _wide_fixtures(item: pytest.Item) -> list[str]:
    """The module- and session-scoped fixtures of tests/ the test uses (not pytest's own, such as
    tmp_path_factory), each named by where it is defined."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(
        f"{fixture.baseid or '?'}::{fixture.argname}"
        for fixtures in info.name2fixturedefs.values()
        for fixture in fixtures
        if fixture.scope in ("module", "session") and fixture.baseid.startswith("tests")
    )


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
