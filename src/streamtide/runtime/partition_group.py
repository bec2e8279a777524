"""Buffered input of one task and the choice of which record to process next."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol


class RawRecord(Protocol):
    """A serialized record read from a partition."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Any
    offset: int | None


class PartitionGroup:
    """One queue per source partition; the next record is the head with the lowest timestamp.

    Ties go to the lowest index in the sub-topology's source list, then the topic name.
    ``stampers`` (by topic) replace a record with a stamped one (its ``timestamp`` the
    extracted one) when it becomes the head of its queue, so the order uses that timestamp.
    """

    def __init__(
        self,
        topics: list[str],
        stampers: dict[str, Callable[[RawRecord], RawRecord]] | None = None,
    ) -> None:
        self._stampers = stampers or {}
        self._order = {topic: index for index, topic in enumerate(topics)}
        self._queues: dict[str, deque[RawRecord]] = {topic: deque() for topic in topics}
        self._heap: list[tuple[int, int, str]] = []
        self._size = 0

    @property
    def topics(self) -> list[str]:
        return list(self._queues)

    def add(self, topic: str, records: Iterable[RawRecord]) -> int:
        """Append records of ``topic`` (in offset order); return how many were added."""
        queue = self._queues.get(topic)
        if queue is None:
            raise KeyError(f"topic {topic!r} is not a source of this task")
        was_empty = not queue
        before = len(queue)
        queue.extend(records)
        added = len(queue) - before
        self._size += added
        if was_empty and queue:
            self._push_head(topic, queue)
        return added

    def _push_head(self, topic: str, queue: deque[RawRecord]) -> None:
        stamp = self._stampers.get(topic)
        if stamp is not None:
            queue[0] = stamp(queue[0])
        heapq.heappush(self._heap, (queue[0].timestamp, self._order[topic], topic))

    def next_record(self) -> tuple[str, RawRecord] | None:
        """Pop the next record to process, with its topic; None when every queue is empty."""
        if not self._heap:
            return None
        _, _, topic = heapq.heappop(self._heap)
        queue = self._queues[topic]
        record = queue.popleft()
        self._size -= 1
        if queue:
            self._push_head(topic, queue)
        return topic, record

    def __len__(self) -> int:
        return self._size

    def buffered(self, topic: str) -> int:
        return len(self._queues[topic])
