"""The batch commit protocol: typed, versioned records and the driver's decisions.

A driver writes, per batch and stage, an ``offsets`` record (the input ranges it fixed), a
``prepare`` record (the one attempt per task to seal, and each task's new committed state),
the seals themselves (into the log) and a ``seal`` record; per batch a ``commit`` record. Every
record carries the writer's epoch: a driver takes a new epoch when it starts, and one whose
epoch is no longer the newest is fenced. This module is pure (no files, no Spark): records
encode to and decode from JSON bytes, and the recovery decisions are functions a test can
drive directly.

Version 0 is the unversioned JSON that releases before this protocol wrote; it decodes with
epoch 0 and no attempt id, so a batch they prepared is still rolled forward with the same
seal ids.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streamtide.errors import CorruptRecordError, UnsupportedVersionError
from streamtide.log.api import SegmentRef

PROTOCOL_VERSION = 1

#: Input ranges of a stage: task id -> source topic -> (start, end) offsets.
Ranges = dict[str, dict[str, tuple[int, int]]]


@dataclass(frozen=True)
class EpochRecord:
    """A driver's claim to an application: the newest epoch is the one allowed to write."""

    epoch: int
    driver: str
    started_ms: int


@dataclass(frozen=True)
class OffsetsRecord:
    """Input ranges fixed for one stage of one batch, before any task ran.

    ``topic_ids`` names the identity of each source topic the ranges refer to (empty when the
    log has no topic ids), so a re-created topic is never read with old offsets.
    """

    batch: int
    stage: int
    epoch: int
    ranges: Ranges
    topic_ids: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GlobalOffsetsRecord:
    """End offsets of the global tables' topics that every task of one batch reads its global
    tables up to (topic -> end offset per partition), fixed when the batch starts, so a
    retried batch sees the same tables."""

    batch: int
    epoch: int
    ends: dict[str, list[int]]


@dataclass(frozen=True)
class PreparedTask:
    """One task's outcome to seal: the attempt's segments, new committed state, where it
    ran, and the attempt's writer id (None in records written before it was kept), which a
    long-running work unit matches against the run it holds."""

    task: str
    client: str
    segments: tuple[SegmentRef, ...]
    state: dict[str, Any]
    writer: str | None = None


@dataclass(frozen=True)
class TaskReport:
    """What a task's run reported besides its outcome (statistics and local offsets)."""

    task: str
    input_records: int = 0
    output_records: dict[str, int] = field(default_factory=dict)
    restored_records: int = 0
    local_offsets: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "input_records": self.input_records,
            "output_records": dict(self.output_records),
            "restored_records": self.restored_records,
            "local_offsets": dict(self.local_offsets),
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskReport:
        return cls(
            task=str(data["task"]),
            input_records=int(data.get("input_records", 0)),
            output_records={str(k): int(v) for k, v in data.get("output_records", {}).items()},
            restored_records=int(data.get("restored_records", 0)),
            local_offsets={str(k): int(v) for k, v in (data.get("local_offsets") or {}).items()},
            metrics={str(k): int(v) for k, v in (data.get("metrics") or {}).items()},
        )


@dataclass(frozen=True)
class UnitReport:
    """What one work unit (one executor slot) reported for a stage."""

    client: str
    executor: str
    tasks: tuple[TaskReport, ...]
    standbys: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "ran_on": {"executor": self.executor},
            "tasks": [t.as_dict() for t in self.tasks],
            "standbys": self.standbys,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnitReport:
        return cls(
            client=str(data["client"]),
            executor=str((data.get("ran_on") or {}).get("executor", "?")),
            tasks=tuple(TaskReport.from_dict(t) for t in data.get("tasks", [])),
            standbys=dict(data.get("standbys") or {}),
        )


@dataclass(frozen=True)
class PrepareRecord:
    """The decision for one stage of one batch: exactly these segments get sealed.

    ``attempt`` names the driver's attempt (``None`` for version-0 records); seal ids derive
    from it, so a rolled-forward prepare seals idempotently and two attempts never share one.
    """

    batch: int
    stage: int
    epoch: int
    attempt: str | None
    tasks: dict[str, PreparedTask]
    merged: tuple[SegmentRef, ...] = ()
    reports: tuple[UnitReport, ...] = ()

    def seals(self, application_id: str) -> list[tuple[SegmentRef, str]]:
        """Every segment this prepare seals, with its seal id, in a fixed order."""
        out = []
        for task in sorted(self.tasks):
            for ref in self.tasks[task].segments:
                out.append((ref, seal_id(application_id, self.batch, task, self.attempt)))
        merged_id = merged_seal_id(application_id, self.batch, self.stage, self.attempt)
        out.extend((ref, merged_id) for ref in self.merged)
        return out


@dataclass(frozen=True)
class SealRecord:
    """Every segment of the stage's prepare is sealed."""

    batch: int
    stage: int
    epoch: int
    attempt: str | None


