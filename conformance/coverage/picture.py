"""The coverage report as a picture (matplotlib): per action, the graph's edges and those some
trace took; per BFS depth, the graph's states and those some trace reached.

Contract: `draw(report, path)` writes one figure, PNG or SVG by the path's suffix, and returns
the path. Rules: it reads a CoverageReport only, and uses matplotlib's Agg backend (no display).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from .report import CoverageReport


def draw(report: CoverageReport, path: Path) -> Path:
    """Draw `report` into `path` (.png or .svg) and return it."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=80)
    rows = sorted(report.actions, key=lambda r: r.edges)
    names = [r.action for r in rows]
    left.barh(names, [r.edges for r in rows], color="#d0d7e1", label="edges in the graph")
    left.barh(names, [r.covered for r in rows], color="#2b6cb0", label="edges taken")
    left.set_xscale("log")
    left.set_title(f"actions: {report.actions_covered}/{len(report.actions)} taken, "
                   f"edges {report.edges_covered:,}/{report.edges:,}", fontsize=10)  # fmt: skip
    left.tick_params(axis="y", labelsize=7)
    left.legend(fontsize=7, loc="lower right")
    depth = [d for d, _, _ in report.depths]
    right.bar(depth, [t for _, t, _ in report.depths], color="#d0d7e1", label="states")
    right.bar(depth, [c for _, _, c in report.depths], color="#2b6cb0", label="states reached")
    right.set_yscale("log")
    right.set_xlabel("BFS depth (steps from Init)")
    right.set_title(f"states: {report.states_covered:,}/{report.states:,} reached", fontsize=10)
    right.legend(fontsize=7)
    fig.suptitle(f"spec coverage on {report.config}", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
