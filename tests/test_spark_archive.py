"""Spark's local JVM and its class-data-sharing archive (`spark.archive_options`): written as a
draft when the JVM exits, put in place by a later run once no JVM is writing it, used after."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kreplica.conformance import spark


def wait_for_command_line(pid: int, word: str) -> None:
    """Until the process's command line names `word`: a child just forked still shows its
    parent's until it execs, and a busy machine widens that window."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    deadline = time.monotonic() + 30
    while word.encode() not in cmdline.read_bytes():
        assert time.monotonic() < deadline, f"process {pid} never named {word}"
        time.sleep(0.01)


def test_no_directory_no_archive() -> None:
    assert spark.archive_options(None) == []


def test_a_draft_is_written_then_put_in_place_once_no_jvm_writes_it(tmp_path: Path) -> None:
    """The first run asks for a draft named after its process; a later run puts a finished
    draft in place and maps it; a draft still named on a command line (its JVM is writing it)
    is left alone, and dropped once an archive is in place."""
    first = spark.archive_options(tmp_path)
    assert first[0].startswith("-XX:ArchiveClassesAtExit=") and first[0].endswith(".draft")
    draft = Path(first[0].split("=", 1)[1])
    draft.write_bytes(b"classes")
    busy = draft.with_name(draft.name.replace(".draft", "0.draft"))
    busy.write_bytes(b"half")
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(busy)])
    try:
        wait_for_command_line(writer.pid, str(busy))
        options = spark.archive_options(tmp_path)
        archive = Path(options[0].split("=", 1)[1])
        assert options[0].startswith("-XX:SharedArchiveFile=")
        assert archive.read_bytes() == b"classes" and busy.exists()
    finally:
        writer.kill()
        writer.wait()
    assert spark.archive_options(tmp_path) == options
    assert not busy.exists()


def test_the_zips_shipped_to_executors_are_removed_at_exit() -> None:
    """`package_zip` and `installed_zip` write into temporary directories of their own, which
    the process removes when it exits (each run used to leave its zips behind)."""
    made = subprocess.run(
        [sys.executable, "-c", "from kreplica.conformance import spark; "
         "print(spark.package_zip()); print(spark.installed_zip(('click',)))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    zips = [Path(line) for line in made.stdout.split()]
    assert len(zips) == 2 and all(z.name.endswith(".zip") for z in zips)
    assert not any(z.parent.exists() for z in zips)
