"""Network partitions between real brokers and ZooKeeper, as iptables DROP rules on loopback.

Every loopback connection leaves from 127.0.0.1, whichever process opens it, so a rule cannot tell
broker 2's fetch from broker 3's by the source address. Each node's JVM therefore runs under a
uid of its own (cluster.py), and a rule drops what one node's uid sends to another node's
address and listening port: `-m owner --uid-owner UID_A -d HOST_B -p tcp --dport PORT_B -j DROP`.
That cuts A's connections to B (their packets never arrive) and B's connections to A (the rule
for B→A), in both directions, since TCP needs both. ZooKeeper opens no connections, so a
broker cut from ZooKeeper needs one rule. The harness's own clients run as root and are never cut.

The rules live in a chain of their own, `KREPLICA-<port base>`, jumped to from OUTPUT; `heal`
flushes it (removing exactly the rules added), and leaving the `Network` context removes the
chain and the jump. Before it creates the chain, entering registers it with the harness's reaper
(reaper.py), which removes it and its jump if the harness is killed with -9, and holds the
chain's lock meanwhile (a reaper of a killed run on the same port base finishes first). A chain
left by a run killed together with its reaper is removed before the next cluster on its port base
starts (cluster.py), so that a left-over cut cannot keep its brokers from ZooKeeper.

Power loss (`PowerDisks`): each broker's log directory is a mount of the power-loss filesystem
(powerloss.py) over `broker-N/disk/`; a power loss kills the broker, drops every write its
directory had not fsynced, and remounts (which also empties the kernel's cache of the mount). A
power loss of a broker whose log directory is not (or no longer) on the filesystem is refused
with PowerLossError (exit 4): it could not drop anything. Leaving the `PowerDisks` context syncs
and unmounts every directory (after the JVMs are gone), so the run directory keeps what the
brokers wrote; a harness killed with -9 leaves no mount and no filesystem process either: each
unmounts when its parent dies, and the reaper unmounts and kills what is left.
"""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kreplica.conformance.kafka.cluster import NODES, Layout, Node, NodeFailed, PortInUse
from kreplica.conformance.kafka.powerloss import (
    Pending,
    PowerLossError,
    PowerLossFS,
    find_fusermount,
    mount,
)
from kreplica.conformance.kafka.reaper import ChainBusy, Reaper, chain_name, reaper, remove_chain
from kreplica.conformance.kafka.schedule import BROKERS, ZK


def full_groups(groups: tuple[tuple[Node, ...], ...]) -> list[set[Node]]:
    """The partition's groups with every node placed: a node in no group stays with ZooKeeper."""
    placed = [set(g) for g in groups]
    missing = set(NODES) - set().union(*placed)
    home = next((g for g in placed if ZK in g), None)
    if home is None:
        home = set()
        placed.append(home)
    home |= missing
    return [g for g in placed if g]


def cut_links(groups: tuple[tuple[Node, ...], ...]) -> list[tuple[Node, Node]]:
    """Every ordered pair (a, b) of nodes in different groups where a may open a connection."""
    placed = full_groups(groups)
    pairs: list[tuple[Node, Node]] = []
    for one, other in itertools.permutations(placed, 2):
        pairs += [(a, b) for a in sorted(one, key=str) for b in sorted(other, key=str) if a != ZK]
    return pairs