@dataclass(frozen=True)
class CommitRecord:
    """The batch is committed: each task's committed state, owners and progress."""

    batch: int
    epoch: int
    tasks: dict[str, dict[str, Any]]
    owners: dict[str, str] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)
    assignment: str = ""
    topic_ids: dict[str, str] = field(default_factory=dict)


Record = (
    EpochRecord | OffsetsRecord | PrepareRecord | SealRecord | CommitRecord | GlobalOffsetsRecord
)


# ---- seal ids -------------------------------------------------------------------------------


def seal_id(application_id: str, batch: int, task: str, attempt: str | None) -> str:
    """The seal id of a task's segments: names the batch, the task and the attempt."""
    base = f"{application_id}/b{batch}/{task}"
    return base if attempt is None else f"{base}/{attempt}"


def merged_seal_id(application_id: str, batch: int, stage: int, attempt: str | None) -> str:
    """The seal id of a stage's merged repartition segments."""
    if attempt is None:
        return f"{application_id}/b{batch}/merged"
    return f"{application_id}/b{batch}/s{stage}/merged/{attempt}"


def attempt_id(epoch: int, token: str) -> str:
    """A stage attempt's name: the driver's epoch and a token unique to the attempt."""
    return f"e{epoch}-{token}"


def batch_of_writer(application_id: str, writer_id: str) -> int | None:
    """The batch a segment's writer id belongs to (``<app>/b<batch>/...``), or None if an
    engine of this application did not write it."""
    head = f"{application_id}/b"
    if not writer_id.startswith(head):
        return None
    number = writer_id[len(head) :].split("/", 1)[0]
    return int(number) if number.isdigit() else None


# ---- decisions ------------------------------------------------------------------------------


class StageStep(enum.Enum):
    """What a driver does next for one stage of the batch it is working on."""

    FIX_RANGES = "fix-ranges"  # nothing recorded: fix the input ranges, then run
    RUN = "run"  # ranges recorded, no prepare: run (again) with exactly those ranges
    SEAL = "seal"  # prepared, not all sealed: seal what the prepare names (idempotent)
    DONE = "done"  # sealed: only its committed state remains to take over


def stage_step(
    offsets: OffsetsRecord | None, prepare: PrepareRecord | None, seal: SealRecord | None
) -> StageStep:
    """The next step for a stage, from the records found for it."""
    if seal is not None:
        return StageStep.DONE
    if prepare is not None:
        return StageStep.SEAL
    if offsets is not None:
        return StageStep.RUN
    return StageStep.FIX_RANGES


def resume_batch(last_commit: CommitRecord | None) -> int:
    """The batch a starting driver works on: the one after the newest commit."""
    return 0 if last_commit is None else last_commit.batch + 1


def next_epoch(existing: list[int]) -> int:
    """The epoch a starting driver claims (it must create it exclusively)."""
    return max(existing, default=0) + 1


def fenced_by(own: int, existing: list[int]) -> int | None:
    """The newer epoch that fences a driver holding ``own``, or None if it is the newest."""
    newest = max(existing, default=own)
    return newest if newest > own else None


# ---- encoding -------------------------------------------------------------------------------


def encode(record: Record) -> bytes:
    """JSON bytes of a record, with its kind and the protocol version."""
    kind, body = _KIND_OF[type(record)], _to_json(record)
    return json.dumps({"v": PROTOCOL_VERSION, "kind": kind, **body}, sort_keys=True).encode()


def decode(data: bytes, kind: str, where: str, **context: int) -> Any:
    """The record of ``kind`` in ``data`` (read from ``where``). Unversioned data is read as
    version 0; a newer version raises ``UnsupportedVersionError``; anything unreadable raises
    ``CorruptRecordError`` naming ``where``. ``context`` supplies fields version 0 lacked
    (``batch``, ``stage``)."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"{kind} record {where} is unreadable: {exc}") from exc
    if not isinstance(raw, dict):
        raise CorruptRecordError(f"{kind} record {where} is not a JSON object")
    version = raw.get("v", 0) if "kind" in raw else 0
    if not isinstance(version, int) or version > PROTOCOL_VERSION:
        raise UnsupportedVersionError(
            f"{kind} record {where} has protocol version {version!r}; this release reads up "
            f"to {PROTOCOL_VERSION}"
        )
    if version and raw.get("kind") != kind:
        raise CorruptRecordError(f"{where} holds a {raw.get('kind')!r} record, not {kind!r}")
    try:
        return _FROM_JSON[kind](raw if version else _legacy(kind, raw, context), version)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(
            f"{kind} record {where} is malformed: {type(exc).__name__}: {exc}"
        ) from exc


def _legacy(kind: str, raw: dict[str, Any], context: Mapping[str, int]) -> dict[str, Any]:
    """A version-0 record in the shape of the current one (epoch 0, no attempt)."""
    base = {"epoch": 0, **context}
    if kind == "offsets":
        return {**base, "ranges": raw}
    if kind == "prepare":
        return {**base, **raw, "attempt": None}
    if kind == "seal":
        return {**base, "attempt": None}
    if kind == "commit":
        return {**base, **raw}
    raise CorruptRecordError(f"no version-0 form of {kind!r} records")


def _ranges(raw: Mapping[str, Any]) -> Ranges:
    return {
        str(task): {str(t): (int(r[0]), int(r[1])) for t, r in topics.items()}
        for task, topics in raw.items()
    }


def prepared_task(task: str, raw: Mapping[str, Any]) -> PreparedTask:
    """A task's prepare entry from its JSON form (also the shape work units report)."""
    return PreparedTask(
        task=task,
        client=str(raw.get("client", "?")),
        segments=tuple(SegmentRef.from_dict(s) for s in raw["segments"]),
        state=dict(raw["state"]),
        writer=None if raw.get("writer") is None else str(raw["writer"]),
    )


