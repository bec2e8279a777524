"""Shared segment files: many partitions' unsealed segments in one file, sealed by slice.

Old per-partition segments still read next to slices; a shared file is deleted once no
partition holds a slice of it (after truncations, aborts, or as an orphan), never before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streamtide.errors import CorruptLogError
from streamtide.log import (
    FileLog,
    LogRecord,
    SealConflictError,
    SegmentError,
    SegmentRef,
)
from streamtide.log.manifest import entry_name
from streamtide.log.shared_segments import SHARED_DIR, parse_slice


def recs(n: int, prefix: str) -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), i) for i in range(n)]


def vals(log: FileLog, topic: str, partition: int, start: int = 0) -> list[bytes]:
    return [r.value for r in log.read(topic, partition, start)]


def shared_files(log: FileLog) -> list[str]:
    path = Path(log.root) / SHARED_DIR
    return (
        sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
        if path.exists()
        else []
    )


@pytest.fixture
def topics(log: FileLog) -> FileLog:
    log.create_topic("out", 2)
    log.create_topic("cl", 2)
    return log


def write_unit(log: FileLog, tag: str, writer: str = "app/b1/s0/unit/x") -> list[SegmentRef]:
    """One shared file: out/0, cl/0, out/1 (3, 2 and 1 records)."""
    return log.write_segments(
        [
            ("out", 0, recs(3, f"{tag}o"), f"{writer}/0_0"),
            ("cl", 0, recs(2, f"{tag}c"), f"{writer}/0_0"),
            ("out", 1, recs(1, f"{tag}p"), f"{writer}/0_1"),
        ],
        writer_id=writer,
    )


def seal_all(log: FileLog, refs: list[SegmentRef], seal: str) -> list[int]:
    return [log.seal(r.topic, r.partition, r, seal_id=f"{seal}/{r.writer_id}") for r in refs]


def test_slices_of_one_file_seal_and_read_in_their_partitions(topics: FileLog) -> None:
    log = topics
    refs = write_unit(log, "a")
    assert len(shared_files(log)) == 1
    assert [(r.topic, r.partition, r.record_count) for r in refs] == [
        ("out", 0, 3),
        ("cl", 0, 2),
        ("out", 1, 1),
    ]
    assert {parse_slice(r.name)[0] for r in refs} == set(shared_files(log))  # type: ignore[index]
    assert log.end_offset("out", 0) == 0  # unsealed: invisible
    assert log.read_segment(refs[1]).column("value").to_pylist() == [b"ac0", b"ac1"]
    assert seal_all(log, refs, "s") == [0, 0, 0]
    assert seal_all(log, refs, "s") == [0, 0, 0]  # idempotent by seal id
    assert vals(log, "out", 0) == [b"ao0", b"ao1", b"ao2"]
    assert vals(log, "cl", 0) == [b"ac0", b"ac1"]
    assert vals(log, "out", 1) == [b"ap0"]
    assert log.read_table("out", 0, 1, 3).column("offset").to_pylist() == [1, 2]
    with pytest.raises(SealConflictError):
        log.seal("out", 0, refs[0], seal_id="another")


def test_a_slice_seals_only_into_its_own_partition(topics: FileLog) -> None:
    log = topics
    refs = write_unit(log, "a")
    wrong = SegmentRef("out", 1, refs[0].name, refs[0].writer_id, 3)
    with pytest.raises(SegmentError, match="belongs to out/0"):
        topics.seal("out", 1, wrong, seal_id="x")
    with pytest.raises(SegmentError, match="holds 3 records"):
        topics.seal("out", 0, SegmentRef("out", 0, refs[0].name, "w", 4), seal_id="y")


def test_per_partition_segments_and_slices_read_together_and_after_reopening(
    tmp_path: Path,
) -> None:
    root = str(tmp_path / "data")
    log = FileLog(root, checkpoint_every=2)
    log.create_topic("out", 2)
    log.create_topic("cl", 2)
    log.append("out", 0, recs(2, "old"))  # a partition's own segments, as before
    own = log.write_segment("out", 0, recs(1, "own"), writer_id="w")
    log.seal("out", 0, own, seal_id="own")
    seal_all(log, write_unit(log, "a"), "a")
    log.append("out", 0, recs(1, "late"))
    seal_all(log, write_unit(log, "b", "app/b2/s0/unit/y"), "b")
    expected = [b"old0", b"old1", b"own0", b"ao0", b"ao1", b"ao2", b"late0"]
    expected += [b"bo0", b"bo1", b"bo2"]
    assert vals(log, "out", 0) == expected
    log.close()
    reopened = FileLog(root, checkpoint_every=2)  # from a checkpoint plus entries
    assert vals(reopened, "out", 0) == expected
    assert vals(reopened, "cl", 0) == [b"ac0", b"ac1", b"bc0", b"bc1"]
    reopened.close()


def test_entries_that_seal_no_slice_keep_the_old_format_version(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path / "old"), grouped_manifests=False)  # the per-partition layout
    log.create_topic("out", 2)
    log.create_topic("cl", 2)
    log.append("out", 0, recs(1, "old"))
    seal_all(log, write_unit(log, "a"), "a")
    entries = Path(log.root) / "out" / "0" / "manifest"
    versions = [json.loads((entries / entry_name(n)).read_bytes())["v"] for n in range(2)]
    assert versions == [2, 3]


def test_the_file_stays_until_no_partition_holds_a_slice_of_it(topics: FileLog) -> None:
    log = topics
    refs = write_unit(log, "a")
    seal_all(log, refs, "a")
    later = write_unit(log, "b", "app/b2/s0/unit/y")
    seal_all(log, later, "b")
    first, second = (parse_slice(r[0].name)[0] for r in (refs, later))  # type: ignore[index]
    assert log.truncate_before("cl", 0, 2) == 2  # drops cl/0's slice of the first file
    assert first in shared_files(log)  # out/0 and out/1 still hold theirs
    assert vals(log, "out", 0) == [b"ao0", b"ao1", b"ao2", b"bo0", b"bo1", b"bo2"]
    log.truncate_before("out", 0, 3)
    assert first in shared_files(log)  # out/1 still does
    assert vals(log, "out", 1) == [b"ap0", b"bp0"]
    log.truncate_before("out", 1, 1)
    assert shared_files(log) == [second]  # no slice left: deleted
    assert vals(log, "out", 0, 3) == [b"bo0", b"bo1", b"bo2"]
    assert vals(log, "cl", 0, 2) == [b"bc0", b"bc1"]


def test_a_truncation_deletes_a_file_whose_other_slices_never_won(topics: FileLog) -> None:
    log = topics
    refs = write_unit(log, "a")
    log.seal("out", 0, refs[0], seal_id="only")  # the others lost (another attempt won)
    log.truncate_before("out", 0, 3)
    assert shared_files(log) == []


def test_a_truncation_in_another_handle_is_seen_by_the_last_one(tmp_path: Path) -> None:
    root = str(tmp_path / "data")
    one, two = FileLog(root), FileLog(root)
    one.create_topic("out", 2)
    one.create_topic("cl", 2)
    refs = write_unit(one, "a")
    seal_all(one, refs, "a")
    two.truncate_before("out", 1, 1)  # another process: out/0 and cl/0 still hold theirs
    one.truncate_before("cl", 0, 2)
    assert len(shared_files(one)) == 1
    two.truncate_before("out", 0, 3)  # the last: sees the others' truncations
    assert shared_files(one) == []
    one.close()
    two.close()


def test_aborts_delete_a_file_only_if_none_of_its_slices_is_sealed(topics: FileLog) -> None:
    log = topics
    lost = write_unit(log, "a", "app/b1/s0/unit/lost")
    won = write_unit(log, "b", "app/b1/s0/unit/won")
    log.seal("out", 0, won[0], seal_id="won")
    for ref in lost:
        log.abort_unsealed(ref.topic, ref.partition, ref)  # a slice goes with its file
    with pytest.raises(SegmentError, match="cannot be aborted"):
        log.abort_unsealed("out", 0, won[0])
    assert len(shared_files(log)) == 2
    assert log.list_unsealed_shared() == [parse_slice(lost[0].name)[0]]  # type: ignore[index]
    assert log.abort_unsealed_by_prefix("app/b1/s0/", topics=["out"]) == 0  # cl too
    assert log.abort_unsealed_by_prefix("app/b1/s0/") == 3  # the lost file's slices
    assert shared_files(log) == [parse_slice(won[0].name)[0]]  # type: ignore[index]
    assert vals(log, "out", 0) == [b"bo0", b"bo1", b"bo2"]
    decided = write_unit(log, "c", "app/b3/s0/unit/z")
    assert log.abort_unsealed_shared(lambda writer: writer.startswith("app/b2/")) == 0
    assert log.abort_unsealed_shared(lambda writer: writer.startswith("app/b3/")) == 3
    assert parse_slice(decided[0].name)[0] not in shared_files(log)  # type: ignore[index]


def test_the_stale_sweep_removes_orphans_and_keeps_live_files(topics: FileLog) -> None:
    log = topics
    log.create_topic("gone", 1)
    orphan = log.write_segments([("gone", 0, recs(2, "g"), "w")], writer_id="app/b1/s0/unit/o")
    log.seal("gone", 0, orphan[0], seal_id="g")
    seal_all(log, write_unit(log, "a"), "a")
    young = write_unit(log, "b", "app/b2/s0/unit/young")
    log.delete_topic("gone")  # its slice went with it
    for name in shared_files(log):
        path = Path(log.root) / SHARED_DIR / name
        if "young" not in name:
            os.utime(path, (0, 0))
    assert log.remove_stale_temp_files(3600) == 1  # the orphan; sealed and young ones stay
    assert len(shared_files(log)) == 2
    assert vals(log, "out", 0) == [b"ao0", b"ao1", b"ao2"]
    assert log.read_segment(young[0]).num_rows == 3


def test_a_damaged_shared_file_is_never_read_as_records(topics: FileLog) -> None:
    log = topics
    refs = write_unit(log, "a")
    seal_all(log, refs, "a")
    path = Path(log.root) / SHARED_DIR / shared_files(log)[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = FileLog(log.root)  # a reader that has not verified the file yet
    with pytest.raises(CorruptLogError, match=r"checksum|unreadable"):
        list(fresh.read("out", 0))
    fresh.close()
    path.unlink()
    fresh = FileLog(log.root)
    with pytest.raises(CorruptLogError, match="missing"):
        list(fresh.read("out", 1))
    fresh.close()
