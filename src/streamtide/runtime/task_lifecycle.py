"""An open active task's lifecycle in a work unit, as Kafka Streams' ``Task.State``.

A task opens at a committed state (``COMMITTED``), runs a batch (``RUNNING``), and then holds
its run's writes (``PENDING``) until they are committed: the driver's decision names its run
(file log, ``TaskHost.settle``) or its work unit's transaction committed (Kafka). Then it is
at its new committed state again. Any other outcome closes it (``CLOSED``), for one of the
``CloseReason``s; its next run reopens it from what was committed."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

from streamtide.errors import StreamtideError

log = logging.getLogger("streamtide.runtime.task_host")


class TaskState(enum.Enum):
    COMMITTED = "committed"  # at a committed state: it may run, or answer queries
    RUNNING = "running"  # processing a batch
    PENDING = "pending"  # ran: its writes wait for their commit
    CLOSED = "closed"


#: The transitions a task may make, from each state.
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.COMMITTED: frozenset({TaskState.RUNNING, TaskState.CLOSED}),
    TaskState.RUNNING: frozenset({TaskState.PENDING, TaskState.CLOSED}),
    TaskState.PENDING: frozenset({TaskState.COMMITTED, TaskState.CLOSED}),
    TaskState.CLOSED: frozenset(),
}


class CloseReason(enum.Enum):
    """Why an open task is closed (logged, except for the ordinary ends)."""

    DONE = "its work unit ended with it"
    FAILED = "its run failed"
    RELEASED = "it moved away"
    MOVED_ON = "its committed state moved on elsewhere"
    ALREADY_COMMITTED = "an earlier attempt committed its run"
    LOG_AHEAD = "the log's committed state is not the planned one"
    LOST = "another attempt of its batch won"
    DEMOTED = "it became a standby here"
    QUERY_BEHIND = "a query found it behind its committed state"

    @property
    def logged(self) -> bool:
        return self not in (CloseReason.DONE, CloseReason.FAILED, CloseReason.RELEASED)


class IllegalTransitionError(StreamtideError):
    """A task was moved to a state its lifecycle does not allow from where it is."""


@dataclass
class PendingRun:
    """A run whose writes wait for their commit: its writer id and the state it reached."""

    writer: str
    state: dict[str, Any]


@dataclass
class Lifecycle:
    """Where one task is in its lifecycle (``TRANSITIONS`` says where it may go)."""

    task_id: str
    state: TaskState = TaskState.COMMITTED

    def to(self, new: TaskState) -> None:
        if new not in TRANSITIONS[self.state]:
            raise IllegalTransitionError(
                f"task {self.task_id}: cannot go from {self.state.value} to {new.value}"
            )
        self.state = new

    def close(self, reason: CloseReason) -> None:
        if reason.logged:
            log.info("task %s: closing its open copy (%s)", self.task_id, reason.value)
        self.to(TaskState.CLOSED)
