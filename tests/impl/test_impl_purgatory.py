"""R17: DelayedOperationPurgatory semantics on the simulated clock."""

from __future__ import annotations

from kreplica.impl.clock import SimClock
from kreplica.impl.purgatory import DelayedOperation, DelayedOperationPurgatory


class Op(DelayedOperation):
    """Completes when `ready` is set; records the order of its callbacks."""

    def __init__(self, delay_ms: int, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.events: list[str] = []
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.events.append("expire")


def purgatory() -> tuple[SimClock, DelayedOperationPurgatory[Op]]:
    clock = SimClock()
    return clock, DelayedOperationPurgatory("test", clock)


def watched(p: DelayedOperationPurgatory[Op]) -> int:
    """Watch-list entries, completed ones included until their key is checked (PurgatorySize)."""
    return sum(len(ops) for ops in p.watchers.values())


def delayed(p: DelayedOperationPurgatory[Op]) -> int:
    """Operations waiting in the expiry timer (NumDelayedOperations)."""
    return len(p.pending())


def test_r17_try_complete_else_watch_completes_at_once_without_watching() -> None:
    _, p = purgatory()
    op = Op(100, ready=True)
    assert p.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.events == ["complete"]
    assert watched(p) == 0 and delayed(p) == 0


def test_r17_try_complete_else_watch_watches_every_key_tries_once_and_arms_timer() -> None:
    _, p = purgatory()
    op = Op(100)
    assert p.try_complete_else_watch(op, ["a", "b"]) is False
    assert op.tries == 1  # one thread: Kafka's second try, for a racing completion, is left out
    assert watched(p) == 2 and delayed(p) == 1


def test_r17_check_and_complete_counts_and_purges_key() -> None:
    _, p = purgatory()
    first, second = Op(100), Op(100)
    p.try_complete_else_watch(first, ["a", "b"])
    p.try_complete_else_watch(second, ["a"])
    assert p.check_and_complete("a") == 0
    first.ready = True
    assert p.check_and_complete("a") == 1
    assert first.events == ["complete"]
    assert delayed(p) == 1
    # the completed op lingers in key b's list until b is checked or purged
    assert watched(p) == 2
    assert p.check_and_complete("b") == 0
    assert watched(p) == 1
    assert p.check_and_complete("missing") == 0


def test_r17_expiry_follows_the_simulated_clock_in_deadline_order() -> None:
    clock, p = purgatory()
    late, early = Op(200), Op(100)
    p.try_complete_else_watch(late, ["a"])
    p.try_complete_else_watch(early, ["a"])
    clock.advance(99)
    assert p.advance_clock() == 0
    clock.advance(1)
    assert p.advance_clock() == 1
    # Kafka runs forceComplete (onComplete) and then onExpiration
    assert early.events == ["complete", "expire"] and early.expired
    assert late.events == []
    assert p.next_expiry_ms() == 200
    clock.advance(500)
    assert p.advance_clock() == 1
    assert delayed(p) == 0


def test_r17_completed_ops_do_not_expire() -> None:
    clock, p = purgatory()
    op = Op(100)
    p.try_complete_else_watch(op, ["a"])
    op.ready = True
    p.check_and_complete("a")
    clock.advance(1_000)
    assert p.advance_clock() == 0
    assert op.events == ["complete"]


def test_r17_checking_a_key_drops_its_lingering_entries() -> None:
    _, p = purgatory()
    op = Op(100)
    p.try_complete_else_watch(op, ["a", "b", "c"])
    op.force_complete()
    assert watched(p) == 3 and delayed(p) == 0
    assert p.check_and_complete("b") == 0
    assert watched(p) == 2
