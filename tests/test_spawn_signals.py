"""A Ctrl-C while a child is forked goes off after the fork, not inside Python's at-fork hooks.

`subprocess.Popen` with a `preexec_fn` runs Python's at-fork handlers; logging's releases the
logging module's lock after the fork. A KeyboardInterrupt raised there is swallowed and leaves
the lock held, and the process hangs at its next fork or log call: a `kreplica kafka run`
interrupted while it started a JVM did. `tla.tlc.interrupts_deferred` holds the signal back.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from types import FrameType

import pytest

from kreplica.conformance.tla.tlc import death_signal, interrupts_deferred


def _lock_is_free() -> bool:
    """Another thread can take the logging module's lock (it is reentrant, so this thread
    could take it even if it were leaked)."""
    took: list[bool] = []

    def take() -> None:
        lock = logging._lock  # type: ignore[attr-defined]  # the lock the at-fork hook takes
        took.append(lock.acquire(timeout=5))
        if took[-1]:
            lock.release()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return took == [True]


def test_ctrl_c_during_the_block_goes_off_when_it_ends() -> None:
    reached = []
    # Python's own Ctrl-C handler (a test session with Spark running has Spark's instead)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            proc = subprocess.Popen(["true"], preexec_fn=death_signal())
            reached.append(proc.wait())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, saved)
    assert reached == [0], "the fork and the wait ran to the end before the interrupt"
    assert _lock_is_free()


def test_the_callers_handler_gets_the_held_signal_and_is_restored() -> None:
    got: list[int] = []

    def mine(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    saved = signal.signal(signal.SIGTERM, mine)
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == [], "held back inside the block"
        assert got == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_no_signal_no_change() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with interrupts_deferred():
        pass
    assert {s: signal.getsignal(s) for s in before} == before


def test_outside_the_main_thread_it_holds_nothing_back() -> None:
    """Only the main thread runs Python's handlers (and may set them): elsewhere, a no-op."""
    errors: list[BaseException] = []

    def body() -> None:
        try:
            with interrupts_deferred():
                pass
        except BaseException as err:  # reported to the test below
            errors.append(err)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert errors == []
