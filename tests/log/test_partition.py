"""Unsealed segments, sealing, aborting, truncation and checkpoints of a partition."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from streamtide.log import (
    FileLog,
    LogError,
    LogRecord,
    OffsetOutOfRangeError,
    SealConflictError,
    SegmentError,
    SegmentRef,
)
from streamtide.log.manifest import PartitionState, entry_name

#: The ``log`` fixture's topics have the per-partition manifest layout (topics of earlier
#: releases), whose entry files these tests check; grouped topics: ``test_topic_manifest.py``.
PER_PARTITION_LAYOUT = True


def recs(n: int, prefix: str = "v") -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), i) for i in range(n)]


def vals(items) -> list[bytes]:
    return [r.value for r in items]


@pytest.fixture
def topic(log: FileLog) -> str:
    log.create_topic("t", 2)
    return "t"


# -- unsealed segments and sealing -----------------------------------------------------------


def test_unsealed_segments_are_invisible_until_sealed(log: FileLog, topic: str) -> None:
    log.append(topic, 0, recs(2, "a"))
    ref = log.write_segment(topic, 0, recs(3, "s"), writer_id="batch-1/0_0/attempt-0")
    assert ref == SegmentRef(topic, 0, ref.name, "batch-1/0_0/attempt-0", 3)
    assert log.end_offset(topic, 0) == 2
    assert vals(log.read(topic, 0)) == [b"a0", b"a1"]
    assert log.list_unsealed(topic, 0) == [ref]
    assert log.list_unsealed(topic, 1) == []
    assert log.seal(topic, 0, ref, seal_id="batch-1/0_0") == 2
    assert log.end_offset(topic, 0) == 5
    assert vals(log.read(topic, 0, 2)) == [b"s0", b"s1", b"s2"]
    assert log.list_unsealed(topic, 0) == []


def test_temporary_files_are_never_listed_as_unsealed(log: FileLog, topic: str) -> None:
    ref = log.write_segment(topic, 0, recs(1), writer_id="w")
    seg_dir = Path(log.root) / topic / "0" / "segments"
    (seg_dir / f".tmp-{'a' * 32}-{ref.name.replace('w+', 'x+')}").write_bytes(b"")
    assert log.list_unsealed(topic, 0) == [ref]


def test_seal_is_idempotent_by_seal_id(log: FileLog, topic: str, tmp_path: Path) -> None:
    ref = log.write_segment(topic, 1, recs(4), writer_id="w")
    assert log.seal(topic, 1, ref, seal_id="batch-3/0_1") == 0
    log.append(topic, 1, recs(1))
    assert log.seal(topic, 1, ref, seal_id="batch-3/0_1") == 0
    other_handle = FileLog(log.root, grouped_manifests=False)
    assert other_handle.seal(topic, 1, ref, seal_id="batch-3/0_1") == 0
    assert log.end_offset(topic, 1) == 5
    assert len(list(Path(log.root, topic, "1", "manifest").iterdir())) == 2


def test_seal_conflicts(log: FileLog, topic: str) -> None:
    a = log.write_segment(topic, 0, recs(1), writer_id="w")
    b = log.write_segment(topic, 0, recs(1), writer_id="w")
    log.seal(topic, 0, a, seal_id="s1")
    with pytest.raises(SealConflictError, match="already sealed segment"):
        log.seal(topic, 0, b, seal_id="s1")  # same seal_id, other segment
    with pytest.raises(SealConflictError, match="already sealed as"):
        log.seal(topic, 0, a, seal_id="s2")  # same segment, other seal_id
    assert log.end_offset(topic, 0) == 1
    assert log.seal(topic, 0, b, seal_id="s2") == 1


def test_seal_rejects_bad_references(log: FileLog, topic: str) -> None:
    ref = log.write_segment(topic, 0, recs(2), writer_id="w")
    with pytest.raises(LogError, match="belongs to t/0"):
        log.seal(topic, 1, ref, seal_id="s")
    with pytest.raises(LogError, match="seal_id"):
        log.seal(topic, 0, ref, seal_id="")
    with pytest.raises(SegmentError, match="its reference says 5"):
        log.seal(topic, 0, replace(ref, record_count=5), seal_id="s")
    with pytest.raises(SegmentError, match="does not exist"):
        log.seal(topic, 0, replace(ref, name="w+" + "0" * 32 + ".arrow"), seal_id="s")
    (Path(log.root) / topic / "0" / "segments" / "w+{}.arrow".format("1" * 32)).write_bytes(b"junk")
    with pytest.raises(SegmentError, match="unreadable"):
        log.seal(topic, 0, replace(ref, name="w+" + "1" * 32 + ".arrow"), seal_id="s")
    assert log.end_offset(topic, 0) == 0


def test_sealing_an_empty_segment_records_its_seal_id(log: FileLog, topic: str) -> None:
    ref = log.write_segment(topic, 0, [], writer_id="w")
    assert log.seal(topic, 0, ref, seal_id="empty") == 0
    assert log.seal(topic, 0, ref, seal_id="empty") == 0
    log.append(topic, 0, recs(2))
    assert [r.offset for r in log.read(topic, 0)] == [0, 1]


# -- aborting --------------------------------------------------------------------------------


def test_abort_unsealed(log: FileLog, topic: str) -> None:
    ref = log.write_segment(topic, 0, recs(2), writer_id="w")
    log.abort_unsealed(topic, 0, ref)
    log.abort_unsealed(topic, 0, ref)  # already gone: no-op
    assert log.list_unsealed(topic, 0) == []
    with pytest.raises(SegmentError, match="does not exist"):
        log.seal(topic, 0, ref, seal_id="s")
    sealed = log.write_segment(topic, 0, recs(2), writer_id="w")
    log.seal(topic, 0, sealed, seal_id="s")
    with pytest.raises(SegmentError, match="cannot be aborted"):
        log.abort_unsealed(topic, 0, sealed)
    with pytest.raises(SegmentError, match="not a segment name"):
        log.abort_unsealed(topic, 0, replace(sealed, name="../topic.json"))
    assert vals(log.read(topic, 0)) == [b"v0", b"v1"]


def test_abort_unsealed_by_prefix(log: FileLog, topic: str) -> None:
    log.create_topic("u", 1)
    keep_sealed = log.write_segment(topic, 0, recs(1), writer_id="batch-7/0_0/a0")
    log.seal(topic, 0, keep_sealed, seal_id="batch-7/0_0")
    doomed = [
        log.write_segment(topic, 0, recs(1), writer_id="batch-7/0_0/a1"),
        log.write_segment(topic, 1, recs(1), writer_id="batch-7/1_1/a0"),
        log.write_segment("u", 0, recs(1), writer_id="batch-7/2_0/a0"),
    ]
    survivors = [
        log.write_segment(topic, 0, recs(1), writer_id="batch-70/0_0/a0"),
        log.write_segment(topic, 1, recs(1), writer_id="batch-8/0_0/a0"),
    ]
    seg_dir = Path(log.root) / topic / "0" / "segments"
    stale_tmp = seg_dir / f".tmp-{'a' * 32}-{doomed[0].name}"
    stale_tmp.write_bytes(b"partial")
    assert log.abort_unsealed_by_prefix("batch-7/", topics=["u"]) == 1
    assert log.abort_unsealed_by_prefix("batch-7/") == 2
    assert not stale_tmp.exists()
    remaining = log.list_unsealed(topic, 0) + log.list_unsealed(topic, 1)
    assert sorted(r.name for r in remaining) == sorted(r.name for r in survivors)
    assert vals(log.read(topic, 0)) == [b"v0"]


# -- truncation ------------------------------------------------------------------------------


def test_truncate_before_drops_whole_segments_durably(log: FileLog, topic: str) -> None:
    for b in range(3):
        log.append(topic, 0, recs(10, f"{b}-"))  # [0,10) [10,20) [20,30)
    seg_dir = Path(log.root) / topic / "0" / "segments"
    assert len(list(seg_dir.iterdir())) == 3
    assert log.truncate_before(topic, 0, 5) == 0  # inside the first segment: nothing dropped
    assert log.truncate_before(topic, 0, 15) == 10
    assert log.begin_offset(topic, 0) == 10 and log.end_offset(topic, 0) == 30
    assert len(list(seg_dir.iterdir())) == 2
    assert vals(log.read(topic, 0, 10, 12)) == [b"1-0", b"1-1"]
    with pytest.raises(OffsetOutOfRangeError, match="truncated"):
        log.read(topic, 0, 9)
    assert log.truncate_before(topic, 0, 3) == 10  # below begin: no-op
    fresh = FileLog(log.root, grouped_manifests=False)
    assert (fresh.begin_offset(topic, 0), fresh.end_offset(topic, 0)) == (10, 30)
    assert log.truncate_before(topic, 0, 30) == 30
    assert list(log.read(topic, 0, 30)) == [] and list(seg_dir.iterdir()) == []
    assert log.append(topic, 0, recs(1)) == 30
    assert fresh.begin_offset(topic, 0) == 30 and fresh.end_offset(topic, 0) == 31
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_before(topic, 0, 32)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_before(topic, 0, -1)


def test_truncated_segments_are_removed_by_any_later_reader(log: FileLog, topic: str) -> None:
    """A truncating process that dies after its manifest entry leaves files behind; whoever
    applies the entry next deletes them, so they never show up as unsealed."""
    log.append(topic, 0, recs(3))
    log.append(topic, 0, recs(3))
    part = log._partition(topic, 0)
    plan = part.state.plan_truncation(3)
    from streamtide.log.manifest import truncate_entry

    rel = f"{topic}/0/manifest/{entry_name(part.state.next_entry)}"
    entry = truncate_entry(*plan, prev=part.state.last_hash)
    assert part.storage.create_exclusive(rel, entry)  # the "died here" point
    assert len(list((Path(log.root) / topic / "0" / "segments").iterdir())) == 2
    other = FileLog(log.root, grouped_manifests=False)
    assert other.begin_offset(topic, 0) == 3
    assert other.list_unsealed(topic, 0) == []
    assert len(list((Path(log.root) / topic / "0" / "segments").iterdir())) == 1


def test_reading_a_segment_truncated_under_the_reader(tmp_path: Path) -> None:
    reader, truncator = (
        FileLog(str(tmp_path), grouped_manifests=False),
        FileLog(str(tmp_path), grouped_manifests=False),
    )
    reader.create_topic("t", 1)
    reader.append("t", 0, recs(3))
    reader.append("t", 0, recs(3))
    lazy = reader.read("t", 0)  # planned while offset 0 is still there
    truncator.truncate_before("t", 0, 3)
    with pytest.raises(OffsetOutOfRangeError, match="truncated while being read"):
        list(lazy)


# -- checkpoints -----------------------------------------------------------------------------


def _replay(root: str, topic: str, partition: int) -> PartitionState:
    state = PartitionState()
    manifest = Path(root) / topic / str(partition) / "manifest"
    while (manifest / entry_name(state.next_entry)).exists():
        state.apply((manifest / entry_name(state.next_entry)).read_bytes(), "e")
    return state


def test_checkpoints_are_written_and_loaded(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path), checkpoint_every=4, grouped_manifests=False)
    log.create_topic("t", 1)
    for b in range(11):
        log.append("t", 0, recs(2, f"{b}-"))
    log.truncate_before("t", 0, 4)
    checkpoints = Path(tmp_path, "t", "0", "checkpoints")
    assert sorted(p.name for p in checkpoints.iterdir()) == [entry_name(8), entry_name(12)]
    fresh = FileLog(str(tmp_path), checkpoint_every=4, grouped_manifests=False)
    loaded = fresh._partition("t", 0).refresh()
    replayed = _replay(str(tmp_path), "t", 0)
    assert loaded.segments == replayed.segments and loaded.next_entry == replayed.next_entry == 12
    assert (loaded.begin_offset, loaded.end_offset) == (4, 22)
    assert vals(fresh.read("t", 0, 20)) == [b"10-0", b"10-1"]


def test_a_damaged_checkpoint_falls_back_to_an_older_one_or_the_entries(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path), checkpoint_every=3, grouped_manifests=False)
    log.create_topic("t", 1)
    for b in range(7):
        log.append("t", 0, recs(1, f"{b}-"))
    checkpoints = sorted(Path(tmp_path, "t", "0", "checkpoints").iterdir())
    checkpoints[-1].write_bytes(b"{garbage")
    assert vals(FileLog(str(tmp_path), grouped_manifests=False).read("t", 0)) == vals(
        log.read("t", 0)
    )
    for cp in checkpoints:
        cp.write_bytes(b"[]")
    assert FileLog(str(tmp_path), grouped_manifests=False).end_offset("t", 0) == 7


def test_remove_stale_temp_files(log: FileLog, topic: str) -> None:
    seg_dir = Path(log.root) / topic / "0" / "segments"
    old = seg_dir / f".tmp-{'b' * 32}-w+{'c' * 32}.arrow"
    old.write_bytes(b"partial")
    past = time.time() - 7200
    os.utime(old, (past, past))
    fresh = seg_dir / f".tmp-{'d' * 32}-w+{'e' * 32}.arrow"
    fresh.write_bytes(b"in progress")
    assert log.remove_stale_temp_files(3600) == 1
    assert not old.exists() and fresh.exists()
