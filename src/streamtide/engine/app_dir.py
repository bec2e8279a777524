"""The application directory: offset log, prepare and commit records, assignments.

One directory per application, next to the log. Every record is a JSON (or binary) file
created atomically (temporary file + rename), so a crash never leaves half a record; the
highest batch with a commit record is the application's committed position.

Layout::

    <root>/batches/<batch>/offsets-<stage>.json   input ranges fixed before the stage ran
    <root>/batches/<batch>/prepare-<stage>.json   the attempt to seal per task + new task state
    <root>/batches/<batch>/sealed-<stage>.json    the stage's segments are all sealed
    <root>/batches/<batch>/commit.json            the batch is committed (task states)
    <root>/assignments/<batch>.json               AssignmentInfo per client, and each client's
                                                  SubscriptionInfo for the next batch
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

from streamtide.files import write_atomically


class AppDirectory:
    """Durable driver-side records of one application."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _batch_dir(self, batch: int) -> Path:
        return self.root / "batches" / f"{batch:012d}"

    def _write_json(self, path: Path, data: Any) -> None:
        write_atomically(path, json.dumps(data, sort_keys=True).encode())

    @staticmethod
    def _read_json(path: Path) -> Any | None:
        if not path.exists():
            return None
        return json.loads(path.read_text())

    # ---- per-stage records ---------------------------------------------------------------

    def write_offsets(self, batch: int, stage: int, ranges: dict[str, Any]) -> None:
        self._write_json(self._batch_dir(batch) / f"offsets-{stage}.json", ranges)

    def read_offsets(self, batch: int, stage: int) -> dict[str, Any] | None:
        return self._read_json(self._batch_dir(batch) / f"offsets-{stage}.json")

    def write_prepare(self, batch: int, stage: int, prepare: dict[str, Any]) -> None:
        self._write_json(self._batch_dir(batch) / f"prepare-{stage}.json", prepare)

    def read_prepare(self, batch: int, stage: int) -> dict[str, Any] | None:
        return self._read_json(self._batch_dir(batch) / f"prepare-{stage}.json")

    def mark_sealed(self, batch: int, stage: int) -> None:
        self._write_json(self._batch_dir(batch) / f"sealed-{stage}.json", {"stage": stage})

    def is_sealed(self, batch: int, stage: int) -> bool:
        return (self._batch_dir(batch) / f"sealed-{stage}.json").exists()

    # ---- batch records -------------------------------------------------------------------

    def write_commit(self, batch: int, commit: dict[str, Any]) -> None:
        self._write_json(self._batch_dir(batch) / "commit.json", commit)

    def read_commit(self, batch: int) -> dict[str, Any] | None:
        return self._read_json(self._batch_dir(batch) / "commit.json")

    def batches(self) -> list[int]:
        folder = self.root / "batches"
        if not folder.exists():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    def last_committed(self) -> tuple[int, dict[str, Any]] | None:
        """The newest committed batch and its commit record, or None."""
        for batch in reversed(self.batches()):
            commit = self.read_commit(batch)
            if commit is not None:
                return batch, commit
        return None

    def recent_commits(self, count: int) -> list[tuple[int, dict[str, Any]]]:
        found = []
        for batch in reversed(self.batches()):
            commit = self.read_commit(batch)
            if commit is not None:
                found.append((batch, commit))
                if len(found) == count:
                    break
        return list(reversed(found))

    def prune(self, keep: int = 100) -> None:
        """Delete the records of old committed batches, keeping the newest ``keep``."""
        committed = [b for b in self.batches() if self.read_commit(b) is not None]
        for batch in committed[:-keep]:
            shutil.rmtree(self._batch_dir(batch), ignore_errors=True)
            (self.root / "assignments" / f"{batch:012d}.json").unlink(missing_ok=True)

    # ---- assignments ---------------------------------------------------------------------

    def write_assignment(
        self, batch: int, subscriptions: dict[str, bytes], assignments: dict[str, bytes]
    ) -> None:
        """Encoded SubscriptionInfo and AssignmentInfo records per client (base64 in JSON)."""
        self._write_json(
            self.root / "assignments" / f"{batch:012d}.json",
            {
                "subscriptions": {
                    c: base64.b64encode(b).decode() for c, b in subscriptions.items()
                },
                "assignments": {c: base64.b64encode(b).decode() for c, b in assignments.items()},
            },
        )

    def read_assignment(self, batch: int) -> dict[str, dict[str, bytes]] | None:
        data = self._read_json(self.root / "assignments" / f"{batch:012d}.json")
        if data is None:
            return None
        return {
            part: {c: base64.b64decode(text) for c, text in data[part].items()}
            for part in ("subscriptions", "assignments")
        }


def app_dir_for(config: Any) -> Path:
    """``<log root>/_apps/<application_id>``: driver records live next to the log, which
    must be a file log in this release (ConfigError for ``kafka://``)."""
    from streamtide.errors import ConfigError
    from streamtide.log.factory import is_kafka_url, log_path

    if is_kafka_url(config.log):
        raise ConfigError(
            f"applications run on the file log only in this release, not on {config.log}: "
            "Kafka logs work with open_log, read_topic and the topics, produce and consume "
            "commands, and running an application on Kafka awaits its transactional commit "
            "(see docs/kafka.md)"
        )
    return Path(log_path(config.log)).resolve() / "_apps" / config.application_id
