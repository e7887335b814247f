"""Local mode's Python daemon (`spark.daemon`): the workers import PySpark and py4j from the
installed packages, compiled, not from the source zips Spark puts first on their path; every
other master keeps PySpark's own daemon, named."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import pytest

from kreplica.conformance import spark


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java (Spark)")
def test_local_workers_import_the_installed_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # spark_context sets it: undone after
    sc = spark.spark_context("local[2]")
    assert sc.getConf().get("spark.python.daemon.module") == spark.DAEMON

    def where(_: Any) -> list[tuple[str, str, list[str]]]:  # on a worker (pickled by value)
        import py4j
        import pyspark

        libs = spark.SPARK_PYTHON_LIBS
        zips = [p for p in sys.path if libs.fullmatch(p.rsplit("/", 1)[-1])]
        return [(str(pyspark.__file__), str(py4j.__file__), zips)]

    found = sc.parallelize([0, 1], 2).mapPartitions(where).collect()
    assert len(found) == 2
    for pyspark_file, py4j_file, zips in found:
        assert "site-packages" in pyspark_file and ".zip" not in pyspark_file, pyspark_file
        assert ".zip" not in py4j_file, py4j_file
        assert any(z.endswith("pyspark.zip") for z in zips), zips  # still there, last


def test_other_masters_and_other_pythons_keep_pysparks_daemon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster's workers lack kreplica; a local worker that runs another Python may too."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert spark.daemon_module(local=True) == spark.DAEMON
    assert spark.daemon_module(local=False) == spark.SPARK_DAEMON
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    assert spark.daemon_module(local=True) == spark.SPARK_DAEMON


def test_local_workers_run_this_python_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Local mode's workers run the driver's Python unless `spark.pyspark.python` or
    PYSPARK_PYTHON names another; a cluster's workers never count as this Python."""
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert spark.workers_run_this_python("local[2]")
    assert spark.workers_run_this_python("local-cluster[2,1,1024]")
    assert not spark.workers_run_this_python("spark://127.0.0.1:7077")
    other = {"spark.pyspark.python": "/usr/bin/python3"}
    assert not spark.workers_run_this_python("local[2]", other)
    assert spark.workers_run_this_python("local[2]", {"spark.pyspark.python": sys.executable})
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    assert not spark.workers_run_this_python("local[*]")


def test_the_daemon_puts_sparks_zips_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Spark puts first (PySpark and py4j as source zips, its core jar) goes last, in
    order; the rest keeps its order."""
    lib = "/opt/spark/python/lib"
    jar = "/opt/spark/jars/spark-core_2.13-4.3.0.jar"
    path = [f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip", jar, "/a", "/b"]
    monkeypatch.setattr(sys, "path", list(path))
    started: list[list[str]] = []
    import pyspark.daemon

    monkeypatch.setattr(pyspark.daemon, "manager", lambda: started.append(list(sys.path)))
    spark.daemon()
    assert started == [["/a", "/b", *path[:3]]]
