"""Which record a task processes next (SEMANTICS section 1).

Within a partition, records go in offset order. Across the task's partitions (one per
source topic of its sub-topology), the next record is the head with the lowest timestamp;
ties go to the source listed first in the sub-topology, then to the lower topic name. The
same rule merges what several tasks wrote into one repartition partition within a batch
(ties to the lower writer task), as records produced concurrently may arrive in any such
order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def merged(queues: list[tuple[Any, list[Any]]], timestamp: Any) -> Iterator[tuple[Any, Any]]:
    """(source, item) in processing order; ``queues`` are (source, items) in tie-break order,
    ``timestamp(item)`` gives an item's time."""
    heads = [0] * len(queues)
    while True:
        best = None
        for index, (_, items) in enumerate(queues):
            if heads[index] < len(items):
                ts = timestamp(items[heads[index]])
                if best is None or ts < best[0]:
                    best = (ts, index)
        if best is None:
            return
        index = best[1]
        source, items = queues[index]
        heads[index] += 1
        yield source, items[heads[index] - 1]
