"""Versioned subscription and assignment records, as stored in the application directory.

Versions:

* ``SubscriptionInfo`` 1: client id, host, slots, previous active and standby tasks.
  2: adds per-task changelog offset sums. A version-1 subscription gives no lags, so its
  standbys count as lag unknown (infinite).
* ``AssignmentInfo`` 1: active and standby tasks, error code. 2: adds warm-up tasks. Written as
  version 1, warm-ups are listed as standbys, which is what a warm-up is to an older reader.

A reader decodes every version up to ``LATEST_VERSION`` and refuses newer ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtide.task_id import TaskId

from .client_state import ClientState
from .codec import INT32_MAX, INT64_MAX, Writer, check_int, check_version, open_record
from .result import Assignment

LATEST_VERSION = 2


def _tasks(what: str, tasks: Iterable[TaskId]) -> frozenset[TaskId]:
    result = frozenset(tasks)
    for task in result:
        if not isinstance(task, TaskId):
            raise ValueError(f"{what} must hold TaskId values, got {task!r}")
        if task.subtopology > INT32_MAX or task.partition > INT32_MAX:
            raise ValueError(f"{what}: task {task} does not fit in 32-bit fields")
    return result


def _disjoint(**sets: frozenset[TaskId]) -> None:
    seen: dict[TaskId, str] = {}
    for name, tasks in sets.items():
        for task in tasks:
            if task in seen:
                raise ValueError(f"task {task} is listed both in {seen[task]} and in {name}")
            seen[task] = name


@dataclass(frozen=True)
class SubscriptionInfo:
    """What a client reports before an assignment (see ``ClientState``)."""

    client_id: str
    host: str
    slots: int
    prev_active: frozenset[TaskId] = frozenset()
    prev_standby: frozenset[TaskId] = frozenset()
    offset_sums: Mapping[TaskId, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.client_id, str) or not self.client_id:
            raise ValueError(f"client_id must be a non-empty string, got {self.client_id!r}")
        if not isinstance(self.host, str):
            raise ValueError(f"host must be a string, got {self.host!r}")
        check_int("slots", self.slots, 1, INT32_MAX)
        object.__setattr__(self, "prev_active", _tasks("prev_active", self.prev_active))
        object.__setattr__(self, "prev_standby", _tasks("prev_standby", self.prev_standby))
        _disjoint(prev_active=self.prev_active, prev_standby=self.prev_standby)
        sums = dict(self.offset_sums)
        _tasks("offset_sums", sums)
        for task, value in sums.items():
            check_int(f"offset sum of task {task}", value, 0, INT64_MAX)
        object.__setattr__(self, "offset_sums", MappingProxyType(sums))

    def encode(self, version: int = LATEST_VERSION) -> bytes:
        """The record as bytes; version 1 leaves the offset sums out."""
        check_version("subscription", version, LATEST_VERSION)
        out = Writer()
        out.string(self.client_id)
        out.string(self.host)
        out.int32(self.slots)
        out.tasks(self.prev_active)
        out.tasks(self.prev_standby)
        if version >= 2:
            out.task_offsets(self.offset_sums)
        return out.finish(version, LATEST_VERSION)

    @classmethod
    def decode(cls, data: bytes) -> SubscriptionInfo:
        """Read a record of any version up to ``LATEST_VERSION``.

        Raises ``UnsupportedVersionError`` for a newer version and ``CorruptMetadataError`` for
        damaged, truncated or malformed bytes.
        """
        version, body = open_record("subscription", data, LATEST_VERSION)
        client_id, host, slots = body.string(), body.string(), body.int32()
        active, standby = body.tasks(), body.tasks()
        sums = body.task_offsets() if version >= 2 else {}
        body.end()
        try:
            return cls(client_id, host, slots, active, standby, sums)
        except ValueError as exc:
            raise body.invalid(str(exc)) from exc

    def client_state(self, changelog_ends: Mapping[TaskId, int]) -> ClientState:
        """The assignor's view of this client, given each task's committed changelog end.

        Lag = end - offset sum. A standby without an offset sum (version 1) or without a known
        end has unknown, infinite lag. A local offset beyond the committed end means the local
        copy is invalid and will be restored from the beginning, so its lag is the whole end.
        """
        lags: dict[TaskId, int] = {}
        for task in self.prev_standby:
            local, end = self.offset_sums.get(task), changelog_ends.get(task)
            if local is not None and end is not None:
                lags[task] = end - local if local <= end else end
        return ClientState(
            self.slots, prev_active=self.prev_active, prev_standby=self.prev_standby, lags=lags
        )


@dataclass(frozen=True)
class AssignmentInfo:
    """What one client is told to run: active, standby and warm-up tasks, and an error code."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()
    error_code: int = 0

    def __post_init__(self) -> None:
        for name in ("active", "standby", "warmup"):
            object.__setattr__(self, name, _tasks(name, getattr(self, name)))
        _disjoint(active=self.active, standby=self.standby, warmup=self.warmup)
        check_int("error_code", self.error_code, -(2**31), INT32_MAX)

    @classmethod
    def for_client(
        cls, assignment: Assignment, client_id: str, error_code: int = 0
    ) -> AssignmentInfo:
        """The part of ``assignment`` that concerns ``client_id``."""
        return cls(
            assignment.active[client_id],
            assignment.standby[client_id],
            assignment.warmup[client_id],
            error_code,
        )

    def encode(self, version: int = LATEST_VERSION) -> bytes:
        """The record as bytes; version 1 lists warm-ups among the standbys."""
        check_version("assignment", version, LATEST_VERSION)
        out = Writer()
        out.tasks(self.active)
        if version >= 2:
            out.tasks(self.standby)
            out.tasks(self.warmup)
        else:
            out.tasks(self.standby | self.warmup)
        out.int32(self.error_code)
        return out.finish(version, LATEST_VERSION)

    @classmethod
    def decode(cls, data: bytes) -> AssignmentInfo:
        """Read a record of any version up to ``LATEST_VERSION`` (errors as for subscriptions)."""
        version, body = open_record("assignment", data, LATEST_VERSION)
        active, standby = body.tasks(), body.tasks()
        warmup = body.tasks() if version >= 2 else frozenset()
        error_code = body.int32()
        body.end()
        try:
            return cls(active, standby, warmup, error_code)
        except ValueError as exc:
            raise body.invalid(str(exc)) from exc
