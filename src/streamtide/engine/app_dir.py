"""The application directory: epochs, offset, prepare, seal and commit records, assignments.

One directory per application, next to the log. Protocol records (``engine.protocol``) are
created exclusively and never replaced: of two drivers writing the same record the first one
holds, and the other adopts what it finds. Before every write the driver checks that its
epoch is still the newest, so a driver another instance took over from stops at its next
write with ``FencedError``. The highest batch with a commit record is the application's
committed position. Every file that cannot be read is reported with its path.

Layout::

    <root>/epochs/<epoch>.json                    a driver's claim, created exclusively
    <root>/batches/<batch>/offsets-<stage>.json   input ranges fixed before the stage ran
    <root>/batches/<batch>/prepare-<stage>.json   the attempt to seal per task + new task state
    <root>/batches/<batch>/sealed-<stage>.json    the stage's segments are all sealed
    <root>/batches/<batch>/commit.json            the batch is committed (task states)
    <root>/assignments/<batch>.json               AssignmentInfo per client, and each client's
                                                  SubscriptionInfo for the next batch
    <root>/history.jsonl                          the assignment history: one JSON event per
                                                  line (``engine.assignment_history``), newest
                                                  last, about the latest ``KEEP_HISTORY``
    <root>/topology.json                          the store and internal topic names the
                                                  application's state lives under
    <root>/unit-ids.json                          Kafka: the work units' transactional ids
                                                  not fenced yet, each slot's generation

Epochs, the topology's names and the work units' ids are made durable when written (fsync of
the file and its directory). So are the batches' records and assignments, unless
``sync_batches`` is off: on Kafka, where Kafka's committed offsets and transactions decide
everything and the records are the driver's account of it, a batch writes them without an
fsync (a power loss may take the newest, or leave them empty: such a record reads as absent,
and a driver that needs it writes it anew).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any, TypeVar

from streamtide.config import StreamsConfig
from streamtide.engine import protocol
from streamtide.engine.protocol import (
    CommitRecord,
    EpochRecord,
    GlobalOffsetsRecord,
    OffsetsRecord,
    PrepareRecord,
    SealRecord,
)
from streamtide.errors import CorruptRecordError, FencedError, StreamtideError
from streamtide.files import create_exclusively, write_atomically
from streamtide.processor.resource_names import ResourceNames

#: Epoch records kept (older ones only tell who ran when).
KEEP_EPOCHS = 10
#: Assignment-history events kept (the file is cut back to this many when it holds twice as
#: many).
KEEP_HISTORY = 1000

log = logging.getLogger(__name__)

R = TypeVar("R", OffsetsRecord, GlobalOffsetsRecord, PrepareRecord, SealRecord, CommitRecord)


class AppDirectory:
    """Durable driver-side records of one application.

    Reading needs nothing; writing needs an epoch (``take_epoch``), which every write checks.
    ``sync_batches``: make each batch's records durable when written (see the module
    docstring).
    """

    def __init__(
        self, root: str | Path, application_id: str | None = None, *, sync_batches: bool = True
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.application_id = application_id or self.root.name
        self.epoch: int | None = None
        self.sync_batches = sync_batches

    def _batch_dir(self, batch: int) -> Path:
        return self.root / "batches" / f"{batch:012d}"

    # ---- epochs and fencing --------------------------------------------------------------

    def epochs(self) -> list[int]:
        folder = self.root / "epochs"
        if not folder.exists():
            return []
        return sorted(
            int(p.stem) for p in folder.iterdir() if p.suffix == ".json" and p.stem.isdigit()
        )

    def take_epoch(self) -> int:
        """Claim the next epoch (exclusively); every older driver is fenced from now on."""
        driver = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        while True:
            epoch = protocol.next_epoch(self.epochs())
            record = EpochRecord(epoch, driver, time.time_ns() // 1_000_000)
            path = self.root / "epochs" / f"{epoch:012d}.json"
            if create_exclusively(path, protocol.encode(record)):
                self.epoch = epoch
                for old in self.epochs()[:-KEEP_EPOCHS]:  # the newest one is all fencing needs
                    (self.root / "epochs" / f"{old:012d}.json").unlink(missing_ok=True)
                return epoch

    def check_fence(self) -> None:
        """Raise ``FencedError`` unless this driver's epoch is the newest."""
        if self.epoch is None:
            raise StreamtideError("the application directory is read-only: no epoch taken")
        newer = protocol.fenced_by(self.epoch, self.epochs())
        if newer is not None:
            raise FencedError(
                f"another instance of application {self.application_id!r} took over (epoch "
                f"{newer}; this driver holds epoch {self.epoch}): this one stops without "
                "writing anything more"
            )

    # ---- records -------------------------------------------------------------------------

    def _create(self, path: Path, record: R, **context: int) -> R:
        """Create a protocol record, or adopt the one another driver created first."""
        self.check_fence()
        data = protocol.encode(record)
        if create_exclusively(path, data, fsync=self.sync_batches):
            return record
        self.check_fence()  # lost to a newer driver: stop; to an older one: adopt its record
        found: R | None = self._read(path, _KINDS[type(record)], **context)
        if found is None:  # an unsynced record a power loss left empty: write it anew
            path.unlink(missing_ok=True)
            return self._create(path, record, **context)
        return found

    def _read(self, path: Path, kind: str, **context: int) -> Any | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CorruptRecordError(f"cannot read {kind} record {path}: {exc}") from exc
        try:
            return protocol.decode(data, kind, str(path), **context)
        except CorruptRecordError as exc:
            if self.sync_batches:
                raise
            log.warning("%s record %s is unreadable, taken as absent: %s", kind, path, exc)
            return None

    def create_offsets(self, record: OffsetsRecord) -> OffsetsRecord:
        path = self._batch_dir(record.batch) / f"offsets-{record.stage}.json"
        return self._create(path, record, batch=record.batch, stage=record.stage)

    def read_offsets(self, batch: int, stage: int) -> OffsetsRecord | None:
        path = self._batch_dir(batch) / f"offsets-{stage}.json"
        return self._read(path, "offsets", batch=batch, stage=stage)

    def create_global_offsets(self, record: GlobalOffsetsRecord) -> GlobalOffsetsRecord:
        path = self._batch_dir(record.batch) / "global-offsets.json"
        return self._create(path, record, batch=record.batch)

    def read_global_offsets(self, batch: int) -> GlobalOffsetsRecord | None:
        path = self._batch_dir(batch) / "global-offsets.json"
        return self._read(path, "global_offsets", batch=batch)

    def create_prepare(self, record: PrepareRecord) -> PrepareRecord:
        path = self._batch_dir(record.batch) / f"prepare-{record.stage}.json"
        return self._create(path, record, batch=record.batch, stage=record.stage)

    def read_prepare(self, batch: int, stage: int) -> PrepareRecord | None:
        path = self._batch_dir(batch) / f"prepare-{stage}.json"
        return self._read(path, "prepare", batch=batch, stage=stage)

    def create_seal(self, record: SealRecord) -> SealRecord:
        path = self._batch_dir(record.batch) / f"sealed-{record.stage}.json"
        return self._create(path, record, batch=record.batch, stage=record.stage)

    def read_seal(self, batch: int, stage: int) -> SealRecord | None:
        path = self._batch_dir(batch) / f"sealed-{stage}.json"
        return self._read(path, "seal", batch=batch, stage=stage)

    def create_commit(self, record: CommitRecord) -> CommitRecord:
        path = self._batch_dir(record.batch) / "commit.json"
        return self._create(path, record, batch=record.batch)

    def read_commit(self, batch: int) -> CommitRecord | None:
        return self._read(self._batch_dir(batch) / "commit.json", "commit", batch=batch)

    # ---- batches -------------------------------------------------------------------------

    def batches(self) -> list[int]:
        folder = self.root / "batches"
        if not folder.exists():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    def last_committed(self) -> CommitRecord | None:
        """The newest commit record, or None."""
        for batch in reversed(self.batches()):
            commit = self.read_commit(batch)
            if commit is not None:
                return commit
        return None

    def recent_commits(self, count: int) -> list[CommitRecord]:
        found = []
        for batch in reversed(self.batches()):
            commit = self.read_commit(batch)
            if commit is not None:
                found.append(commit)
                if len(found) == count:
                    break
        return list(reversed(found))

    def prune(self, keep: int = 100) -> None:
        """Delete the records of old committed batches, keeping the newest ``keep``."""
        self.check_fence()
        committed = [b for b in self.batches() if (self._batch_dir(b) / "commit.json").exists()]
        for batch in committed[:-keep]:
            shutil.rmtree(self._batch_dir(batch), ignore_errors=True)
            (self.root / "assignments" / f"{batch:012d}.json").unlink(missing_ok=True)

    # ---- assignments ---------------------------------------------------------------------

    def write_assignment(
        self, batch: int, subscriptions: dict[str, bytes], assignments: dict[str, bytes]
    ) -> None:
        """Encoded SubscriptionInfo and AssignmentInfo records per client (base64 in JSON)."""
        self.check_fence()
        data = {
            "subscriptions": {c: base64.b64encode(b).decode() for c, b in subscriptions.items()},
            "assignments": {c: base64.b64encode(b).decode() for c, b in assignments.items()},
        }
        path = self.root / "assignments" / f"{batch:012d}.json"
        write_atomically(path, json.dumps(data, sort_keys=True).encode(), fsync=self.sync_batches)

    def read_assignment(self, batch: int) -> dict[str, dict[str, bytes]] | None:
        path = self.root / "assignments" / f"{batch:012d}.json"
        try:
            data = json.loads(path.read_bytes())
            return {
                part: {c: base64.b64decode(text) for c, text in data[part].items()}
                for part in ("subscriptions", "assignments")
            }
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptRecordError(f"assignment record {path} is unreadable: {exc}") from exc

    # ---- assignment history --------------------------------------------------------------

    def append_history(self, events: list[dict[str, Any]], keep: int = KEEP_HISTORY) -> None:
        """Append assignment-history events; keep the file to the latest ``keep`` or so."""
        if not events:
            return
        self.check_fence()
        path = self.root / "history.jsonl"
        with open(path, "a", encoding="utf-8") as out:
            for event in events:
                out.write(json.dumps(event, sort_keys=True) + "\n")
        lines = path.read_bytes().splitlines()
        if len(lines) > 2 * keep:
            write_atomically(path, b"\n".join(lines[-keep:]) + b"\n")

    def read_history(self, count: int) -> list[dict[str, Any]]:
        """The latest ``count`` assignment-history events, oldest first (a line that cannot
        be read, such as one cut short by a crash while appending, is skipped)."""
        path = self.root / "history.jsonl"
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CorruptRecordError(f"cannot read the assignment history {path}: {exc}") from exc
        events: list[dict[str, Any]] = []
        for line in reversed(lines):
            if len(events) >= count:
                break
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        return list(reversed(events))

    # ---- the topology's resource names ----------------------------------------------------

    def read_resource_names(self) -> ResourceNames | None:
        """The store and internal topic names recorded at the last start, or None."""
        path = self.root / "topology.json"
        try:
            return ResourceNames.from_dict(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(f"topology record {path} is unreadable: {exc}") from exc

    def write_resource_names(self, names: ResourceNames) -> None:
        self.check_fence()
        data = json.dumps(names.to_dict(), sort_keys=True).encode()
        write_atomically(self.root / "topology.json", data)

    # ---- work units' transactional ids (Kafka) -------------------------------------------

    def read_unit_ids(self) -> dict[str, Any] | None:
        """The work units' transactional ids recorded last (``engine.unit_ids``), or None."""
        path = self.root / "unit-ids.json"
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CorruptRecordError(f"work-unit id record {path} is unreadable: {exc}") from exc
        if not isinstance(data, dict):
            raise CorruptRecordError(f"work-unit id record {path} is not an object")
        return data

    def write_unit_ids(self, data: dict[str, Any]) -> None:
        self.check_fence()
        write_atomically(self.root / "unit-ids.json", json.dumps(data, sort_keys=True).encode())


_KINDS = {
    GlobalOffsetsRecord: "global_offsets",
    OffsetsRecord: "offsets",
    PrepareRecord: "prepare",
    SealRecord: "seal",
    CommitRecord: "commit",
}


def app_dir_for(config: StreamsConfig) -> Path:
    """Where the driver keeps the application's records: ``<log root>/_apps/<application_id>``
    on the file log, next to the log; ``<state_dir>/_apps/<application_id>`` on Kafka, where
    Kafka's committed offsets are the truth and the records are the driver's account."""
    from streamtide.log.factory import is_kafka_url, log_path

    if is_kafka_url(config.log):
        return config.local_state_dir().resolve() / "_apps" / config.application_id
    return Path(log_path(config.log)).resolve() / "_apps" / config.application_id
