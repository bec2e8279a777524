"""A partition's manifest: numbered entries that seal segments or move the begin offset.

Entry ``N`` is the file ``manifest/<N, 20 digits>.json``. Entries are numbered densely from 0
and each is created exclusively, so the manifest is a totally ordered log that concurrent
writers agree on. Two kinds exist:

- ``seal``: names a segment file, the seal_id, the base offset (the end offset after all
  earlier entries) and the record count;
- ``truncate``: a new begin offset and the segments it drops.

Since format version 2 every entry names the hash of the entry before it (``prev``; empty for
entry 0), so a replaced or reordered entry breaks the chain, and a seal entry records the
crc32 of its segment file, which readers verify. Both raise ``CorruptLogError`` naming the
file; version-1 entries (no chain, no checksum) are still read, but once an entry is chained
every later one must be. Version 3 entries may seal a slice of a shared file
(``shared_segments``), named ``<file>#<index>``; entries that do not stay version 2.

``PartitionState`` is the in-memory result of applying entries in order. A checkpoint
(``checkpoints/<N>.json``) stores the state after the first N entries so that opening a
partition with a long history reads one checkpoint plus the entries after it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from streamtide.errors import CorruptLogError, UnsupportedVersionError

ENTRY_VERSION = 3
#: The version of entries (and checkpoints) that name no slice of a shared file: releases
#: that read version 2 still read them.
_PLAIN_VERSION = 2
_CHECKPOINT_RE = re.compile(r"^(\d{20})\.json$")


def entry_name(number: int) -> str:
    return f"{number:020d}.json"


def entry_hash(data: bytes) -> str:
    """The hash a manifest entry is chained by (the next entry names it)."""
    return hashlib.sha256(data).hexdigest()[:32]


def checkpoint_number(name: str) -> int | None:
    """The entry count a checkpoint file name stands for, or None if it is not one."""
    match = _CHECKPOINT_RE.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class SealedSegment:
    """A sealed segment as the manifest knows it."""

    name: str
    base_offset: int
    record_count: int
    seal_id: str
    crc32: int | None = None  # of the whole file; None for segments sealed before checksums

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.record_count


def seal_entry(
    segment: SealedSegment, writer_id: str, sealed_ms: int, prev: str | None = None
) -> bytes:
    """A seal entry; ``prev`` is the previous entry's hash (None: unchained)."""
    return _dump(seal_fields(segment, writer_id, sealed_ms, prev))


def seal_fields(
    segment: SealedSegment, writer_id: str, sealed_ms: int, prev: str | None = None
) -> dict[str, Any]:
    """The fields of a seal entry (``seal_entry``; a topic manifest's group holds them as
    they are)."""
    entry: dict[str, Any] = {
        "v": ENTRY_VERSION if "#" in segment.name else _PLAIN_VERSION,
        "kind": "seal",
        "seal_id": segment.seal_id,
        "segment": segment.name,
        "base_offset": segment.base_offset,
        "record_count": segment.record_count,
        "writer_id": writer_id,
        "sealed_ms": sealed_ms,
    }
    if segment.crc32 is not None:
        entry["crc32"] = segment.crc32
    if prev is not None:
        entry["prev"] = prev
    return entry


def truncate_entry(begin_offset: int, dropped: list[str], prev: str | None = None) -> bytes:
    entry: dict[str, Any] = {
        "v": ENTRY_VERSION if any("#" in name for name in dropped) else _PLAIN_VERSION,
        "kind": "truncate",
        "begin_offset": begin_offset,
        "dropped": dropped,
    }
    if prev is not None:
        entry["prev"] = prev
    return _dump(entry)


