"""One task of the reference interpreter: a sub-topology's nodes for one partition, its
stream time, its punctuation queues and its Processor API stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.reference.node import Node
from tests.reference.punctuation import PunctuationQueue
from tests.reference.records import Rec

if TYPE_CHECKING:
    from tests.reference.runner import ReferenceRun


class Task:
    """Runs records through its nodes; stream time is the largest timestamp processed
    (-1 before the first), advanced before a record reaches its first node."""

    def __init__(self, run: ReferenceRun, group: int, partition: int) -> None:
        self.run = run
        self.group = group
        self.partition = partition
        self.task_id = f"{group}_{partition}"
        self.stream_time = -1
        self.nodes: dict[int, Node] = {}
        self.stream_queue = PunctuationQueue()
        self.wall_queue = PunctuationQueue()
        self.stores: dict[str, Any] = {}
        self.current: Rec | None = None  # the record being processed (None in punctuators)
        self.metrics: dict[str, int] = {}

    @property
    def effects(self) -> list[tuple[str, Any, Any]]:
        return self.run.effects

    def wall_clock(self) -> int:
        return self.run.wall_clock

    def count(self, metric: str) -> None:
        self.metrics[metric] = self.metrics.get(metric, 0) + 1

    def process(self, source: Node, rec: Rec) -> None:
        """One record from a source topic, then the stream-time punctuation check (and the
        wall-clock one when the run checks it after every record, as the test driver does)."""
        self.stream_time = max(self.stream_time, rec.ts)
        self.current = rec
        source.process(rec, self, 0)
        self.current = None
        self.stream_queue.check(self.stream_time)
        if self.run.wall_clock_per_record:
            self.punctuate_wall_clock()

    def punctuate_wall_clock(self) -> None:
        self.wall_queue.check(self.run.wall_clock)

    def schedule(
        self, interval: int, wall: bool, punctuator: Callable[[int], None], align: str
    ) -> Any:
        if wall:
            return self.wall_queue.add(interval, punctuator, self.run.wall_clock + interval)
        return self.stream_queue.add(interval, punctuator, 0 if align == "epoch" else None)

    def write(self, topic: str, rec: Rec, sink: dict[str, Any]) -> None:
        self.run.write(self, topic, rec, sink)

    def commit(self) -> None:
        for node in self.nodes.values():
            node.flush(self)
