"""The seal journal of the file log: one durable record for a whole group of seals.

Sealing a segment creates a manifest entry in its partition (``manifest``); made durable one
by one, that is an exclusive create and two fsyncs per partition, which is most of a batch's
cost when a stage seals hundreds of partitions. ``FileLog.seal_many`` instead writes one
*journal record* naming every entry it is about to create, makes that one file durable, and
then creates the entries without fsyncs. The record is the write-ahead truth; the entries
are a view of it that becomes durable lazily.

Layout: ``<root>/.seals/<seq, 20 digits>-<boot id>.json`` holds ``{"v": 1, "claims":
[[topic, topic id, partition, entry number, entry text], ...]}``; ``<root>/.seals/lock`` is
locked (``flock``) by whoever writes records or creates the entries they claim, so group
seals never race each other (seals of ``seal``/``append`` still may, and those are durable
at once).

Recovery. A process that dies loses nothing it created: only a power loss or an operating
system crash loses files that were not synced, and each changes the boot id. So:

- a process opening a partition replays the claims of records written before the current
  boot: for the entry number the partition is missing, the claim that chains to the entry
  before it and seals what the partition does not hold yet is created again, durably (of
  several such claims the newest record's: its writer held the lock last and found the
  entry missing);
- an entry found empty or damaged (a power loss between its creation and its write-back), or
  a gap, is repaired from any record that claims it the same way;
- records are deleted only after the whole file system was synced (``LocalStorage.sync_all``;
  ``FileLog`` does it every ``sync_interval_s`` in the background, and when a handle that
  wrote records closes), and only records whose entries all existed when the sync began
  (listed under the lock); those of an earlier boot after their claims were replayed.

A claim whose entry number another writer took first (a lost race) never chains to what the
partition holds, so replaying it is a no-op.
"""

from __future__ import annotations

import fcntl
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from streamtide.log.errors import CorruptLogError
from streamtide.log.storage import LocalStorage

#: The journal's directory under the log's root (never a topic name).
SEALS_DIR = ".seals"
_LOCK = f"{SEALS_DIR}/lock"
_RECORD_RE = re.compile(r"^(\d{20})-([0-9A-Za-z-]{1,64})\.json$")
_VERSION = 1
_UNKNOWN_BOOT = "unknown"
#: Pending records past which a group sealer syncs and compacts even before the interval.
_MAX_PENDING = 512


