"""Every command of every tutorial in docs/tutorials/ is run, and what it prints is checked, so
the tutorials stay true.

A tutorial's commands are the `$ ` lines of its ```console blocks. The lines after a command,
up to the next command or the block's end, are what it must print (stdout and stderr, whitespace
collapsed), in that order: `...` inside a line stands for any text, a line that is only `...`
for lines left out, and `[exit N]` for its exit code (0 when not given). The commands run in
a scratch directory that holds `spec` and `traces` (links to the project's) and
`docs/tutorials/img`, one tutorial after the other on each of two workers (TLC runs in most of
them)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = ROOT / "docs" / "tutorials"
PAGES = sorted(p for p in TUTORIALS.glob("*.md") if p.name != "README.md")
SECTIONS = (
    "## The story",
    "## TLC finds it",
    "## The implementation does it too",
    "## The picture",
    "## The fix",
)
"""What every tutorial has, in this order (issue #16)."""
COMMAND_SECONDS = 600


@dataclass
class Command:
    """One `$ ` line of a tutorial and what it must print."""

    line: str
    expected: list[str] = field(default_factory=list)
    exit_code: int = 0


def commands(text: str) -> list[Command]:
    """The commands of a tutorial's ```console blocks, in order."""
    found: list[Command] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append(Command(line[2:].strip()))
            elif found and (exit_code := re.fullmatch(r"\[exit (\d+)\]", line.strip())):
                found[-1].exit_code = int(exit_code.group(1))
            elif found and line.strip() and line.strip() != "...":
                found[-1].expected.append(line)
    return found


def _pattern(expected: str) -> re.Pattern[str]:
    parts = [re.escape(" ".join(p.split())) for p in expected.split("...")]
    return re.compile(r"\s*.*?\s*".join(parts), re.DOTALL)


def check_output(command: Command, output: str, code: int) -> str | None:
    """Why `output` (and exit `code`) is not what the tutorial says `command` prints, or None."""
    if code != command.exit_code:
        return f"{command.line}: exit {code}, the tutorial says {command.exit_code}\n{output}"
    flat, at = " ".join(output.split()), 0
    for expected in command.expected:
        found = _pattern(expected).search(flat, at)
        if found is None:
            return f"{command.line}: does not print (in order) {expected!r}\n{output}"
        at = found.end()
    return None


def scratch(directory: Path) -> Path:
    """A directory to run a tutorial's commands in."""
    directory.mkdir(parents=True)
    for name in ("spec", "traces"):
        (directory / name).symlink_to(ROOT / name)
    (directory / "docs" / "tutorials" / "img").mkdir(parents=True)
    return directory


def run_tutorial(page: Path, directory: Path) -> list[str]:
    """Run every command of `page` in `directory`; the problems found (none: it holds)."""
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # this venv's kreplica
    env = dict(os.environ, COLUMNS="200", PATH=path)
    for command in commands(page.read_text(encoding="utf-8")):
        done = subprocess.run(
            ["bash", "-c", command.line],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        problem = check_output(command, done.stdout + done.stderr, done.returncode)
        if problem is not None:
            return [f"{page.name}: {problem}"]
    return []


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Every tutorial run, two at a time."""
    base = tmp_path_factory.mktemp("tutorials")

    def one(page: Path) -> list[str]:
        return run_tutorial(page, scratch(base / page.stem))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip((p.name for p in PAGES), pool.map(one, PAGES), strict=True))


def test_there_is_a_tutorial_per_scenario() -> None:
    """S1, S2, S3, S12, acks=1 and the seeded bug of KAFKA-7164 (issue #16)."""
    assert [p.stem for p in PAGES] == [
        "1-s1-hw-truncation",
        "2-s2-hw-divergence",
        "3-s3-fast-failover",
        "4-s12-unclean-election",
        "5-acks1",
        "6-kafka-7164",
    ]


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_tutorial_has_its_sections_and_picture(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    places = [text.find(s) for s in SECTIONS]
    assert -1 not in places and places == sorted(places), page.name
    images = re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", text)
    assert images and all((TUTORIALS / i).is_file() for i in images), images
    written = [c.line for c in commands(text) if "--png docs/tutorials/" in c.line]
    assert [shlex.split(w)[shlex.split(w).index("--png") + 1] for w in written] == [
        f"docs/tutorials/{i}" for i in images
    ]


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_command_prints_what_the_tutorial_says(
    page: Path, outcomes: dict[str, list[str]]
) -> None:
    assert outcomes[page.name] == []


def test_the_checker_of_the_tutorials_can_fail() -> None:
    """A wrong exit code, a line it does not print, lines out of order: each is named."""
    (command,) = commands("```console\n$ echo a b\na ... b\n[exit 1]\n```\n")
    assert command.exit_code == 1 and command.expected == ["a ... b"]
    assert check_output(command, "a  x b\n", 1) is None
    assert "exit 0" in (check_output(command, "a b", 0) or "")
    assert "does not print" in (check_output(command, "b a", 1) or "")
    (two,) = commands("```console\n$ x\nfirst\nsecond\n```\n")
    assert check_output(two, "first\nsecond\n", 0) is None
    assert "does not print" in (check_output(two, "second\nfirst\n", 0) or "")