def _to_json(record: Record) -> dict[str, Any]:
    if isinstance(record, EpochRecord):
        return {"epoch": record.epoch, "driver": record.driver, "started_ms": record.started_ms}
    if isinstance(record, OffsetsRecord):
        return {
            "batch": record.batch,
            "stage": record.stage,
            "epoch": record.epoch,
            "ranges": {t: {k: list(r) for k, r in rs.items()} for t, rs in record.ranges.items()},
            "topic_ids": record.topic_ids,
        }
    if isinstance(record, PrepareRecord):
        return {
            "batch": record.batch,
            "stage": record.stage,
            "epoch": record.epoch,
            "attempt": record.attempt,
            "tasks": {
                t: {
                    "client": p.client,
                    "segments": [s.as_dict() for s in p.segments],
                    "state": p.state,
                    **({"writer": p.writer} if p.writer is not None else {}),
                }
                for t, p in record.tasks.items()
            },
            "merged": [s.as_dict() for s in record.merged],
            "reports": [u.as_dict() for u in record.reports],
        }
    if isinstance(record, GlobalOffsetsRecord):
        return {"batch": record.batch, "epoch": record.epoch, "ends": record.ends}
    if isinstance(record, SealRecord):
        return {
            "batch": record.batch,
            "stage": record.stage,
            "epoch": record.epoch,
            "attempt": record.attempt,
        }
    return {
        "batch": record.batch,
        "epoch": record.epoch,
        "tasks": record.tasks,
        "owners": record.owners,
        "progress": record.progress,
        "assignment": record.assignment,
        "topic_ids": record.topic_ids,
    }


def _epoch(raw: dict[str, Any], _v: int) -> EpochRecord:
    return EpochRecord(int(raw["epoch"]), str(raw["driver"]), int(raw["started_ms"]))


def _offsets(raw: dict[str, Any], _v: int) -> OffsetsRecord:
    return OffsetsRecord(
        int(raw["batch"]),
        int(raw["stage"]),
        int(raw["epoch"]),
        _ranges(raw["ranges"]),
        {str(k): str(v) for k, v in (raw.get("topic_ids") or {}).items()},
    )


def _prepare(raw: dict[str, Any], _v: int) -> PrepareRecord:
    attempt = raw.get("attempt")
    return PrepareRecord(
        batch=int(raw["batch"]),
        stage=int(raw["stage"]),
        epoch=int(raw["epoch"]),
        attempt=None if attempt is None else str(attempt),
        tasks={str(t): prepared_task(str(t), p) for t, p in raw["tasks"].items()},
        merged=tuple(SegmentRef.from_dict(s) for s in raw.get("merged", [])),
        reports=tuple(UnitReport.from_dict(u) for u in raw.get("reports", [])),
    )


def _seal(raw: dict[str, Any], _v: int) -> SealRecord:
    attempt = raw.get("attempt")
    return SealRecord(
        int(raw["batch"]),
        int(raw["stage"]),
        int(raw["epoch"]),
        None if attempt is None else str(attempt),
    )


def _commit(raw: dict[str, Any], _v: int) -> CommitRecord:
    return CommitRecord(
        batch=int(raw["batch"]),
        epoch=int(raw["epoch"]),
        tasks={str(t): dict(s) for t, s in raw["tasks"].items()},
        owners={str(k): str(v) for k, v in (raw.get("owners") or {}).items()},
        progress=dict(raw.get("progress") or {}),
        assignment=str(raw.get("assignment", "")),
        topic_ids={str(k): str(v) for k, v in (raw.get("topic_ids") or {}).items()},
    )


def _global_offsets(raw: dict[str, Any], _v: int) -> GlobalOffsetsRecord:
    return GlobalOffsetsRecord(
        int(raw["batch"]),
        int(raw["epoch"]),
        {str(t): [int(e) for e in ends] for t, ends in raw["ends"].items()},
    )


_KIND_OF: dict[type, str] = {
    EpochRecord: "epoch",
    OffsetsRecord: "offsets",
    PrepareRecord: "prepare",
    SealRecord: "seal",
    CommitRecord: "commit",
    GlobalOffsetsRecord: "global_offsets",
}
_FROM_JSON = {
    "epoch": _epoch,
    "offsets": _offsets,
    "prepare": _prepare,
    "seal": _seal,
    "commit": _commit,
    "global_offsets": _global_offsets,
}
