"""Every command the README, docs/ and each subcommand's --help show is true: it names
options, configs, suites, bugs and variants that exist, and it writes no page of docs; the quick
ones are run, with the outcome the docs promise.

A command is any line of a fenced code block that starts with `kreplica` (`.venv/bin/`
allowed). Synopsis lines (`[--option ...]`) are usage, not commands. A command whose name or
options change must change in the docs too, or this fails; and no page, docstring or help names
a program by its retired `python -m kreplica.conformance...` spelling.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kreplica.conformance.cli.main import main
from kreplica.conformance.tla.specs import default_spec_dir, load_suites
from kreplica.impl.variants import VariantError, parse_variant

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "traces" / "README.md"]
REPORTS = {"docs/model-checking-table.md", "docs/model-checking-table-full.md"}
"""The pages of docs/ that are `kreplica check --report` tables (every other page is prose)."""


@dataclass(frozen=True)
class Documented:
    """One documented command: where it stands and its words."""

    page: str
    line: int
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.words)}"


def documented_commands() -> list[Documented]:
    """Every command in a fenced code block of the pages (`&&` splits a line in two)."""
    found = []
    for page in PAGES:
        in_block = False
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            text = line.strip()
            if not in_block or "[--" in text:
                continue
            for part in text.split("&&"):
                part = part.strip().removeprefix(".venv/bin/")
                if part.startswith("kreplica "):
                    words = tuple(shlex.split(part, comments=True))
                    found.append(Documented(str(page.relative_to(ROOT)), number, words))
    return found


def subcommands(group: click.Group, path: str) -> list[tuple[str, click.Command]]:
    """Every command under `group`, groups included, with its command path, in name order."""
    found: list[tuple[str, click.Command]] = []
    context = click.Context(group)
    for name in sorted(group.list_commands(context)):
        command = group.get_command(context, name)
        assert command is not None, name
        found.append((f"{path} {name}", command))
        if isinstance(command, click.Group):
            found += subcommands(command, f"{path} {name}")
    return found


def help_examples() -> list[Documented]:
    """The examples in each subcommand's --help (its epilog), a group's subcommands' too: the
    words before two spaces."""
    found = []
    for path, command in subcommands(main, "kreplica"):
        lines = (command.epilog or "").replace("\\\n", " ").splitlines()  # a `\` joins lines
        for number, line in enumerate(lines, 1):
            text = line.strip().split("  ")[0]
            if text.startswith("kreplica "):
                found.append(Documented(f"{path} --help", number, tuple(shlex.split(text))))
    return found


COMMANDS = documented_commands() + help_examples()


def command_of(words: tuple[str, ...]) -> tuple[click.Command, list[str]]:
    """The click command a documented line runs, and its arguments."""
    assert words[0] == "kreplica"
    found = main.get_command(click.Context(main), words[1])
    assert found is not None, f"no command kreplica {words[1]}"
    command: click.Command = found
    args = list(words[2:])
    while isinstance(command, click.Group) and args and args[0] in command.commands:
        command, args = command.commands[args[0]], args[1:]  # kreplica bench impl ...
    assert not isinstance(command, click.Group), f"no such subcommand: {shlex.join(words)}"
    return command, args


def option_values(command: click.Command, args: list[str]) -> list[tuple[click.Parameter, str]]:
    """(parameter, raw value) of every option in `args`; an unknown option fails the test."""
    by_flag = {flag: p for p in command.params for flag in (*p.opts, *p.secondary_opts)}
    pairs = []
    it = iter(args)
    for word in it:
        if not word.startswith("--"):
            continue
        name, _, inline = word.partition("=")
        assert name in by_flag, f"no option {name}"
        param = by_flag[name]
        if isinstance(param, click.Option) and param.is_flag:
            continue
        pairs.append((param, inline or next(it)))
    return pairs


@pytest.mark.parametrize("doc", COMMANDS, ids=str)
def test_a_documented_command_names_what_exists(doc: Documented) -> None:
    command, args = command_of(doc.words)
    spec = default_spec_dir()
    suites = load_suites(spec)
    bugs: list[str] = []
    variants: list[str] = []
    for param, value in option_values(command, args):
        name = param.name
        if name in ("names", "config"):
            assert (spec / f"{value.removesuffix('.cfg')}.cfg").is_file(), f"no config {value}"
        elif name == "suite":
            assert value in suites, f"no suite {value}"
        elif name in ("bugs", "bug"):
            bugs.append(value)
        elif name == "variants":  # kreplica mutate: a list of variants, each run alone ('': none)
            for one in filter(None, value.split(",")):
                try:
                    parse_variant([one], [])
                except VariantError as err:
                    pytest.fail(str(err))
        elif name in ("variant", "assignments"):
            variants.append(value)
        elif name in ("report", "json_path", "out", "corpus"):
            written = Path(value)
            assert not (written.parts[:1] == ("docs",) and value not in REPORTS), (
                f"{value} is a page of docs, not an output"
            )
        elif not isinstance(param.type, click.Path):
            param.type.convert(value, param, None)  # a bad choice or number raises
    try:
        parse_variant(variants, bugs)
    except VariantError as err:
        pytest.fail(str(err))


def test_the_docs_show_commands_at_all() -> None:
    """The collector works: the README's own examples are among the commands found."""
    shown = {shlex.join(d.words) for d in COMMANDS}
    assert "kreplica check --config S1_HwTruncation" in shown
    assert "kreplica fuzz --bug early-ack --no-unclean" in shown
    assert "kreplica bench impl --gc default" in shown  # docs/impl.md
    assert "kreplica bench fuzz --seeds 0" in shown  # docs/fuzzing.md and its --help
    assert any(d.page == "kreplica bench kafka-agent --help" for d in COMMANDS)
    assert len(COMMANDS) > 30


