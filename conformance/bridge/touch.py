"""What a simulator step can have touched, known from the step alone: the projection and the
judges skip what it cannot have changed.

The answer comes from which code `Cluster.apply` runs for the step, not from anything the
step's code reports, so a mutant of the replication code (`kreplica mutate` edits the core
modules of impl/: the log, the partition, the fetchers, the controller, the purgatories)
cannot hide a change: a step that runs none of that code cannot change what it keeps.

A client step (`client_only`) runs the client's and the network's code alone
(`impl/cluster.py`, `client.py`, `network.py`, `messages.py`; pinned by
tests/test_fuzz_speed.py): a client sends a request to a broker it names (`Cluster._produce`,
`_consumer_fetch`, `_consumer_list_offsets`), or an answer reaches the client
(`Cluster.deliver` to the client). It changes no broker, no controller and no clock, and a
message on a client's link is in no spec variable (`Projector._msgs`: the client is no
running broker, and a client's request is no fetcher's). So every spec variable keeps its
value, and so does every judge's reading of the brokers (their logs' offsets, their
fetchers' clocks); only the history notes a PRODUCE the client sent.

A step of one broker (`brokers_touched`) runs that broker's code: a message delivered to it,
an iteration of one of its fetchers, its ISR task. While every broker runs, it can change
that broker's objects alone (its partition, log, fetchers, purgatories: no broker holds
another's, pinned by tests/test_fuzz_speed.py; messages are immutable values), besides the
network and the controller (an ISR change under isr=sync is a direct write); a message to the
controller runs the controller's code alone. Neither moves the clock. So the other brokers'
spec values and the judges' reading of their logs and fetchers stand as they were. With a
broker down, a send to it makes the cluster break every running fetcher's connection to it
(`Cluster._break_connections`): then any broker may change, as with a tick or a fault.

Such a step changes the network by what it takes and what the cluster sends for it (a
broker holds no network). When it delivers a client's request and sends only answers to the
client (`client_links_only`: a consumer's LIST_OFFSETS or FETCH, a PRODUCE with acks=1), the
spec's messages are as they were; the history notes what it sent.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from kreplica.impl.client import CLIENT_ID
from kreplica.impl.cluster import Cluster
from kreplica.impl.controller import CONTROLLER_ID
from kreplica.impl.network import Envelope
from kreplica.impl.steps import (
    ConsumerFetch,
    ConsumerListOffsets,
    Deliver,
    DoWork,
    Produce,
    ShrinkIsr,
    Step,
)

CLIENT_REQUESTS = (Produce, ConsumerFetch, ConsumerListOffsets)
"""The steps by which the client sends a request (to the broker it names, or else to the
controller's leader, which asks the controller)."""


def client_only(step: Step) -> bool:
    """True if `step` runs the client's and the network's code alone: a client's request to a
    broker it names, or a delivery to the client (see the module docstring)."""
    if isinstance(step, Deliver):
        return step.dst == CLIENT_ID
    return isinstance(step, CLIENT_REQUESTS) and step.broker is not None


def client_links_only(step: Step, sent: Sequence[Envelope]) -> bool:
    """True if `step`, a step of one broker while every broker runs (`brokers_touched`),
    changed the network on the client's links alone: it delivered a client's request, and
    what it sent (`sent`: all the cluster put on the network for it) went to the client."""
    if not (isinstance(step, Deliver) and step.src == CLIENT_ID):
        return False
    return all(envelope.dst == CLIENT_ID for envelope in sent)


NOTHING: Set[int] = frozenset()


def brokers_touched(cluster: Cluster, step: Step) -> Set[int] | None:
    """The brokers whose state `step` (not yet applied) can change, when every broker runs:
    the one a message is delivered to, whose fetcher works or whose ISR task runs; none for a
    message to the controller or a client's step. None: any broker, or the clock (a tick, a
    fault, a step while a broker is down). See the module docstring."""
    if client_only(step):
        return NOTHING
    if not all(cluster.is_alive(b) for b in cluster.broker_ids):
        return None  # a broker that sends to a dead one breaks every fetcher's connection to it
    if isinstance(step, Deliver):
        return NOTHING if step.dst == CONTROLLER_ID else frozenset((step.dst,))
    if isinstance(step, DoWork | ShrinkIsr):
        return frozenset((step.broker,))
    return None
