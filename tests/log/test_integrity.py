"""Damaged log data is detected, never read as records: segment checksums, the manifest's
hash chain and its head."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streamtide.errors import CorruptLogError
from streamtide.log import FileLog, LogRecord
from streamtide.log.manifest import entry_name

#: The ``log`` fixture's topics have the per-partition manifest layout (topics of earlier
#: releases), whose entry files these tests check; grouped topics: ``test_topic_manifest.py``.
PER_PARTITION_LAYOUT = True


def recs(n: int, prefix: str = "v") -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), 1000 + i) for i in range(n)]


def manifest(log: FileLog, partition: int = 0) -> Path:
    return Path(log.root) / "t" / str(partition) / "manifest"


def segment_of(log: FileLog, entry: int) -> Path:
    data = json.loads((manifest(log) / entry_name(entry)).read_bytes())
    return Path(log.root) / "t" / "0" / "segments" / data["segment"]


@pytest.fixture
def filled(log: FileLog) -> FileLog:
    log.create_topic("t", 1)
    for i in range(3):
        log.append("t", 0, recs(4, prefix=f"b{i}-"))
    return log


def test_seal_entries_record_a_checksum_and_chain_to_the_entry_before(filled: FileLog) -> None:
    entries = [json.loads((manifest(filled) / entry_name(n)).read_bytes()) for n in range(3)]
    assert all(isinstance(e["crc32"], int) for e in entries)
    assert entries[0]["prev"] == "" and entries[1]["prev"] != entries[2]["prev"]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_segment_is_reported_never_read(filled: FileLog, damage: str) -> None:
    path = segment_of(filled, 1)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 3] ^= 0x10
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    fresh = FileLog(filled.root, grouped_manifests=False)
    assert [r.value for r in fresh.read("t", 0, 0, 4)][-1] == b"b0-3"  # intact segment
    for read in (lambda: list(fresh.read("t", 0, 4, 8)), lambda: fresh.read_table("t", 0)):
        with pytest.raises(CorruptLogError) as info:
            read()
        assert "topic partition t/0" in str(info.value) and path.name in str(info.value)


def test_a_lost_newest_manifest_entry_is_detected(filled: FileLog) -> None:
    (manifest(filled) / entry_name(2)).unlink()
    with pytest.raises(CorruptLogError, match=r"t/0 is truncated: entry .*02\.json is missing"):
        FileLog(filled.root, grouped_manifests=False).end_offset("t", 0)


def test_a_gap_in_the_manifest_is_detected(filled: FileLog) -> None:
    (manifest(filled) / entry_name(1)).unlink()
    with pytest.raises(CorruptLogError, match=r"t/0 has a gap: entry .*01\.json is missing"):
        FileLog(filled.root, grouped_manifests=False).end_offset("t", 0)


def test_a_replaced_manifest_entry_breaks_the_chain(filled: FileLog) -> None:
    path = manifest(filled) / entry_name(1)
    entry = json.loads(path.read_bytes())
    entry["sealed_ms"] += 1  # any change to an entry changes its hash
    path.write_text(json.dumps(entry))
    where = re.escape(f"{manifest(filled) / entry_name(2)} does not follow the entry before it")
    with pytest.raises(CorruptLogError, match=where):
        FileLog(filled.root, grouped_manifests=False).end_offset("t", 0)


def test_chain_and_checksums_survive_manifest_checkpoints(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path), checkpoint_every=2, grouped_manifests=False)
    log.create_topic("t", 1)
    for i in range(5):
        log.append("t", 0, recs(2, prefix=f"b{i}-"))
    path = segment_of(log, 4)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    fresh = FileLog(
        str(tmp_path), checkpoint_every=2, grouped_manifests=False
    )  # opens from a checkpoint
    assert fresh.end_offset("t", 0) == 10
    fresh.append("t", 0, recs(1))  # chains onto the entry the checkpoint ends with
    with pytest.raises(CorruptLogError, match="fails its checksum"):
        list(fresh.read("t", 0, 8, 10))
    assert FileLog(str(tmp_path), grouped_manifests=False).end_offset("t", 0) == 11


def test_manifests_written_before_checksums_are_still_read(log: FileLog) -> None:
    log.create_topic("t", 1)
    log.append("t", 0, recs(3))
    entry_path = manifest(log) / entry_name(0)
    entry = json.loads(entry_path.read_bytes())
    for key in ("crc32", "prev"):
        del entry[key]
    entry["v"] = 1
    entry_path.write_text(json.dumps(entry))
    (Path(log.root) / "t" / "0" / "head.json").unlink()
    old = FileLog(log.root, grouped_manifests=False)
    assert [r.value for r in old.read("t", 0)] == [b"v0", b"v1", b"v2"]
    old.append("t", 0, recs(2, prefix="w"))  # continues the manifest with a chained entry
    assert FileLog(log.root, grouped_manifests=False).end_offset("t", 0) == 5


def test_a_missing_sealed_segment_file_is_reported(filled: FileLog) -> None:
    path = segment_of(filled, 2)
    path.unlink()
    where = re.escape(f"t/0/segments/{path.name} of topic partition t/0")
    with pytest.raises(CorruptLogError, match=where):
        list(FileLog(filled.root, grouped_manifests=False).read("t", 0, 8, 12))


def test_unreadable_topic_metadata_is_reported_with_its_path(filled: FileLog) -> None:
    meta = Path(filled.root) / "t" / "topic.json"
    meta.write_text('{"partitions": ')
    with pytest.raises(CorruptLogError, match=re.escape(str(meta))):
        FileLog(filled.root, grouped_manifests=False).partitions("t")
