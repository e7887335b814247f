"""A mutation run's results: results.json (rewritten atomically after every mutant, so a crash
loses nothing and a re-run with the same folder resumes), the equivalent mutants' arguments,
the tally and the kill rate, and a Markdown report.

results.json: `{"settings": {...}, "outcomes": [Outcome.to_json(), ...]}` in the order run.
The kill rate is (killed + timeout) / (killed + timeout + survived): equivalent, stillborn and
error mutants are out of it (docs/mutation.md says why).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kreplica.conformance.errors import KreplicaError, file_error
from kreplica.conformance.mutation.campaign import (
    EQUIVALENT,
    ERROR,
    KILLED,
    STILLBORN,
    SURVIVED,
    TIMEOUT,
    Outcome,
)

EQUIVALENT_FILE = Path(__file__).with_name("equivalent.toml")
"""The arguments for equivalent mutants shipped with kreplica (one table entry per mutant id)."""

RESULTS = "results.json"


def load_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """Mutant id -> the argument why it is equivalent (KreplicaError: unreadable, not TOML, or
    an entry that is not one non-empty string)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise file_error("read", path, err) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise KreplicaError(f"{path}: not TOML: {err}") from None
    table = data.get("equivalent", {})
    if not isinstance(table, dict):
        raise KreplicaError(f"{path}: [equivalent] must be a table of mutant id = argument")
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip():
            raise KreplicaError(f"{path}: {key}: the argument must be a non-empty string")
    return dict(table)


@dataclass(slots=True)
class Results:
    """The outcomes so far of one run, kept in `folder`/results.json."""

    folder: Path
    settings: dict[str, Any]
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    @classmethod
    def open(cls, folder: Path, settings: dict[str, Any]) -> Results:
        """The results in `folder`: resumed if its results.json has the same settings (but for
        `error` outcomes, which are run again), a fresh set otherwise. KreplicaError: the
        folder cannot be made, or its results.json is not ours or has other settings."""
        if folder.exists() and not folder.is_dir():
            raise KreplicaError(f"--out {folder} is not a directory")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise file_error("create", folder, err) from None
        results = cls(folder, settings)
        path = folder / RESULTS
        if not path.exists():
            return results
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            saved = data["settings"]
            outcomes = [Outcome.from_json(o) for o in data["outcomes"]]
        except OSError as err:
            raise file_error("read", path, err) from None
        except (ValueError, KeyError, TypeError) as err:
            raise KreplicaError(f"{path}: not a mutation results file ({err})") from None
        if saved != settings:
            raise KreplicaError(
                f"{path} was made with other settings ({_differ(saved, settings)}); "
                "choose another --out or remove it"
            )
        results.outcomes = {o.mutant: o for o in outcomes if o.verdict != ERROR}
        return results

    def add(self, outcome: Outcome) -> None:
        """Record one outcome and rewrite results.json atomically (tmp file + os.replace)."""
        self.outcomes[outcome.mutant] = outcome
        path = self.folder / RESULTS
        tmp = path.with_name(f".{RESULTS}.{os.getpid()}.tmp")
        body = {
            "settings": self.settings,
            "outcomes": [o.to_json() for o in self.outcomes.values()],
        }
        try:
            tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise file_error("write", path, err) from None


def _differ(saved: dict[str, Any], settings: dict[str, Any]) -> str:
    """The settings that differ, as `name: old -> new`."""
    keys = sorted(set(saved) | set(settings))
    return ", ".join(
        f"{k}: {saved.get(k)!r} -> {settings.get(k)!r}"
        for k in keys
        if saved.get(k) != settings.get(k)
    )


@dataclass(frozen=True, slots=True)
class Tally:
    """Counts of verdicts over the sampled mutants, and the kill rate over the non-equivalent
    mutants that ran (killed + timeout over killed + timeout + survived)."""

    counts: dict[str, int]
    by: dict[str, int]
    """Kills by "fuzz" and by "conformance", whichever campaign (protocol variant) it was."""
    in_variants: int = 0
    """Kills in a variant's campaign (`Campaign.variants`), counted in `by` too."""

    @property
    def killed(self) -> int:
        """Killed by fuzz or conformance, plus timeouts."""
        return self.counts.get(KILLED, 0) + self.counts.get(TIMEOUT, 0)

    @property
    def rate(self) -> float | None:
        """The kill rate (None: no mutant counted)."""
        whole = self.killed + self.counts.get(SURVIVED, 0)
        return self.killed / whole if whole else None


def tally(outcomes: list[Outcome]) -> Tally:
    """Count the verdicts, and who killed."""
    counts = Counter(o.verdict for o in outcomes)
    killers = [o.by for o in outcomes if o.verdict == KILLED and o.by]
    by = Counter(killer.split(" ")[0] for killer in killers)
    return Tally(dict(counts), dict(by), sum(" (" in killer for killer in killers))


VERDICT_ORDER = (KILLED, TIMEOUT, SURVIVED, EQUIVALENT, STILLBORN, ERROR)


def markdown(outcomes: list[Outcome], equivalent: dict[str, str], header: str = "") -> str:
    """A Markdown report: the tally, the kill rate, then every survivor, equivalent, stillborn
    and error mutant with its reason."""
    t = tally(outcomes)
    rate = "n/a" if t.rate is None else f"{100 * t.rate:.1f}%"
    lines = [header, ""] if header else []
    lines += [
        "| verdict | mutants |",
        "|---|---:|",
        f"| killed by fuzz | {t.by.get('fuzz', 0)} |",
        f"| killed by conformance | {t.by.get('conformance', 0)} |",
        f"| (of these, in a variant's campaign) | ({t.in_variants}) |",
        f"| timeout (counted killed) | {t.counts.get(TIMEOUT, 0)} |",
        f"| survived | {t.counts.get(SURVIVED, 0)} |",
        f"| equivalent | {t.counts.get(EQUIVALENT, 0)} |",
        f"| stillborn | {t.counts.get(STILLBORN, 0)} |",
        f"| error | {t.counts.get(ERROR, 0)} |",
        f"| **sampled** | **{len(outcomes)}** |",
        "",
        f"Kill rate over non-equivalent mutants: **{rate}** "
        f"({t.killed} of {t.killed + t.counts.get(SURVIVED, 0)}).",
        "",
    ]
    for verdict in (SURVIVED, EQUIVALENT, STILLBORN, ERROR):
        chosen = [o for o in outcomes if o.verdict == verdict]
        if not chosen:
            continue
        lines += [f"### {verdict} ({len(chosen)})", "", "| mutant | edit | why |", "|---|---|---|"]
        for o in sorted(chosen, key=lambda o: o.mutant):
            why = equivalent.get(o.mutant, o.detail) if verdict == EQUIVALENT else o.detail
            if verdict == SURVIVED and not why:
                why = "fuzz and conform both passed (docs/mutation.md says why, by cause)"
            lines.append(f"| `{o.mutant}` | {_code(o.description)} | {_cell(why)} |")
        lines.append("")
    return "\n".join(lines)


def _code(text: str) -> str:
    """Text as one Markdown code span (double backticks when it holds a backtick)."""
    text = _cell(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
