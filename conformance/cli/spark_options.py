"""The `--conf KEY=VALUE` option that `conform`, `check`, `fuzz --master` and `bench swarm`
share, read without importing what any of them runs (PySpark, pyarrow)."""

from __future__ import annotations

import click


def read_spark_conf(confs: tuple[str, ...], no_spark: bool = False) -> dict[str, str]:
    """--conf KEY=VALUE pairs as Spark properties (one line for a malformed one, or for any
    with --no-spark)."""
    if confs and no_spark:
        raise click.BadParameter("--conf sets Spark properties; it does nothing with --no-spark")
    bad = [c for c in confs if "=" not in c or not c.split("=", 1)[0]]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not KEY=VALUE", param_hint="'--conf'")
    return dict(c.split("=", 1) for c in confs)
