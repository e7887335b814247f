"""The spec directory: model configs (`<Name>.cfg`) with their header metadata, and suites.

Each config starts with TLA+ comment lines that carry metadata:

    \\* expect: violation AckedRecordsNeverLost   (or: ok, deadlock, temporal [Name], assumption)
    \\* module: KafkaReplication          (the .tla module to check; default: the cfg's name)
    \\* about: one-line description
    \\* bounds: 3 replicas, 2 records, epochs<=3
    \\* deadlock: check                   (default: TLC runs with -deadlock)
    \\* cores: all                        (checked alone on every job's core; default: one)

`suites.toml` names lists of configs: `[suites.ci] configs = ["A", "B"]`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kreplica.conformance.errors import SpecError
from kreplica.conformance.tla.tlc_output import Outcome

SUITES_FILE = "suites.toml"
DEFAULT_SUITE = "ci"
SPEC_DIR_ENV = "KREPLICA_SPEC_DIR"
_HEADER_LINE = re.compile(r"\\\*\s*([A-Za-z][\w-]*)\s*:\s*(.*?)\s*$")
_MODULE_NAME = re.compile(r"\w+")


@dataclass(frozen=True)
class ModelConfig:
    """One model config of the spec and what its header says."""

    name: str
    path: Path
    module: str
    expect: Outcome
    about: str = ""
    bounds: str = ""
    check_deadlock: bool = False
    header: Mapping[str, str] = field(default_factory=dict)
    alone: bool = False
    """Header `\\* cores: all`: a large config, checked by itself with a TLC worker per job
    (`kreplica check --jobs N`), before the configs that share the cores."""

    @property
    def module_path(self) -> Path:
        """The .tla file that this config checks."""
        return self.path.parent / f"{self.module}.tla"


def default_spec_dir() -> Path:
    """`spec/` beside the `conformance/` folder that holds this file (conformance/tla/specs.py).

    In a checkout that folder is reached through the link src/kreplica/conformance and resolves
    to the project root's conformance/, so this is the checkout's spec/ (also for a mutation
    overlay, whose conformance is a link to the real one). In an installed wheel, which has no
    links, it is the `kreplica` package's spec/: pyproject.toml's package-data puts spec/ there,
    through the link src/kreplica/spec. Pinned by tests/test_wheel.py."""
    return Path(__file__).resolve().parents[2] / "spec"


def resolve_spec_dir(spec_dir: str | Path | None = None) -> Path:
    """The spec directory: `spec_dir`, else $KREPLICA_SPEC_DIR, else `default_spec_dir()`."""
    chosen = spec_dir or os.environ.get(SPEC_DIR_ENV) or default_spec_dir()
    path = Path(chosen).resolve()
    if not path.is_dir():
        raise SpecError(f"spec directory not found: {path}")
    return path


def parse_header(text: str) -> dict[str, str]:
    """Read `\\* key: value` lines from the comment block at the top of a config."""
    header: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("\\*"):
            break
        match = _HEADER_LINE.match(stripped)
        if match:
            header[match.group(1).lower()] = match.group(2)
    return header


def config_names(spec_dir: Path) -> list[str]:
    """The names of all model configs in `spec_dir`."""
    return sorted(p.stem for p in spec_dir.glob("*.cfg"))


def _config_name(name: str) -> str:
    """Accept `Name` or `Name.cfg`."""
    return name[:-4] if name.endswith(".cfg") else name


def _known(names: Sequence[str]) -> str:
    """List names for an error message."""
    return ", ".join(names) if names else "none"


def load_config(spec_dir: Path, name: str) -> ModelConfig:
    """Read the config `name` of `spec_dir` and validate its header."""
    name = _config_name(name)
    path = spec_dir / f"{name}.cfg"
    if "/" in name or not path.is_file():
        known = _known(config_names(spec_dir))
        raise SpecError(f"unknown config {name!r} in {spec_dir} (known: {known})")
    try:
        header = parse_header(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{path}: cannot read: {err}") from None
    return _from_header(name, path, header)


def _from_header(name: str, path: Path, header: Mapping[str, str]) -> ModelConfig:
    """Build a ModelConfig from a parsed header."""
    if "expect" not in header:
        raise SpecError(f"{path}: no '\\* expect: ...' line in the header comment")
    try:
        expect = Outcome.parse(header["expect"])
    except ValueError as err:
        raise SpecError(f"{path}: bad 'expect' header: {err}") from None
    module = header.get("module") or name
    if not _MODULE_NAME.fullmatch(module):
        raise SpecError(f"{path}: bad 'module' header: {module!r}")
    deadlock = header.get("deadlock", "off").lower()
    if deadlock not in ("check", "off"):
        raise SpecError(f"{path}: bad 'deadlock' header: {deadlock!r} (use 'check' or 'off')")
    cores = header.get("cores", "one").lower()
    if cores not in ("all", "one"):
        raise SpecError(f"{path}: bad 'cores' header: {cores!r} (use 'all' or 'one')")
    return ModelConfig(
        name=name,
        path=path,
        module=module,
        expect=expect,
        about=header.get("about", ""),
        bounds=header.get("bounds", ""),
        check_deadlock=deadlock == "check",
        header=dict(header),
        alone=cores == "all",
    )


def load_suites(spec_dir: Path) -> dict[str, list[str]]:
    """Read `suites.toml`: suite name -> config names."""
    path = spec_dir / SUITES_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path} not found (name configs with --config instead)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise SpecError(f"{path}: cannot read: {err}") from None
    suites = data.get("suites")
    if not isinstance(suites, dict):
        raise SpecError(f"{path}: expected a [suites.<name>] table")
    return {name: _suite_configs(path, name, body) for name, body in suites.items()}


def _suite_configs(path: Path, name: str, body: object) -> list[str]:
    """Validate one suite's `configs` list."""
    configs = body.get("configs") if isinstance(body, dict) else None
    if not isinstance(configs, list) or not all(isinstance(c, str) for c in configs):
        raise SpecError(f'{path}: [suites.{name}] needs configs = ["Name", ...]')
    return [_config_name(c) for c in configs]


def select_configs(
    spec_dir: Path, suite: str | None = DEFAULT_SUITE, names: Sequence[str] = ()
) -> list[ModelConfig]:
    """The configs to check: `names` if any were given, else those of `suite`."""
    if not names:
        suites = load_suites(spec_dir)
        if suite not in suites:
            raise SpecError(f"unknown suite {suite!r} (known: {_known(sorted(suites))})")
        names = suites[suite]
    unique = list(dict.fromkeys(_config_name(n) for n in names))
    return [load_config(spec_dir, n) for n in unique]
