"""Group seals of the file log: the seals of many partitions at once.

``seal_grouped`` seals segments of grouped topics (``file_topic_manifest``): one durable
group of entries per topic. ``seal_group`` seals those of topics in the per-partition layout
of earlier releases: it plans every manifest entry they need (chained, with base offsets and
checksums), records them all in one durable seal journal record (``seal_journal``), and
then creates the entries without fsyncs. ``replay_claims`` and ``repair_claim`` bring back
entries that a power loss took from a partition, from the records that claim them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamtide.log.api import SegmentRef
from streamtide.log.errors import SealConflictError, SegmentError
from streamtide.log.file_topic_manifest import GroupEntry, TopicManifest
from streamtide.log.manifest import (
    PartitionState,
    SealedSegment,
    entry_hash,
    seal_entry,
    seal_fields,
)
from streamtide.log.seal_journal import Claim, NewClaim, SealJournal

if TYPE_CHECKING:
    from streamtide.log.partition import Partition

#: A seal to make: the segment and its seal id.
Seal = tuple[SegmentRef, str]


@dataclass
class _Plan:
    """The entries planned for one partition, after what it holds now."""

    entry: int
    end_offset: int
    prev: str | None
    #: (index of the seal, entry bytes, the sealed segment, its reference)
    entries: list[tuple[int, bytes, SealedSegment, SegmentRef]] = field(default_factory=list)
    by_seal_id: dict[str, SealedSegment] = field(default_factory=dict)
    by_name: dict[str, SealedSegment] = field(default_factory=dict)


def seal_group(
    parts: Mapping[tuple[str, int], Partition], seals: Sequence[Seal], journal: SealJournal
) -> list[int]:
    """Seal ``seals`` (caller holds the journal's lock); returns each one's base offset.
    Idempotent by seal id like ``Partition.seal``; a conflict raises before anything is
    sealed."""
    bases: list[int | None] = [None] * len(seals)
    plans: dict[tuple[str, int], _Plan] = {}
    claims: list[NewClaim] = []
    sealed_ms = time.time_ns() // 1_000_000
    for index, (ref, seal_id) in enumerate(seals):
        key = (ref.topic, ref.partition)
        part = parts[key]
        plan = plans.get(key)
        if plan is None:
            st = part.refresh()
            plan = plans[key] = _Plan(st.next_entry, st.end_offset, part.prev_hash())
        existing = part.state.by_seal_id.get(seal_id) or plan.by_seal_id.get(seal_id)
        if existing is not None:
            bases[index] = same_seal(existing, ref.name, seal_id)
            continue
        other = part.state.by_name.get(ref.name) or plan.by_name.get(ref.name)
        if other is not None:
            raise SealConflictError(
                f"segment {ref.name} of {part.where} is already sealed as {other.seal_id!r}; "
                f"cannot seal it again as {seal_id!r}"
            )
        count, crc = inspected(part, ref)
        segment = SealedSegment(ref.name, plan.end_offset, count, seal_id, crc)
        data = seal_entry(segment, ref.writer_id, sealed_ms, plan.prev)
        claims.append((ref.topic, part.topic_id, ref.partition, plan.entry, data))
        plan.entries.append((index, data, segment, ref))
        plan.by_seal_id[seal_id] = plan.by_name[ref.name] = segment
        plan.entry, plan.end_offset, plan.prev = (
            plan.entry + 1,
            segment.end_offset,
            entry_hash(data),
        )
    if claims:
        journal.record(claims)  # durable: from here on the seals hold
    for key, plan in plans.items():
        _create(parts[key], plan, bases)
    done = [base for base in bases if base is not None]
    if len(done) != len(seals):
        raise AssertionError("a seal of the group got no base offset")
    return done


def inspected(part: Partition, ref: SegmentRef) -> tuple[int, int]:
    """The record count and crc32 of a segment to seal, read from its file: SegmentError if
    the file is gone or damaged, or holds another count than its reference says. For a slice
    of a shared file the file is read once per handle (``SharedSegments``), so a stage's
    seals read one file per work unit that wrote, not one per partition."""
    count, crc = part.inspect(ref.name)
    if count != ref.record_count:
        raise SegmentError(
            f"segment {ref.name} of {part.where} holds {count} records, its reference says "
            f"{ref.record_count}"
        )
    return count, crc


def seal_grouped(
    manifests: Mapping[str, TopicManifest],
    parts: Mapping[tuple[str, int], Partition],
    seals: Sequence[Seal],
) -> list[int]:
    """Seal ``seals`` of grouped topics (``file_topic_manifest``): one durable group per
    topic, whatever its partitions; returns each seal's base offset. Idempotent by seal id
    like ``Partition.seal``; every topic is planned (and a conflict raises) before any
    group is created. A topic whose next group another writer took is planned again."""
    sealed_ms = time.time_ns() // 1_000_000
    by_topic: dict[str, list[int]] = {}
    for index, (ref, _) in enumerate(seals):
        by_topic.setdefault(ref.topic, []).append(index)
    counted: dict[int, tuple[int, int]] = {}
    bases: dict[int, int] = {}
    plans = {}
    for topic, indexes in by_topic.items():
        manifests[topic].refresh()
        plans[topic] = _plan_group(parts, seals, indexes, counted, bases, sealed_ms)
    for topic, entries in plans.items():
        while entries and not manifests[topic].create(entries):
            manifests[topic].refresh()  # another writer took the group number: plan again
            entries = _plan_group(parts, seals, by_topic[topic], counted, bases, sealed_ms)
    return [bases[index] for index in range(len(seals))]


def _plan_group(
    parts: Mapping[tuple[str, int], Partition],
    seals: Sequence[Seal],
    indexes: Sequence[int],
    counted: dict[int, tuple[int, int]],
    bases: dict[int, int],
    sealed_ms: int,
) -> list[GroupEntry]:
    """The entries of one topic's group for the seals at ``indexes``, after what each
    partition holds now; fills ``bases`` (``counted`` keeps what ``inspected`` read)."""
    entries: list[GroupEntry] = []
    ends: dict[int, int] = {}
    planned: dict[tuple[int, str], SealedSegment] = {}  # (partition, seal id or name)
    for index in indexes:
        ref, seal_id = seals[index]
        part = parts[(ref.topic, ref.partition)]
        st = part.state
        existing = st.by_seal_id.get(seal_id) or planned.get((ref.partition, seal_id))
        if existing is not None:
            bases[index] = same_seal(existing, ref.name, seal_id)
            continue
        other = st.by_name.get(ref.name) or planned.get((ref.partition, ref.name))
        if other is not None:
            raise SealConflictError(
                f"segment {ref.name} of {part.where} is already sealed as {other.seal_id!r}; "
                f"cannot seal it again as {seal_id!r}"
            )
        if index not in counted:
            counted[index] = inspected(part, ref)
        count, crc = counted[index]
        base = ends.get(ref.partition, st.end_offset)
        segment = SealedSegment(ref.name, base, count, seal_id, crc)
        entries.append((ref.partition, seal_fields(segment, ref.writer_id, sealed_ms)))
        planned[(ref.partition, seal_id)] = planned[(ref.partition, ref.name)] = segment
        bases[index], ends[ref.partition] = base, segment.end_offset
    return entries


def _create(part: Partition, plan: _Plan, bases: list[int | None]) -> None:
    """Create a partition's planned entries without fsyncs; after a lost race (another
    writer took an entry number, or replayed this record's claim) the rest are sealed one by
    one, durably. ``head.json`` is left as it is: replacing it costs more than the entries
    (the file system writes a file renamed over another at once), and what it guards
    against, entries lost after they were created, the journal record covers until they are
    synced."""
    racing = False
    for index, data, segment, ref in plan.entries:
        if not racing and part.create_entry(data, durable=False, head=False):
            bases[index] = segment.base_offset
            continue
        racing = True
        bases[index] = part.seal(
            ref.name, segment.record_count, ref.writer_id, segment.seal_id, segment.crc32
        )


def replay_claims(part: Partition, journal: SealJournal, *, everything: bool) -> int:
    """Create (durably) the entries that journal records claim on ``part`` and that it is
    missing: of records written before this boot, or of every record (``everything``).
    A claim at the partition's end whose segment is gone is not replayed: its writer died
    before creating the entry, and the segment was aborted since (a gap before later entries
    is always filled: a truncation may have deleted the segment). Returns how many were
    created."""
    claims = journal.claims(part.topic, part.topic_id, part.number, everything=everything)
    made = 0
    while claims:
        st = part.refresh()
        claim = _chaining(claims, st, part.prev_hash())
        if claim is None or not (part.has_segment(claim.segment) or part.has_later_entry()):
            break  # a seal its writer gave up (it died, and the segment was aborted since)
        made += part.create_entry(claim.data)
    return made


def repair_claim(part: Partition, journal: SealJournal) -> bytes | None:
    """The entry a journal record claims as ``part``'s next one, chained to the entry
    before it (None: no record does)."""
    claims = journal.claims(part.topic, part.topic_id, part.number, everything=True)
    claim = _chaining(claims, part.state, part.prev_hash()) if claims else None
    return None if claim is None else claim.data


def _chaining(claims: dict[int, list[Claim]], st: PartitionState, prev: str | None) -> Claim | None:
    """Of the claims on the next entry, the newest record's that chains to the entry before
    it and seals what the partition does not hold yet."""
    fitting = [
        c
        for c in claims.get(st.next_entry, ())
        if c.prev == prev and c.seal_id not in st.by_seal_id
    ]
    return max(fitting, key=lambda c: c.seq) if fitting else None


def same_seal(existing: SealedSegment, name: str, seal_id: str) -> int:
    """The base offset of an earlier seal with this seal_id, if it sealed the same segment."""
    if existing.name != name:
        raise SealConflictError(
            f"seal_id {seal_id!r} already sealed segment {existing.name}, not {name}"
        )
    return existing.base_offset