RETIRED = re.compile(
    r"-m kreplica\.conformance\.|\"-m\", \"kreplica\.conformance\.|(?<![\w./])bench\.(?:"
    + "|".join(
        (
            "impl",
            "fuzz",
            "conform",
            "tlc",
            "hidden",
            "checkpoints",
            "guided",
            "kafka_agent",
            "kafka",
        )
    )
    + r")\b(?!\.py)"
)
"""A program named the way it was run before `kreplica bench` and `kreplica walk`: `python -m
kreplica.conformance.bench.NAME`, `python -m kreplica.conformance.fuzz.random_walk` (or as a
process's argv), or the shorthand `bench.NAME`."""

WRITTEN = [
    *PAGES,
    *sorted((ROOT / "conformance").rglob("*.py")),
    *sorted((ROOT / "tests").rglob("*.py")),
    ROOT / "Makefile",
]
"""Where a command may be spelled: the pages, the code (docstrings, help, messages), the tests."""


def test_no_page_docstring_or_test_spells_a_retired_program() -> None:
    """Each retired `python -m` program is a `kreplica` subcommand now; none is named the old
    way (a module such as `kreplica.conformance.bench.fuzz` may still be imported, and named)."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in WRITTEN
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if RETIRED.search(line)
    ]
    assert not found, "spelled the retired way:\n" + "\n".join(found)


def test_version_is_the_installed_distributions() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"kreplica {version('kreplica')}\n"


RUN = {
    "kreplica replay traces/golden/S1_HwTruncation.itf.json": 0,
    "kreplica replay traces/golden/S1_HwTruncation.itf.json --variant truncation=kip279": 1,
    "kreplica check --config S1_HwTruncation": 0,
    "kreplica fuzz --bug early-ack --no-unclean": 1,
    "kreplica fuzz --bug no-leso-guard --fault elect --max-faults 2 --seed 0": 1,
    "kreplica conform traces/golden/S1_HwTruncation.itf.json --variant truncation=hw": 0,
    "kreplica conform traces/golden/Acks1Loss.itf.json --variant acks=1": 0,
    "kreplica conform traces/golden/Acks1Loss.itf.json --variant acks=1 --invariant "
    "AckedRecordsNeverLost": 1,
}
"""The quick documented commands, run for real, and the exit code the docs promise for each
(0: conforms, as expected, nothing found; 1: differs, or a violation found and shrunk)."""


@pytest.mark.tlc
@pytest.mark.parametrize(("line", "code"), RUN.items(), ids=list(RUN))
def test_a_quick_documented_command_does_what_the_docs_say(
    line: str, code: int, tmp_path: Path
) -> None:
    assert line in {shlex.join(d.words) for d in COMMANDS}, "no longer in the docs"
    words = shlex.split(line)
    out = ["--out", str(tmp_path / "out")]
    argv = [str(Path(sys.executable).parent / "kreplica"), *words[1:]]
    if words[1] in ("check", "fuzz", "conform"):
        argv += out
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
