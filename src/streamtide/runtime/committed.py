"""What a task commits besides its stores: input offsets, stream time, punctuation times."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskCommittedState:
    """The task's committed metadata; restoring it resumes processing exactly where it was.

    ``offsets`` maps ``"topic:partition"`` to the next offset to process; ``schedules`` maps a
    schedule key (see ``processor.punctuation.schedule_key``) to its next fire time;
    ``partition_times`` maps ``"topic:partition"`` to the highest timestamp a timestamp
    extractor returned for it (only sources with an extractor).
    """

    offsets: dict[str, int] = field(default_factory=dict)
    stream_time: int = -1
    schedules: dict[str, int] = field(default_factory=dict)
    partition_times: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "offsets": dict(self.offsets),
            "stream_time": self.stream_time,
            "schedules": dict(self.schedules),
            "partition_times": dict(self.partition_times),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskCommittedState:
        return cls(
            offsets={str(k): int(v) for k, v in data.get("offsets", {}).items()},
            stream_time=int(data.get("stream_time", -1)),
            schedules={str(k): int(v) for k, v in data.get("schedules", {}).items()},
            partition_times={str(k): int(v) for k, v in data.get("partition_times", {}).items()},
        )


def offset_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"
