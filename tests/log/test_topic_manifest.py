"""The grouped manifest layout of the file log (``log.file_topic_manifest``): a stage's seals
of a topic in one group file, read back by other handles, raced, truncated, checkpointed and
checked; and topics of the per-partition layout of earlier releases still read and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamtide.errors import CorruptLogError, UnsupportedVersionError
from streamtide.log import FileLog, LogRecord, SegmentRef
from streamtide.log.manifest import PartitionState, entry_name


def recs(n: int, tag: str = "r") -> list[LogRecord]:
    return [LogRecord(b"k", f"{tag}{i}".encode(), i) for i in range(n)]


def groups(root: str, topic: str) -> list[Path]:
    return sorted(Path(root, topic, "manifest").glob("*.json"))


def stage_seals(
    log: FileLog, topic: str, partitions: int, tag: str
) -> list[tuple[SegmentRef, str]]:
    """One shared file holding a slice per partition, each to seal with its own seal id."""
    refs = log.write_segments(
        [(topic, p, recs(p + 1, tag), f"w-{tag}") for p in range(partitions)], writer_id=tag
    )
    return [(ref, f"{tag}/{ref.partition}") for ref in refs]


def test_a_stage_seals_each_topic_with_one_group(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path / "data"))
    log.create_topic("a", 16)
    log.create_topic("b", 4)
    seals = stage_seals(log, "a", 16, "s1") + stage_seals(log, "b", 4, "s1b")
    assert log.seal_many(seals) == [0] * 20
    assert len(groups(log.root, "a")) == 1 and len(groups(log.root, "b")) == 1
    again = stage_seals(log, "a", 16, "s2")
    assert log.seal_many(again) == [p + 1 for p in range(16)]
    assert log.seal_many(again) == [p + 1 for p in range(16)]  # idempotent by seal id
    assert len(groups(log.root, "a")) == 2
    other = FileLog(log.root)
    for p in range(16):
        assert other.end_offset("a", p) == 2 * (p + 1)
        values = [r.value for r in other.read("a", p)]
        assert values == [f"s1{i}".encode() for i in range(p + 1)] + [
            f"s2{i}".encode() for i in range(p + 1)
        ]
    assert [r.value for r in other.read("b", 3)] == [f"s1b{i}".encode() for i in range(4)]
    log.close()
    other.close()


def test_a_writer_that_lost_the_group_number_plans_again(tmp_path: Path) -> None:
    first = FileLog(str(tmp_path / "data"))
    first.create_topic("t", 4)
    second = FileLog(first.root)
    assert second.end_offset("t", 2) == 0  # its view of the topic, before the other writes
    first.append("t", 2, recs(3))  # group 0, which the second handle has not seen
    seals = stage_seals(second, "t", 4, "x")
    assert second.seal_many(seals) == [0, 0, 3, 0]
    assert [r.value for r in first.read("t", 2)] == [b"r0", b"r1", b"r2", b"x0", b"x1", b"x2"]
    with pytest.raises(Exception, match="already sealed"):
        first.seal_many([(seals[1][0], "another-id")])
    first.close()
    second.close()


def test_truncation_drops_segments_and_dead_shared_files(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path / "data"))
    log.create_topic("t", 2)
    log.seal_many(stage_seals(log, "t", 2, "a"))
    log.seal_many(stage_seals(log, "t", 2, "b"))
    own = log.write_segment("t", 0, recs(2), writer_id="solo")
    log.seal("t", 0, own, seal_id="solo")
    shared_before = sorted(Path(log.root, ".shared").glob("*.arrow"))
    assert len(shared_before) == 2
    assert log.truncate_before("t", 0, 1) == 1  # partition 0's slice of the first file
    assert len(list(Path(log.root, ".shared").glob("*.arrow"))) == 2  # partition 1 holds both
    assert log.truncate_before("t", 1, 4) == 4
    assert sorted(Path(log.root, ".shared").glob("*.arrow")) == shared_before[1:]
    assert log.truncate_before("t", 0, 3) == 2  # the second file's last slice goes
    assert sorted(Path(log.root, ".shared").glob("*.arrow")) == []
    assert len(list(Path(log.root, "t", "0", "segments").glob("*.arrow"))) == 1
    assert log.truncate_before("t", 0, 4) == 4
    assert list(Path(log.root, "t", "0", "segments").glob("*.arrow")) == []
    other = FileLog(log.root)
    assert other.begin_offset("t", 0) == 4 and other.end_offset("t", 0) == 4
    assert other.begin_offset("t", 1) == 4 and list(other.read("t", 1, 4)) == []
    log.close()
    other.close()


def test_opening_reads_the_newest_topic_checkpoint(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path / "data"), checkpoint_every=2)
    log.create_topic("t", 3)
    for n in range(5):
        log.append("t", n % 3, recs(2, f"n{n}"))
    checkpoints = sorted(Path(log.root, "t", "checkpoints").glob("*.json"))
    assert [c.name for c in checkpoints] == [entry_name(2), entry_name(4)]
    Path(groups(log.root, "t")[0]).write_bytes(b"damaged, but covered by the checkpoint")
    other = FileLog(log.root, checkpoint_every=2)
    assert [other.end_offset("t", p) for p in range(3)] == [4, 4, 2]
    assert [r.value for r in other.read("t", 0)] == [b"n00", b"n01", b"n30", b"n31"]
    log.close()
    other.close()


def test_a_missing_or_replaced_group_is_corruption(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path / "data"))
    log.create_topic("t", 1)
    for n in range(3):
        log.append("t", 0, recs(1, f"n{n}"))
    log.close()
    files = groups(log.root, "t")
    saved = files[1].read_bytes()
    files[1].unlink()
    with pytest.raises(CorruptLogError, match="has a gap"):
        FileLog(log.root).end_offset("t", 0)
    replaced = json.loads(saved)
    replaced["prev"] = "0" * 32
    files[1].write_text(json.dumps(replaced))
    with pytest.raises(CorruptLogError, match="does not follow"):
        FileLog(log.root).end_offset("t", 0)
    files[1].write_bytes(saved)
    assert FileLog(log.root).end_offset("t", 0) == 3


def test_a_group_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    log = FileLog(str(tmp_path / "data"))
    log.create_topic("t", 1)
    log.append("t", 0, recs(1))
    log.close()
    path = groups(log.root, "t")[0]
    group = json.loads(path.read_bytes())
    path.write_text(json.dumps({**group, "v": 99}))
    with pytest.raises(UnsupportedVersionError, match="format version 99"):
        FileLog(log.root).end_offset("t", 0)


def test_an_earlier_release_refuses_a_grouped_topic(tmp_path: Path) -> None:
    """Each partition's own manifest starts with an entry of a version that releases
    reading only per-partition manifests refuse, instead of taking the topic for empty."""
    log = FileLog(str(tmp_path / "data"))
    log.create_topic("t", 2)
    log.append("t", 1, recs(1))
    marker = Path(log.root, "t", "1", "manifest", entry_name(0)).read_bytes()
    with pytest.raises(UnsupportedVersionError):
        PartitionState().apply(marker, "entry 0")
    log.close()


def test_topics_of_the_per_partition_layout_still_read_and_seal(tmp_path: Path) -> None:
    """A log written by an earlier release (a manifest entry file per partition and entry,
    seals through the seal journal) reads unchanged, keeps its layout when written to, and
    mixes with grouped topics in one group seal."""
    old = FileLog(str(tmp_path / "data"), grouped_manifests=False)
    old.create_topic("legacy", 3)
    old.append("legacy", 0, recs(2, "old"))
    old.seal_many(stage_seals(old, "legacy", 3, "o"))
    old.close()
    meta = json.loads(Path(old.root, "legacy", "topic.json").read_text())
    assert "manifest" not in meta
    assert Path(old.root, "legacy", "0", "manifest", entry_name(1)).exists()

    log = FileLog(old.root)
    assert [r.value for r in log.read("legacy", 0)] == [b"old0", b"old1", b"o0"]
    log.create_topic("fresh", 3)
    seals = stage_seals(log, "legacy", 3, "m") + stage_seals(log, "fresh", 3, "f")
    assert log.seal_many(seals) == [3, 2, 3, 0, 0, 0]
    assert log.seal_many(seals) == [3, 2, 3, 0, 0, 0]
    assert Path(log.root, "legacy", "0", "manifest", entry_name(2)).exists()
    assert not Path(log.root, "legacy", "manifest").exists()
    assert len(groups(log.root, "fresh")) == 1
    log.sync_seals()
    log.close()
    again = FileLog(old.root)
    assert [again.end_offset("legacy", p) for p in range(3)] == [4, 4, 6]
    assert [r.value for r in again.read("legacy", 1)] == [b"o0", b"o1", b"m0", b"m1"]
    assert [again.end_offset("fresh", p) for p in range(3)] == [1, 2, 3]
    again.close()
