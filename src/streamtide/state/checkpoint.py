"""Per-task checkpoint files: which committed changelog offset each local store is current to.

One JSON file per task directory, replaced atomically (temporary file, fsync, ``os.replace``)
and protected by a checksum, so a reader sees a whole, intact file or reports why not. Besides
the store offsets it carries the task's committed metadata (an opaque dict owned by the
runtime: input offsets, stream time, punctuation schedules), the batch it belongs to and a
count of commits (for the snapshot cadence). Local stores only ever hold committed data, so
every offset is a committed changelog offset.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtide.errors import StoreError
from streamtide.files import write_atomically

CHECKPOINT_FILE = ".checkpoint.json"
CHECKPOINT_VERSION = 1


class CheckpointError(StoreError):
    """A checkpoint file exists but cannot be used (corrupt, foreign, newer version)."""


@dataclass
class TaskCheckpoint:
    """The contents of one task's checkpoint file."""

    offsets: dict[str, int] = field(default_factory=dict)
    committed: dict[str, Any] = field(default_factory=dict)
    batch: int = -1
    commits: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "offsets": dict(self.offsets),
            "committed": self.committed,
            "batch": self.batch,
            "commits": self.commits,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskCheckpoint:
        version = data.get("version")
        if version != CHECKPOINT_VERSION:
            raise CheckpointError(f"unsupported checkpoint version {version!r}")
        offsets = data.get("offsets")
        if not isinstance(offsets, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in offsets.values()
        ):
            raise CheckpointError(f"bad store offsets {offsets!r}")
        return cls(
            offsets={str(k): v for k, v in offsets.items()},
            committed=dict(data.get("committed") or {}),
            batch=int(data.get("batch", -1)),
            commits=int(data.get("commits", 0)),
        )


def checkpoint_path(task_dir: str | Path) -> Path:
    return Path(task_dir) / CHECKPOINT_FILE


def _checksum(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def write_checkpoint(
    task_dir: str | Path, checkpoint: TaskCheckpoint, *, fsync: bool = True
) -> None:
    """Replace the task's checkpoint file atomically."""
    path = checkpoint_path(task_dir)
    body = json.dumps(checkpoint.to_dict(), sort_keys=True)
    text = json.dumps({"body": body, "sha256": _checksum(body)})
    write_atomically(path, text.encode("utf-8"), fsync=fsync)


def read_checkpoint(task_dir: str | Path) -> TaskCheckpoint | None:
    """The task's checkpoint; None if there is none; CheckpointError if it is unusable."""
    path = checkpoint_path(task_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    try:
        wrapper = json.loads(text)
        body = wrapper["body"]
        if not isinstance(body, str) or _checksum(body) != wrapper["sha256"]:
            raise CheckpointError(f"checksum mismatch in {path}")
        return TaskCheckpoint.from_dict(json.loads(body))
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"corrupt checkpoint file {path}: {exc}") from exc


def load_checkpoint(task_dir: str | Path) -> tuple[TaskCheckpoint | None, str | None]:
    """The task's checkpoint (None if there is none), or ``(None, why it is unusable)``."""
    try:
        return read_checkpoint(task_dir), None
    except CheckpointError as exc:
        return None, str(exc)


def delete_checkpoint(task_dir: str | Path) -> None:
    try:
        checkpoint_path(task_dir).unlink()
    except FileNotFoundError:
        pass
