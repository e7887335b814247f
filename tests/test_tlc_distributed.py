"""TLC's own distributed mode on loopback (conformance/tla/distributed.py): a real TLCServer and
one TLCWorker over RMI explore the same state space as plain TLC, a counterexample comes back
as TLC 2.15 prints it (two states, no violation message), a config with properties is refused,
and no process of a run is left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kreplica.conformance.errors import CheckerError
from kreplica.conformance.tla.distributed import (
    DistributedOptions,
    DistributedRun,
    has_properties,
    run_distributed,
    server_command,
    worker_command,
)
from kreplica.conformance.tla.specs import default_spec_dir
from kreplica.conformance.tla.tlc import TlcOptions, find_java, find_tla2tools, run_tlc
from kreplica.conformance.tla.tlc_output import Verdict

FLAGS = ("-XX:+UseSerialGC",)


def distributed(module: Path, config: Path) -> DistributedRun:
    """Check `config` on a server and one worker (one thread) on loopback."""
    options = DistributedOptions(java=find_java(), jar=find_tla2tools(), time_limit=60)
    return run_distributed(module, config, options)


def plain(module: Path, config: Path) -> tuple[str, int | None]:
    """The verdict and distinct states of plain TLC (one worker) on the same config."""
    options = TlcOptions(java=find_java(), jar=find_tla2tools(), jvm_flags=FLAGS, time_limit=60)
    result = run_tlc(module, config, options)
    return str(result.outcome), result.distinct


def assert_nothing_left(run: DistributedRun) -> None:
    """Every process of the run, and its process group, is gone."""
    assert "server" in run.pids
    for pid in run.pids.values():
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


@pytest.mark.tlc
def test_server_and_worker_match_plain_tlc_on_a_config_of_the_spec() -> None:
    """Acks1_Fixed (the real spec, with its VIEW): same verdict and distinct states."""
    spec = default_spec_dir()
    module, config = spec / "KafkaReplication.tla", spec / "Acks1_Fixed.cfg"
    run = distributed(module, config)
    assert_nothing_left(run)
    assert (str(run.result.outcome), run.result.distinct) == plain(module, config)
    assert run.result.outcome.verdict == Verdict.OK
    assert "Registration for worker at rmi://" in run.result.output
    assert "TLC worker with 1 threads ready" in run.outputs["worker1"]
    assert run.exit_codes["server"] == 0 and "worker1" in run.pids


@pytest.mark.tlc
def test_a_counterexample_is_two_states_without_its_invariant(spec_dir: Path) -> None:
    """CounterBug: plain TLC shows 3 states and `Small`; the server shows the last step alone,
    its first state labelled initial, and no violation message, which parses as a crash."""
    module, config = spec_dir / "Counter.tla", spec_dir / "CounterBug.cfg"
    run = distributed(module, config)
    assert_nothing_left(run)
    result = run.result
    assert result.outcome.verdict == Verdict.CRASH
    assert "is violated" not in result.output
    assert [(s.number, s.action) for s in result.trace] == [(1, "Init"), (2, "Inc")]
    assert result.trace[-1].values["x"] == 3  # the state that violates Small (x < 3)
    assert plain(module, config)[0] == "violation Small"


@pytest.mark.tlc
def test_the_time_limit_kills_every_process(spec_dir: Path) -> None:
    """Slow (a billion states): at the limit the server and its worker are killed by process
    group, mid-run, and the verdict is a timeout."""
    options = DistributedOptions(java=find_java(), jar=find_tla2tools(), time_limit=5)
    run = run_distributed(spec_dir / "Slow.tla", spec_dir / "Slow.cfg", options)
    assert run.result.outcome.verdict == Verdict.TIMEOUT
    assert run.exit_codes["server"] is None and "worker1" in run.pids
    assert_nothing_left(run)


def test_a_config_with_properties_is_refused(spec_dir: Path) -> None:
    """Distributed TLC would drop the temporal property without a word: no process starts."""
    assert has_properties(spec_dir / "Liveness.cfg")
    assert not has_properties(spec_dir / "CounterOk.cfg")
    with pytest.raises(CheckerError, match="checks no temporal property"):
        run_distributed(spec_dir / "Deadlock.tla", spec_dir / "Liveness.cfg", DistributedOptions())


def test_the_command_lines(tmp_path: Path) -> None:
    """The server runs in the spec's directory with relative names; a worker names only the
    server's host; both bind RMI to the host given and share the registry port."""
    options = DistributedOptions(java="java", jar=Path("/x/tla2tools.jar"), fpsets=2)
    server = server_command(Path("/s/M.tla"), Path("/s/M.cfg"), options, 4242, tmp_path)
    assert server[server.index("-config") :] == ["-config", "M.cfg", "M.tla"]
    assert "tlc2.tool.distributed.TLCServer" in server and "-deadlock" in server
    assert "-Dtlc2.tool.distributed.TLCServer.expectedFPSetCount=2" in server
    worker = worker_command(options, 4242, tmp_path / "w")
    assert worker[-2:] == ["tlc2.tool.distributed.TLCWorker", "127.0.0.1"]
    for cmd in (server, worker):
        assert "-Dtlc2.tool.distributed.TLCServer.port=4242" in cmd
        assert "-Djava.rmi.server.hostname=127.0.0.1" in cmd
