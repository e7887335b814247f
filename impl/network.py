"""Network: per-link FIFO queues that a schedule may deliver, drop, duplicate, delay or reorder."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from kreplica.impl.messages import Message

Link = tuple[int, int]
"""(src node, dst node)."""


class Envelope(NamedTuple):
    """A message in flight; it reaches only the dst incarnation it was addressed to."""

    msg_id: int
    src: int
    dst: int
    src_incarnation: int
    dst_incarnation: int
    payload: Message
    sent_at_ms: int

    @property
    def link(self) -> Link:
        """(src, dst)."""
        return (self.src, self.dst)


class Network:
    """Messages in flight: one FIFO queue per directed link; index > 0 reorders, blocked holds."""

    # Delivering index 0 keeps FIFO order; leaving a message queued delays it; a blocked link
    # (network partition) delivers nothing until unblocked; drop and duplicate act on one message.

    def __init__(self) -> None:
        self.queues: dict[Link, deque[Envelope]] = {}
        self.blocked: set[Link] = set()
        self._sorted_links: list[Link] = []
        self._lanes: list[tuple[Link, deque[Envelope]]] = []
        """(link, its deque in queues) for every link, sorted: the fair scheduler's order."""
        self._next_msg_id = 0
        self.sent = 0
        self.delivered = 0
        self.dropped = 0
        self.duplicated = 0

    def send(
        self,
        src: int,
        src_incarnation: int,
        dst: int,
        dst_incarnation: int,
        payload: Message,
        now_ms: int,
    ) -> Envelope:
        """Queue a message on link (src, dst)."""
        self._next_msg_id += 1
        envelope = Envelope(
            self._next_msg_id, src, dst, src_incarnation, dst_incarnation, payload, now_ms
        )
        queue = self.queues.get((src, dst))
        if queue is None:
            queue = self.queues[(src, dst)] = deque()
            self._sorted_links = sorted(self.queues)
            self._lanes = [(link, self.queues[link]) for link in self._sorted_links]
        queue.append(envelope)
        self.sent += 1
        return envelope

    def links(self) -> list[Link]:
        """Links with messages queued, sorted."""
        queues = self.queues
        return [link for link in self._sorted_links if queues[link]]

    def deliverable_links(self) -> list[Link]:
        """Links with messages queued that are not blocked, sorted."""
        queues = self.queues
        blocked = self.blocked
        return [link for link in self._sorted_links if queues[link] and link not in blocked]

    def lanes(self) -> list[tuple[Link, deque[Envelope]]]:
        """(link, its queue) for every link that has had a message, sorted (the order of
        `links`); the queues are the network's own, to read, not to change."""
        return self._lanes

    def queue(self, link: Link) -> list[Envelope]:
        """The messages queued on link, oldest first."""
        return list(self.queues.get(link, ()))

    def peek(self, link: Link, index: int = 0) -> Envelope | None:
        """The message at position index of link, if any."""
        queue = self.queues.get(link)
        if queue is None or not 0 <= index < len(queue):
            return None
        return queue[index]

    def take(self, link: Link, index: int = 0) -> Envelope | None:
        """Remove and return the message at position index of link (to deliver it)."""
        queue = self.queues.get(link)
        if queue is None or not 0 <= index < len(queue):
            return None
        if index == 0:
            envelope = queue.popleft()
        else:
            envelope = queue[index]
            del queue[index]
        self.delivered += 1
        return envelope

    def drop(self, link: Link, index: int = 0) -> Envelope | None:
        """Lose the message at position index of link."""
        envelope = self.take(link, index)
        if envelope is not None:
            self.delivered -= 1
            self.dropped += 1
        return envelope

    def duplicate(self, link: Link, index: int = 0) -> Envelope | None:
        """Queue a copy (new msg_id) of the message at index at the end of link."""
        envelope = self.peek(link, index)
        if envelope is None:
            return None
        self._next_msg_id += 1
        copy = envelope._replace(msg_id=self._next_msg_id)
        self.queues[link].append(copy)
        self.duplicated += 1
        return copy

    def drop_to(self, node: int) -> int:
        """Lose every message queued towards node (its connections closed); return the count."""
        lost = 0
        for (_, dst), queue in sorted(self.queues.items()):
            if dst == node:
                lost += len(queue)
                queue.clear()
        self.dropped += lost
        return lost

    def block(self, a: int, b: int) -> None:
        """Partition a from b in both directions (messages wait)."""
        self.blocked.add((a, b))
        self.blocked.add((b, a))

    def unblock(self, a: int, b: int) -> None:
        """Heal the partition between a and b."""
        self.blocked.discard((a, b))
        self.blocked.discard((b, a))

    def in_flight(self) -> list[Envelope]:
        """Every queued message, in send order."""
        # An envelope is a tuple that starts with its msg_id, unique in the network, so tuples
        # compare as their msg_ids do (and faster than through a key function).
        return sorted(envelope for queue in self.queues.values() for envelope in queue)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.queues.values())
