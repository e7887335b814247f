"""Time where the spec abstracts it: the highwatermark-checkpoint task's period (R13).

The spec lets `CheckpointHighWatermarks` write a broker's HW to its checkpoint file at any
time. Kafka 2.6.3 runs the task on a schedule: `ReplicaManager.startHighWatermarkCheckPointThread`
starts it after the first LeaderAndIsr a broker process takes, due at once and then every
`replica.high.watermark.checkpoint.interval.ms` (a fixed rate), and each run writes the HW of
every partition whose log dir works. This check keeps that schedule itself, from the steps it
sees (a LeaderAndIsr delivered to a running broker, the clock, restarts), and holds the
projected `hwCheckpoint` to it:

- a `Tick` that reaches a broker's next run leaves its file holding its HW (or unchanged, if
  its log dir failed), and moves the next run to the first point of the schedule after now;
- a `Tick` that does not reach it, and every other step (but the `CheckpointHighWatermarks`
  step, which runs the task at once), leaves the file as it was.

Reported as `HwCheckpointOnTime`, like an invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

from kreplica.conformance.bridge.projection import CONTROLLER, NOT_HOSTED, State
from kreplica.impl.cluster import Cluster
from kreplica.impl.messages import LeaderAndIsrRequest
from kreplica.impl.steps import CheckpointHighWatermarks, Deliver, Step, Tick

NAME = "HwCheckpointOnTime"
"""The name a checkpoint written at the wrong time is reported under."""


@dataclass
class _Task:
    """One broker process's checkpoint task: which process, and when it runs next."""

    incarnation: int
    next_ms: int


class CheckpointTimes:
    """The checkpoint task's schedule of every broker, as the steps of a run imply it."""

    def __init__(self, cluster: Cluster, first: State) -> None:
        self.cluster = cluster
        self.interval_ms = cluster.config.replica_high_watermark_checkpoint_interval_ms
        now = cluster.clock.now_ms
        self.tasks: dict[int, _Task] = {
            b: _Task(cluster.incarnation(b), now)  # the bootstrap LeaderAndIsr started them
            for b in cluster.broker_ids
            if cluster.is_alive(b) and first["leaderEpoch"][b - 1] != NOT_HOSTED
        }

    def starts(self, step: Step) -> int | None:
        """The broker whose first LeaderAndIsr of its life `step` delivers (before it runs)."""
        if not (isinstance(step, Deliver) and step.src == CONTROLLER):
            return None
        envelope = self.cluster.network.peek((step.src, step.dst), step.index)
        b = step.dst
        if (
            envelope is None
            or not isinstance(envelope.payload, LeaderAndIsrRequest)
            or not self.cluster.is_alive(b)
            or envelope.dst_incarnation != self.cluster.incarnation(b)
        ):
            return None
        task = self.tasks.get(b)
        return b if task is None or task.incarnation != self.cluster.incarnation(b) else None

    def violations(
        self, step: Step, started: int | None, before: State, after: State
    ) -> list[tuple[str, str]]:
        """What `step` (applied; `started` from `starts`) did to the checkpoint files that
        the schedule does not allow."""
        if self.interval_ms is None:
            return []  # the task runs only when a step says so (a replay of a spec trace)
        now = self.cluster.clock.now_ms
        if started is not None:
            self.tasks[started] = _Task(self.cluster.incarnation(started), now)
        moves = isinstance(step, Tick | CheckpointHighWatermarks)  # else no file may change
        if not moves and after["hwCheckpoint"] == before["hwCheckpoint"]:
            return []
        wrong: list[str] = []
        for b in self.cluster.broker_ids:
            i = b - 1
            old, new = before["hwCheckpoint"][i], after["hwCheckpoint"][i]
            expected = old
            task = self.tasks.get(b)
            running = task is not None and task.incarnation == self.cluster.incarnation(b)
            if isinstance(step, Tick) and running and self.cluster.is_alive(b):
                assert task is not None
                if task.next_ms <= now:
                    if b not in after["logDirOffline"]:
                        expected = after["hw"][i]
                    missed = (now - task.next_ms) // self.interval_ms
                    task.next_ms += (missed + 1) * self.interval_ms
            elif isinstance(step, CheckpointHighWatermarks) and step.broker == b:
                expected = new  # run at once, off the schedule
            if new != expected:
                wrong.append(f"broker {b}'s checkpoint holds HW {new}, expected {expected}")
        if not wrong:
            return []
        return [(NAME, f"{type(step).__name__} at {now} ms: {'; '.join(wrong)}")]
