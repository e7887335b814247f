"""The wheel works outside a checkout: built by `pip wheel`, installed into a fresh venv and run
in an empty directory, kreplica finds the spec, its configs and the Java reader's sources inside
the installed package (`tla.specs.default_spec_dir`), and can check, fuzz, conform and explain.

Offline and quick (17 s alone, 34 s beside other work on two cores): the wheel is built with
`--no-build-isolation` from a copy of the project's package sources in a temporary directory, so
nothing is written into the checkout. The fresh venv has no pip of its own: the project venv's
pip installs the wheel into it with `--no-deps`. Its dependencies (PySpark and the rest) are the
project venv's, seen through a .pth file that names the project venv's site-packages as a plain
path entry: the .pth files in there, the editable install's entry for src/ among them, are not
read, so the kreplica that the fresh venv imports can only be the installed one (asserted).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from kreplica.conformance.coverage.graph import default_cache_dir
from kreplica.conformance.validate import tlcdata

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "src", "impl", "conformance", "spec")
"""What `pip wheel .` reads: the project table and the import root with the folders it links."""
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "target")
TIMEOUT = 300


@dataclass(frozen=True)
class Installed:
    """A fresh venv with the built wheel in it, and an empty directory to run it in."""

    wheel: Path
    venv: Path
    env: dict[str, str]
    workdir: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the venv's `kreplica` in the empty directory."""
        return subprocess.run(
            [str(self.venv / "bin" / "kreplica"), *args], cwd=self.workdir, env=self.env,
            capture_output=True, text=True, timeout=TIMEOUT,
        )  # fmt: skip


def _pip(*args: str) -> None:
    """The project venv's pip, offline."""
    subprocess.run([sys.executable, "-m", "pip", "-q", *args, "--no-index"], check=True,
                   capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip


def _build_wheel(where: Path) -> Path:
    """`pip wheel` of a copy of the project (its build/ and egg-info land in the copy)."""
    project = where / "project"
    project.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, symlinks=True, ignore=LEFT_OUT)
        elif source.is_file():
            shutil.copy2(source, project / name)
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(where / "dist"), str(project))
    (wheel,) = (where / "dist").glob("kreplica-*.whl")
    return wheel


def _fresh_venv(venv: Path) -> dict[str, str]:
    """A venv without pip that sees the project venv's dependencies but not its kreplica; the
    environment to run it with."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=TIMEOUT)  # fmt: skip
    python = str(venv / "bin" / "python")
    ask = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([python, "-c", ask], check=True, capture_output=True, text=True)
    deps = dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib"))
    (Path(purelib.stdout.strip()) / "kreplica-test-deps.pth").write_text("\n".join(deps) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KREPLICA_"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env["KREPLICA_CACHE_DIR"] = str(venv.parent / "cache")  # the reader compiled from the wheel's
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel, built and installed into a fresh venv (once for this file)."""
    where = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(where)
    venv = where / "venv"
    env = _fresh_venv(venv)
    _pip("--python", str(venv / "bin" / "python"), "install", "--no-deps", str(wheel))
    workdir = where / "empty"
    workdir.mkdir()
    return Installed(wheel, venv, env, workdir)


def test_the_wheel_ships_every_file_of_spec_and_the_java_readers_sources(
    installed: Installed,
) -> None:
    """spec/ (the modules, every config, suites.toml) as kreplica/spec/, and the trace reader's
    .java files beside the module that compiles them."""
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    spec = {f"kreplica/spec/{p.name}" for p in (ROOT / "spec").iterdir() if p.is_file()}
    java = ROOT / "conformance" / "validate" / "java"
    reader = {f"kreplica/conformance/validate/java/{p.name}" for p in java.glob("*.java")}
    compiled = {p.name for p in tlcdata.JAVA_SOURCES}  # what the reader is compiled from
    assert "kreplica/spec/S1_HwTruncation.cfg" in spec
    assert {n.rpartition("/")[2] for n in reader} == compiled
    assert spec | reader <= names, sorted((spec | reader) - names)


@pytest.mark.tlc
def test_the_fresh_venv_imports_the_installed_kreplica_and_its_spec(installed: Installed) -> None:
    """kreplica, and the spec it finds, are inside the fresh venv: not the checkout's, not
    through the editable install's src/ entry."""
    probe = (
        "import json, sys, kreplica\n"
        "from kreplica.conformance.tla.specs import resolve_spec_dir\n"
        "print(json.dumps([kreplica.__file__, str(resolve_spec_dir()), sys.path]))"
    )
    python = str(installed.venv / "bin" / "python")
    out = subprocess.run([python, "-c", probe], cwd=installed.workdir, env=installed.env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    module, spec, path = json.loads(out.stdout)
    venv = installed.venv.resolve()
    assert Path(module).resolve().is_relative_to(venv), module
    assert not Path(module).resolve().is_relative_to(ROOT), module
    assert Path(spec) == Path(module).resolve().parent / "spec"
    assert str(ROOT / "src") not in path


@pytest.mark.tlc
def test_the_installed_wheel_checks_and_conforms_and_explains_in_an_empty_directory(
    installed: Installed,
) -> None:
    """S1's model is checked (its expected violation: exit 0), its counterexample conforms to
    the trace spec under its variant, with the reader compiled from the wheel's sources, and is
    drawn."""
    check = installed.run("check", "--config", "S1_HwTruncation")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "1 configs, 1 as expected" in check.stdout
    trace = "out/counterexamples/S1_HwTruncation.itf.json"
    assert (installed.workdir / trace).is_file()
    conform = installed.run("conform", trace, "--variant", "truncation=hw", "--no-spark",
                            "--workers", "1", "--out", "out/conform")  # fmt: skip
    assert conform.returncode == 0, conform.stdout + conform.stderr
    assert list((installed.venv.parent / "cache").glob("tlc-reader/*/TraceData.class"))
    explain = installed.run("explain", trace, "--svg", "out/s1.svg")
    assert explain.returncode == 0, explain.stdout + explain.stderr
    assert (installed.workdir / "out" / "s1.svg").stat().st_size > 0


@pytest.mark.tlc
def test_the_installed_wheel_fuzzes_in_an_empty_directory(installed: Installed) -> None:
    """Twenty runs of the correct protocol: no invariant fails."""
    fuzz = installed.run("fuzz", "--examples", "20")
    assert fuzz.returncode == 0, fuzz.stdout + fuzz.stderr
    assert "runs 20," in fuzz.stdout


def test_an_installed_specs_coverage_cache_is_not_written_into_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec/ whose parent is a package (an installed wheel's) caches its state graphs in the
    user's kreplica cache; a checkout's spec/, in the checkout's build/coverage/."""
    monkeypatch.setenv("KREPLICA_CACHE_DIR", str(tmp_path / "cache"))
    package = tmp_path / "site-packages" / "kreplica"
    (package / "spec").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert default_cache_dir(package / "spec") == tmp_path / "cache" / "coverage"
    assert default_cache_dir(ROOT / "spec") == ROOT / "build" / "coverage"