@dataclass
class PartitionState:
    """Sealed segments (in offset order), begin/end offsets and the next entry number."""

    next_entry: int = 0
    begin_offset: int = 0
    end_offset: int = 0
    segments: list[SealedSegment] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    by_seal_id: dict[str, SealedSegment] = field(default_factory=dict)
    by_name: dict[str, SealedSegment] = field(default_factory=dict)
    checkpointed_at: int = 0
    #: hash of the last entry applied ("" before entry 0; None if unknown: old checkpoint)
    last_hash: str | None = ""
    #: whether an entry applied so far was chained (then every later one must be)
    chained: bool = False

    def apply(self, data: bytes, where: str) -> list[str]:
        """Apply the next entry (raw bytes); returns segment names it dropped."""
        dropped = self.apply_fields(_load(data, where), where)
        self.last_hash = entry_hash(data)
        return dropped

    def apply_fields(self, entry: dict[str, Any], where: str) -> list[str]:
        """Apply the next entry's parsed fields (its version checked); returns the segment
        names it dropped. The caller keeps ``last_hash`` (``apply``)."""
        kind = entry.get("kind")
        self._check_chain(entry.get("prev"), where)
        try:
            if kind == "seal":
                crc = entry.get("crc32")
                self._add(
                    SealedSegment(
                        name=str(entry["segment"]),
                        base_offset=int(entry["base_offset"]),
                        record_count=int(entry["record_count"]),
                        seal_id=str(entry["seal_id"]),
                        crc32=None if crc is None else int(crc),
                    ),
                    where,
                )
                dropped: list[str] = []
            elif kind == "truncate":
                dropped = self._truncate(int(entry["begin_offset"]))
            else:
                raise CorruptLogError(f"manifest entry {where} has unknown kind {kind!r}")
        except KeyError as e:
            raise CorruptLogError(f"manifest entry {where} lacks field {e}") from None
        except (TypeError, ValueError) as e:
            raise CorruptLogError(f"manifest entry {where} has a bad field: {e}") from None
        self.next_entry += 1
        return dropped

    def _check_chain(self, prev: object, where: str) -> None:
        if prev is None:
            if self.chained:
                raise CorruptLogError(
                    f"corrupt manifest: entry {where} is not chained to the entry before it"
                )
            return
        if self.last_hash is not None and prev != self.last_hash:
            raise CorruptLogError(
                f"corrupt manifest: entry {where} does not follow the entry before it (an "
                "entry was replaced, reordered or lost)"
            )
        self.chained = True

    def _add(self, seg: SealedSegment, where: str) -> None:
        if seg.base_offset != self.end_offset or seg.record_count < 0:
            raise CorruptLogError(
                f"corrupt manifest: entry {where} seals {seg.record_count} records at offset "
                f"{seg.base_offset}, but the partition ends at {self.end_offset}"
            )
        self.segments.append(seg)
        self.bases.append(seg.base_offset)
        self.by_seal_id[seg.seal_id] = seg
        self.by_name[seg.name] = seg
        self.end_offset = seg.end_offset

    def _truncate(self, begin: int) -> list[str]:
        keep = 0
        while keep < len(self.segments) and _dropped_by(self.segments[keep], begin):
            keep += 1
        gone = self.segments[:keep]
        for seg in gone:
            del self.by_seal_id[seg.seal_id]
            del self.by_name[seg.name]
        del self.segments[:keep]
        del self.bases[:keep]
        self.begin_offset = max(self.begin_offset, begin)
        return [seg.name for seg in gone]

    def plan_truncation(self, offset: int) -> tuple[int, list[str]]:
        """The begin offset and dropped segment names that ``truncate_before(offset)`` means."""
        dropped: list[str] = []
        for seg in self.segments:
            if seg.end_offset > offset:
                return seg.base_offset, dropped
            dropped.append(seg.name)
        return self.end_offset, dropped

    def covering(self, start: int, stop: int) -> list[SealedSegment]:
        """Non-empty sealed segments overlapping offsets ``[start, stop)``, in order."""
        out: list[SealedSegment] = []
        if stop <= start:
            return out
        i = max(bisect.bisect_right(self.bases, start) - 1, 0)
        while i < len(self.segments) and self.segments[i].base_offset < stop:
            seg = self.segments[i]
            if seg.record_count and seg.end_offset > start:
                out.append(seg)
            i += 1
        return out

    # -- checkpoints -------------------------------------------------------------------------

    def to_checkpoint(self) -> bytes:
        return _dump(self.checkpoint_fields())

    def checkpoint_fields(self) -> dict[str, Any]:
        """The checkpoint's fields (``to_checkpoint``; a topic checkpoint holds them as
        they are, one object per partition)."""
        shared = any("#" in s.name for s in self.segments)
        return {
            "v": ENTRY_VERSION if shared else _PLAIN_VERSION,
            "next_entry": self.next_entry,
            "begin_offset": self.begin_offset,
            "end_offset": self.end_offset,
            "last_hash": self.last_hash,
            "chained": self.chained,
            "segments": [
                [s.name, s.base_offset, s.record_count, s.seal_id, s.crc32] for s in self.segments
            ],
        }

    @classmethod
    def from_checkpoint(cls, data: bytes, where: str) -> PartitionState:
        return cls.from_checkpoint_fields(_load(data, where), where)

    @classmethod
    def from_checkpoint_fields(cls, raw: dict[str, Any], where: str) -> PartitionState:
        """The state a checkpoint's fields describe (their version checked: ``checked``)."""
        try:
            state = cls(
                next_entry=int(raw["next_entry"]),
                begin_offset=int(raw["begin_offset"]),
                end_offset=int(raw["begin_offset"]),
            )
            for name, base, count, seal_id, *crc in raw["segments"]:
                checksum = crc[0] if crc and crc[0] is not None else None
                seg = SealedSegment(str(name), int(base), int(count), str(seal_id), checksum)
                state._add(seg, where)
            state.last_hash = raw.get("last_hash")  # None in version 1: unknown
            state.chained = bool(raw.get("chained", False))
            if state.end_offset != int(raw["end_offset"]):
                raise ValueError(f"segments end at {state.end_offset}, not {raw['end_offset']}")
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptLogError(f"corrupt manifest checkpoint {where}: {e}") from None
        state.checkpointed_at = state.next_entry
        return state


def _dropped_by(seg: SealedSegment, begin: int) -> bool:
    return seg.end_offset <= begin and seg.base_offset < begin


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _load(data: bytes, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise CorruptLogError(f"corrupt manifest file {where}: {e}") from None
    return checked(obj, where)


def checked(obj: object, where: str) -> dict[str, Any]:
    """``obj`` if it is an entry's (or a checkpoint's) fields of a version this release
    reads; CorruptLogError or UnsupportedVersionError naming ``where`` if not."""
    if not isinstance(obj, dict):
        raise CorruptLogError(f"corrupt manifest file {where}: not a JSON object")
    version = obj.get("v")
    if not isinstance(version, int) or version > ENTRY_VERSION:
        raise UnsupportedVersionError(
            f"manifest file {where} has format version {version!r}; this release reads up to "
            f"{ENTRY_VERSION}"
        )
    return obj
