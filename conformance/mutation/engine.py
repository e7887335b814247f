"""The mutation run: sample the mutants, mark the equivalent ones, run the rest through the
campaign (in parallel, `jobs` at a time), and record each outcome as it comes.

A mutant argued equivalent in equivalent.toml before its run is not run; one argued after it
ran (and survived) is reported equivalent when the results are read again (`judged`), so a
re-run of the same command with the same --out re-reads the arguments without re-running.

`kreplica mutate` (conformance/cli/mutate.py) parses and renders around `run`; call `run` from
Python rather than the command, which exits instead of returning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, replace
from pathlib import Path

from kreplica.conformance.mutation.campaign import (
    EQUIVALENT,
    KILLED,
    SURVIVED,
    TIMEOUT,
    Campaign,
    Outcome,
    allow_runs,
    run_mutant,
    stop_all,
)
from kreplica.conformance.mutation.operators import Mutant
from kreplica.conformance.mutation.results import Results
from kreplica.conformance.mutation.sites import all_mutants, sample


def plan(size: int, seed: int) -> list[Mutant]:
    """The sample of `size` mutants of the core for `seed`, in the order drawn."""
    return sample(all_mutants(), size, seed)


def picked(ids: Sequence[str]) -> list[Mutant]:
    """The mutants of the core named by `ids`, in that order; KeyError naming the first id
    that is no mutant's."""
    by_id = {m.id: m for m in all_mutants()}
    for mutant_id in ids:
        if mutant_id not in by_id:
            raise KeyError(mutant_id)
    return [by_id[mutant_id] for mutant_id in dict.fromkeys(ids)]


def settings_of(
    size: int, seed: int, campaign: Campaign, ids: Sequence[str] = ()
) -> dict[str, object]:
    """What a results.json must share to be resumed: the sample (or the mutants picked by id)
    and the campaign."""
    chosen: dict[str, object] = {"mutants": list(ids)} if ids else {"sample": size}
    return {**chosen, "seed": seed, **asdict(campaign), "variants": list(campaign.variants)}


def run(
    mutants: list[Mutant],
    results: Results,
    campaign: Campaign,
    equivalent: dict[str, str],
    jobs: int = 1,
    on_outcome: Callable[[Outcome], None] | None = None,
    scratch: Path | None = None,
) -> list[Outcome]:
    """Run every mutant not yet in `results` (an equivalent one is recorded, not run); return
    the outcomes of all `mutants` in sample order. Ctrl-C kills every running command."""
    todo = []
    for mutant in mutants:
        if mutant.id in results.outcomes:
            continue
        if mutant.id in equivalent:
            done = Outcome(mutant.id, EQUIVALENT, description=mutant.description,
                           detail=equivalent[mutant.id])  # fmt: skip
            results.add(done)
            if on_outcome is not None:
                on_outcome(done)
        else:
            todo.append(mutant)
    allow_runs()
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="mutant") as pool:
        futures: list[Future[Outcome]] = [
            pool.submit(run_mutant, m, campaign, scratch) for m in todo
        ]
        try:
            for future in as_completed(futures):
                outcome = future.result()
                results.add(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
        except BaseException:
            for future in futures:
                future.cancel()
            stop_all()
            raise
    return [judged(results.outcomes[m.id], equivalent) for m in mutants]


def judged(outcome: Outcome, equivalent: dict[str, str]) -> Outcome:
    """The outcome as reported: a survivor argued equivalent (after it ran) is equivalent, with
    the argument as its detail. A killed mutant stays killed whatever the file says: a kill
    refutes the argument (`refuted` lists those)."""
    if outcome.verdict != SURVIVED or outcome.mutant not in equivalent:
        return outcome
    return replace(outcome, verdict=EQUIVALENT, detail=equivalent[outcome.mutant])


def refuted(outcomes: list[Outcome], equivalent: dict[str, str]) -> list[Outcome]:
    """Mutants argued equivalent that the campaign killed: their argument is wrong."""
    return [o for o in outcomes if o.mutant in equivalent and o.verdict in (KILLED, TIMEOUT)]