@dataclass
class Network:
    """The cluster's partitions: iptables rules in a chain of this run's own."""

    layout: Layout
    iptables: Path
    rules: list[list[str]] = field(default_factory=list)
    reaper: Reaper | None = None
    """The harness's reaper, guarding the chain from `__enter__` until `__exit__` removed it."""

    @property
    def chain(self) -> str:
        """This run's chain (one per port base, so runs on other ports are not touched)."""
        return chain_name(self.layout.port_base)

    def __enter__(self) -> Network:
        """Register the chain with the reaper (PortInUse, exit 5, if another live run's reaper
        guards it), create it (flushing one a killed run left), jump to it from OUTPUT."""
        self.reaper = reaper()
        try:
            self.reaper.guard_chain(self.chain, self.iptables)
        except ChainBusy as err:
            raise PortInUse(str(err)) from None
        try:
            if self._run("-S", self.chain, check=False) == 0:
                self._run("-F", self.chain)
            else:
                self._run("-N", self.chain)
            if self._run("-C", "OUTPUT", "-j", self.chain, check=False) != 0:
                self._run("-I", "OUTPUT", "1", "-j", self.chain)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Remove every rule, the jump and the chain; then the reaper lets the chain be (if
        something stayed, the reaper removes it when the harness exits)."""
        self.rules.clear()
        if not remove_chain(self.iptables, self.chain) and self.reaper is not None:
            self.reaper.forget("chain", self.chain)

    def partition(self, groups: tuple[tuple[Node, ...], ...]) -> list[tuple[Node, Node]]:
        """Replace the current partition: nodes in different groups cannot talk. The cut links."""
        self.heal()
        links = cut_links(groups)
        for a, b in links:
            rule = self._rule(a, b)
            self._run("-A", self.chain, *rule)
            self.rules.append(rule)
        return links

    def heal(self) -> None:
        """End every partition: flush this run's chain."""
        self._run("-F", self.chain)
        self.rules.clear()

    def _rule(self, a: Node, b: Node) -> list[str]:
        uid = self.layout.uid(a)
        if uid is None:
            raise NodeFailed("partitions need the nodes to run under uids of their own (root)")
        return [
            "-m", "owner", "--uid-owner", str(uid),
            "-d", self.layout.host(b), "-p", "tcp", "--dport", str(self.layout.port(b)),
            "-j", "DROP",
        ]  # fmt: skip

    def _run(self, *args: str, check: bool = True) -> int:
        done = subprocess.run(
            [str(self.iptables), "-w", "5", *args], capture_output=True, text=True, check=False
        )
        if check and done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise NodeFailed(f"iptables {' '.join(args)}: {reason}")
        return done.returncode


DISK = "disk"
"""The folder in each broker's directory that holds its log directory's durable contents."""


@dataclass
class PowerDisks:
    """Each broker's log directory on the power-loss filesystem (mounted on entering)."""

    layout: Layout
    fusermount: Path | None = None
    mounts: dict[int, PowerLossFS] = field(default_factory=dict)

    def backing(self, broker: int) -> Path:
        """Where the broker's log directory's durable contents live."""
        return self.layout.directory(broker) / DISK

    def __enter__(self) -> PowerDisks:
        """Mount every broker's log directory (FuseMissing, exit 4, when FUSE is missing)."""
        self.fusermount = find_fusermount(self.fusermount)
        try:
            for broker in BROKERS:
                self.backing(broker).mkdir(parents=True, exist_ok=True)
                self.layout.data_dir(broker).mkdir(parents=True, exist_ok=True)
                self._mount(broker)
        except BaseException:
            self._unmount_all(sync=False)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Sync and unmount every log directory (nothing stays mounted)."""
        self._unmount_all(sync=True)

    def power_loss(self, broker: int) -> Pending:
        """Drop every write the broker's log directory has not fsynced, and remount it (the
        broker must not be running). What was dropped; PowerLossError (exit 4) if the directory
        is not on the filesystem (then nothing was dropped)."""
        self.check_on_filesystem(broker)
        lost = self.mounts[broker].lose_unsynced()
        self.mounts.pop(broker).unmount()
        self._mount(broker)
        return lost

    def check_on_filesystem(self, broker: int) -> None:
        """PowerLossError (one line) unless the broker's log directory is a mount of the
        power-loss filesystem whose process runs."""
        disk = self.mounts.get(broker)
        if disk is None or not disk.serves():
            where = self.layout.data_dir(broker)
            raise PowerLossError(
                f"power loss of broker {broker}: its log directory {where} is not on the "
                "power-loss filesystem (not mounted there, or its process has exited)"
            )

    def _mount(self, broker: int) -> None:
        log = self.layout.directory(broker) / "powerloss.log"
        self.mounts[broker] = mount(
            self.backing(broker), self.layout.data_dir(broker), fusermount=self.fusermount, log=log
        )

    def _unmount_all(self, sync: bool) -> None:
        for broker in list(self.mounts):
            try:
                self.mounts.pop(broker).unmount(sync=sync)
            except Exception:  # one that cannot sync is still unmounted; go on with the rest
                continue