def boot_id() -> str:
    """This boot of the machine (changes with every power loss or crash of the system)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or _UNKNOWN_BOOT
    except OSError:
        return _UNKNOWN_BOOT  # every record counts as of an earlier boot (replayed)


@dataclass(frozen=True, slots=True)
class Claim:
    """A manifest entry a journal record says its writer creates."""

    seq: int
    topic_id: str | None
    entry: int
    data: bytes
    prev: str | None
    seal_id: str
    segment: str


#: A claim to record: topic, its id (a re-created topic has another), partition, entry
#: number and the entry's bytes.
NewClaim = tuple[str, str | None, int, int, bytes]


class SealJournal:
    """The journal records under one storage root (``FileLog`` serialises calls)."""

    def __init__(self, storage: LocalStorage, sync_interval_s: float = 30.0) -> None:
        self.storage = storage
        self.sync_interval_s = sync_interval_s
        self.boot = boot_id()
        self._parsed: dict[str, dict[tuple[str, int], list[Claim]]] = {}
        self._dir_made = False
        self._oldest_unsynced: float | None = None
        self._unsynced = 0

    # -- writing -----------------------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal's lock (across processes) for a group seal or a compaction."""
        self._make_dir()
        fd = open(self.storage.path(_LOCK), "a+b")  # noqa: SIM115 - held across the yield
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fd.close()  # releases the lock

    def record(self, claims: Sequence[NewClaim]) -> str:
        """Write a record of ``claims`` durably (caller holds the lock); returns its name."""
        self._make_dir()
        seq = max([time.time_ns(), *(s + 1 for s, _ in self._names())])
        name = f"{seq:020d}-{self.boot}.json"
        body = {"v": _VERSION, "claims": [[t, i, p, n, d.decode()] for t, i, p, n, d in claims]}
        self.storage.write_bytes_atomic(f"{SEALS_DIR}/{name}", json.dumps(body).encode())
        if self._oldest_unsynced is None:
            self._oldest_unsynced = time.monotonic()
        self._unsynced += 1
        return name

    def compact_due(self) -> bool:
        """Whether this handle's records are old enough (or many enough) to sync and drop."""
        if self._oldest_unsynced is None:
            return False
        age = time.monotonic() - self._oldest_unsynced
        return age >= self.sync_interval_s or self._unsynced > _MAX_PENDING

    def settled(self, replay: Callable[[set[tuple[str, int]]], None]) -> list[str]:
        """The records whose entries all exist now (caller holds the lock, so no group seal
        is under way): after a sync of the file system they may go (``drop``). The claims
        of earlier boots' records are replayed first (``replay(partitions)``)."""
        names = self._names()
        earlier = {(t, p) for s, b in names if self._earlier(b) for t, p in self._claims_of(s, b)}
        if earlier:
            replay(earlier)
        self._oldest_unsynced, self._unsynced = None, 0
        return [_name(seq, boot) for seq, boot in names]

    def drop(self, names: Sequence[str]) -> int:
        """Delete records ``settled`` named once a sync made their entries durable."""
        for name in names:
            self.storage.delete_file(f"{SEALS_DIR}/{name}")
            self._parsed.pop(name, None)
        return len(names)

    def unsynced(self) -> bool:
        """Whether this handle wrote records that no sync covers yet."""
        return self._unsynced > 0

    # -- reading -----------------------------------------------------------------------------

    def claims(
        self, topic: str, topic_id: str | None, partition: int, *, everything: bool
    ) -> dict[int, list[Claim]]:
        """The claims on ``topic``/``partition`` (of the topic with this id) by entry number:
        of every record (``everything``) or only of records written before this boot."""
        out: dict[int, list[Claim]] = {}
        for seq, boot in self._names():
            if everything or self._earlier(boot):
                for claim in self._claims_of(seq, boot).get((topic, partition), ()):
                    if claim.topic_id == topic_id:
                        out.setdefault(claim.entry, []).append(claim)
        return out

    def has_earlier_boot(self) -> bool:
        """Whether a record of an earlier boot is pending (its entries may be lost)."""
        return any(self._earlier(boot) for _, boot in self._names())

    def _earlier(self, boot: str) -> bool:
        """Whether a record of ``boot`` may predate a power loss (without a boot id, any)."""
        return boot != self.boot or self.boot == _UNKNOWN_BOOT

    def _names(self) -> list[tuple[int, str]]:
        out = []
        for info in self.storage.list_dir(SEALS_DIR):
            match = _RECORD_RE.match(info.base_name)
            if match:
                out.append((int(match.group(1)), match.group(2)))
        return sorted(out)

    def _claims_of(self, seq: int, boot: str) -> dict[tuple[str, int], list[Claim]]:
        name = _name(seq, boot)
        known = self._parsed.get(name)
        if known is not None:
            return known
        where = self.storage.path(f"{SEALS_DIR}/{name}")
        try:
            raw = json.loads(self.storage.read_bytes(f"{SEALS_DIR}/{name}"))
        except FileNotFoundError:
            return {}  # compacted meanwhile: its entries are durable
        except ValueError as e:
            raise CorruptLogError(f"seal journal record {where} is corrupt: {e}") from None
        by_partition: dict[tuple[str, int], list[Claim]] = {}
        try:
            for topic, topic_id, partition, entry, text in raw["claims"]:
                data = str(text).encode()
                fields = json.loads(data)
                claim = Claim(
                    seq,
                    topic_id,
                    int(entry),
                    data,
                    fields.get("prev"),
                    str(fields["seal_id"]),
                    str(fields["segment"]),
                )
                by_partition.setdefault((str(topic), int(partition)), []).append(claim)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptLogError(f"seal journal record {where} is corrupt: {e}") from None
        self._parsed[name] = by_partition
        return by_partition

    def _make_dir(self) -> None:
        if not self._dir_made:
            self.storage.make_dir(SEALS_DIR)
            self._dir_made = True


def _name(seq: int, boot: str) -> str:
    return f"{seq:020d}-{boot}.json"
