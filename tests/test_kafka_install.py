"""What the real cluster needs from the machine, missing: Maven (for `make kafka`) and iptables
(for a schedule with a partition). Each is one line naming the fix, before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kreplica.conformance.kafka.install import CHECKOUT

BIN = Path(sys.executable).parent
"""The venv's bin directory: kreplica and python, and no system tool."""


def test_make_kafka_without_maven_says_how_to_get_it_in_one_line(tmp_path: Path) -> None:
    """The install step, on a PATH without mvn (nor apt-get to install it): make fails with
    one line of its own, and no jar directory is made."""
    lib, tools = tmp_path / "lib", tmp_path / "tools"
    tools.mkdir()
    (tools / "id").symlink_to("/usr/bin/id")  # the recipe asks whether it runs as root
    done = subprocess.run(
        ["/usr/bin/make", "-s", "-C", str(CHECKOUT), f"KAFKA_LIB={lib}", f"{lib}/.installed"],
        capture_output=True, text=True, env={"PATH": f"{BIN}:{tools}"}, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert errors == ["mvn not found: install Maven, e.g. 'apt-get install -y maven'"]
    assert not lib.exists()


def test_a_partition_without_iptables_is_one_line_and_exit_4(tmp_path: Path) -> None:
    """A schedule that partitions the network, on a PATH without iptables: refused before any
    JVM starts."""
    schedule = CHECKOUT / "schedules" / "acks-all-leader-partition.json"
    done = subprocess.run(
        [str(BIN / "kreplica"), "kafka", "run", str(schedule), "--workdir", str(tmp_path / "run"),
         "--port-base", "19490"],
        capture_output=True, text=True, env={"PATH": str(BIN)}, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kreplica: error: iptables not found"), lines
