"""Group seals: one durable seal journal record for many partitions' manifest entries.

The entries are created without fsyncs; a power loss may take them (gone, or left empty), and
whoever opens the partition next rebuilds them from the record. A power loss is simulated by
removing or emptying entries and giving the records another boot id, as a reboot would.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from streamtide.errors import CorruptLogError
from streamtide.log import FileLog, LogRecord, SealConflictError, SegmentError, SegmentRef
from streamtide.log.manifest import entry_name
from streamtide.log.partition import Partition
from streamtide.log.seal_journal import SEALS_DIR

TOPIC = "t"


def recs(n: int, prefix: str) -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), i) for i in range(n)]


def vals(log: FileLog, partition: int) -> list[bytes]:
    return [r.value for r in log.read(TOPIC, partition)]


def group(log: FileLog, partitions: int, tag: str, rounds: int = 2) -> list[tuple[SegmentRef, str]]:
    """Shared segments of every partition (``rounds`` per partition), with seal ids."""
    parts = [
        (TOPIC, p, recs(3, f"{tag}{r}p{p}-"), f"w-{tag}")
        for r in range(rounds)
        for p in range(partitions)
    ]
    refs = log.write_segments(parts, writer_id=f"w-{tag}")
    return [(ref, f"{tag}/{i}") for i, ref in enumerate(refs)]


def expected(partition: int, tags: list[str], rounds: int = 2) -> list[bytes]:
    return [
        f"{tag}{r}p{partition}-{i}".encode()
        for tag in tags
        for r in range(rounds)
        for i in range(3)
    ]


def records(root: str) -> list[Path]:
    return sorted(p for p in (Path(root) / SEALS_DIR).glob("*.json"))


def reboot(root: str) -> None:
    """The journal records as a boot before this one left them."""
    for path in records(root):
        seq = path.name.split("-", 1)[0]
        path.rename(path.with_name(f"{seq}-earlier-boot.json"))


def entry(root: str, partition: int, number: int) -> Path:
    return Path(root) / TOPIC / str(partition) / "manifest" / entry_name(number)


@pytest.fixture
def log(tmp_path: Path) -> FileLog:
    log = FileLog(str(tmp_path / "log"), grouped_manifests=False)
    log.create_topic(TOPIC, 4)
    return log


def test_seal_many_seals_every_partition_and_is_idempotent(log: FileLog) -> None:
    seals = group(log, 4, "a")
    bases = log.seal_many(seals)
    assert bases == [0, 0, 0, 0, 3, 3, 3, 3]
    assert log.seal_many(seals) == bases  # again: the same offsets, nothing sealed twice
    for p in range(4):
        assert vals(log, p) == expected(p, ["a"])
        assert log.end_offset(TOPIC, p) == 6
    assert len(records(log.root)) == 1  # one record for the whole group


def test_fsyncs_do_not_grow_with_partitions(tmp_path: Path, monkeypatch) -> None:
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    counts = {}
    for partitions in (2, 32):
        log = FileLog(str(tmp_path / f"log{partitions}"), grouped_manifests=False)
        log.create_topic(TOPIC, partitions)
        seals = group(log, partitions, "a")
        calls.clear()
        log.seal_many(seals)
        counts[partitions] = len(calls)
    assert counts[32] == counts[2] <= 2  # the journal record and its directory


def test_conflicts_raise_before_anything_is_sealed(log: FileLog) -> None:
    seals = group(log, 2, "a")
    log.seal_many(seals[:1])
    with pytest.raises(SealConflictError):
        log.seal_many([seals[1], (seals[0][0], "other-id")])
    assert log.end_offset(TOPIC, 1) == 0  # the group's first seal did not happen either
    wrong = SegmentRef(TOPIC, 1, seals[1][0].name, "w-a", 99)
    with pytest.raises(SegmentError, match="holds 3 records"):
        log.seal_many([(wrong, "x")])


def test_mixes_with_plain_seals_and_appends(log: FileLog) -> None:
    log.append(TOPIC, 0, recs(2, "old-"))  # a per-partition segment, durable entry
    log.seal_many(group(log, 4, "a"))
    log.append(TOPIC, 0, recs(1, "mid-"))
    log.seal_many(group(log, 4, "b"))
    reopened = FileLog(log.root, grouped_manifests=False)
    assert vals(reopened, 0) == [
        b"old-0",
        b"old-1",
        *expected(0, ["a"]),
        b"mid-0",
        *expected(0, ["b"]),
    ]


def test_power_loss_entries_lost_or_empty_are_rebuilt(log: FileLog) -> None:
    log.seal_many(group(log, 4, "a"))
    log.seal_many(group(log, 4, "b"))
    # entries 0-3 of each partition exist, none synced; the power loss takes some:
    entry(log.root, 0, 3).unlink()  # the tail
    entry(log.root, 1, 1).unlink()  # a gap
    entry(log.root, 2, 2).write_bytes(b"")  # created, its contents never written back
    for n in range(4):
        entry(log.root, 3, n).unlink()  # everything
    reboot(log.root)
    after = FileLog(log.root, grouped_manifests=False)
    for p in range(4):
        assert vals(after, p) == expected(p, ["a", "b"])
        assert after.end_offset(TOPIC, p) == 12
    assert entry(log.root, 2, 2).stat().st_size > 0  # rewritten, durably


def test_an_empty_entry_is_repaired_without_a_reboot(log: FileLog) -> None:
    log.seal_many(group(log, 2, "a"))
    entry(log.root, 1, 1).write_bytes(b"")
    assert vals(FileLog(log.root, grouped_manifests=False), 1) == expected(1, ["a"])


def test_damage_no_record_claims_is_still_reported(log: FileLog) -> None:
    log.append(TOPIC, 0, recs(2, "x"))
    log.append(TOPIC, 0, recs(2, "y"))
    entry(log.root, 0, 1).write_bytes(b"")
    with pytest.raises(CorruptLogError):
        FileLog(log.root, grouped_manifests=False).end_offset(TOPIC, 0)


def test_crash_after_the_record_before_the_entries(log: FileLog, monkeypatch) -> None:
    """A writer dies after its journal record and one entry: readers see what was created;
    a reboot replays the rest; sealing again (a restarted driver) finishes it either way."""
    seals = group(log, 4, "a")
    real = Partition.create_entry
    made = []

    def dies_after_one(part: Partition, data: bytes, **kwargs: object) -> bool:
        if made:
            raise KeyboardInterrupt  # the process ends here
        made.append(part.where)
        return real(part, data, **kwargs)

    monkeypatch.setattr(Partition, "create_entry", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        log.seal_many(seals)
    monkeypatch.setattr(Partition, "create_entry", real)
    same_boot = FileLog(log.root, grouped_manifests=False)
    assert [same_boot.end_offset(TOPIC, p) for p in range(4)] == [3, 0, 0, 0]
    assert same_boot.seal_many(seals) == [0, 0, 0, 0, 3, 3, 3, 3]
    for p in range(4):
        assert vals(FileLog(log.root, grouped_manifests=False), p) == expected(p, ["a"])


def test_crash_then_power_loss_replays_the_record(log: FileLog, monkeypatch) -> None:
    seals = group(log, 4, "a")

    def dies(part: Partition, data: bytes, **kwargs: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(Partition, "create_entry", dies)
    with pytest.raises(KeyboardInterrupt):
        log.seal_many(seals)
    monkeypatch.undo()
    reboot(log.root)
    after = FileLog(log.root, grouped_manifests=False)
    for p in range(4):
        assert vals(after, p) == expected(p, ["a"])
    assert after.seal_many(seals) == [0, 0, 0, 0, 3, 3, 3, 3]  # the restart finds them sealed


def test_a_claim_that_lost_its_entry_to_an_append_is_not_replayed(log: FileLog) -> None:
    """A record claims entry 1 of partition 0; an append takes it first (this simulates
    the race: the group seal then seals the rest durably). After a reboot the stale claim
    does not chain to what the partition holds and is skipped."""
    log.append(TOPIC, 0, recs(1, "first-"))
    seals = group(log, 1, "a", rounds=1)
    real_create = Partition.create_entry
    raced = []

    def append_wins(part: Partition, data: bytes, **kwargs: object) -> bool:
        if not raced:
            raced.append(True)
            FileLog(log.root, grouped_manifests=False).append(TOPIC, 0, recs(1, "racer-"))
        return real_create(part, data, **kwargs)

    Partition.create_entry = append_wins  # type: ignore[method-assign]
    try:
        assert log.seal_many(seals) == [2]
    finally:
        Partition.create_entry = real_create  # type: ignore[method-assign]
    reboot(log.root)
    assert vals(FileLog(log.root, grouped_manifests=False), 0) == [
        b"first-0",
        b"racer-0",
        *expected(0, ["a"], 1),
    ]


def test_compaction_syncs_then_drops_records(log: FileLog) -> None:
    """A group seal that finds records due syncs the file system and deletes them; those
    of an earlier boot it replays first, also on partitions it never opened."""
    log.create_topic("other", 1)
    ref = log.write_segments([("other", 0, recs(2, "o-"), "w-o")], writer_id="w-o")[0]
    log.seal_many([(ref, "o/0")])
    log.seal_many(group(log, 4, "a"))
    reboot(log.root)  # two records of an earlier boot
    (Path(log.root) / "other" / "0" / "manifest" / entry_name(0)).unlink()
    entry(log.root, 3, 1).unlink()
    fresh = FileLog(log.root, grouped_manifests=False)
    fresh._journal.sync_interval_s = 0.0  # every group seal syncs (in the background)
    fresh.seal_many(group(fresh, 4, "c"))
    assert fresh._syncing is not None
    fresh._syncing.join()
    assert records(log.root) == []
    assert [r.value for r in FileLog(log.root, grouped_manifests=False).read("other", 0)] == [
        b"o-0",
        b"o-1",
    ]
    for p in range(4):
        assert vals(FileLog(log.root, grouped_manifests=False), p) == expected(p, ["a", "c"])


def test_a_handle_that_sealed_syncs_when_it_closes(log: FileLog) -> None:
    log.seal_many(group(log, 2, "a"))
    assert len(records(log.root)) == 1
    log.close()
    assert records(log.root) == []
    assert vals(FileLog(log.root, grouped_manifests=False), 1) == expected(1, ["a"])


def test_concurrent_group_seals_take_turns(tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    FileLog(root, grouped_manifests=False).create_topic(TOPIC, 2)
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        handle = FileLog(root, grouped_manifests=False)  # as another process would
        try:
            for k in range(5):
                handle.seal_many(group(handle, 2, f"{tag}{k}-", rounds=1))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in "xyz"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    reboot(root)
    for p in range(2):
        values = vals(FileLog(root, grouped_manifests=False), p)
        assert len(values) == 3 * 5 * 3 and len(set(values)) == len(values)


def test_claims_on_a_deleted_topic_never_reach_its_successor(log: FileLog) -> None:
    log.seal_many(group(log, 4, "a"))
    log.delete_topic(TOPIC)
    log.create_topic(TOPIC, 4)
    reboot(log.root)  # the record of the old topic's seals is still pending
    after = FileLog(log.root, grouped_manifests=False)
    assert [after.end_offset(TOPIC, p) for p in range(4)] == [0, 0, 0, 0]
    after.append(TOPIC, 0, recs(1, "new-"))
    assert vals(FileLog(log.root, grouped_manifests=False), 0) == [b"new-0"]


def test_a_reader_finding_an_entry_half_written_rebuilds_it(log: FileLog, monkeypatch) -> None:
    """Entries of a group seal are written in place: a reader that opens the partition
    between the entry's creation and its contents rebuilds it from the journal record,
    with the very bytes the writer then completes."""
    seals = group(log, 2, "a", rounds=1)
    seen: list[list[bytes]] = []

    def slow_create(self, rel: str, data: bytes) -> bool:
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL)  # as it does
        seen.append(
            vals(FileLog(log.root, grouped_manifests=False), int(rel.split("/")[1]))
        )  # nothing written yet
        os.write(fd, data)
        os.close(fd)
        return True

    monkeypatch.setattr(type(log._storage), "create_lazily", slow_create)
    assert log.seal_many(seals) == [0, 0]
    assert seen == [expected(0, ["a"], 1), expected(1, ["a"], 1)]
    for p in range(2):
        assert vals(FileLog(log.root, grouped_manifests=False), p) == expected(p, ["a"], 1)


def test_without_a_boot_id_every_record_is_replayed(log: FileLog, monkeypatch) -> None:
    import streamtide.log.seal_journal as seal_journal

    monkeypatch.setattr(seal_journal, "boot_id", lambda: "unknown")
    unknown = FileLog(log.root, grouped_manifests=False)
    unknown.seal_many(group(unknown, 2, "a"))
    entry(log.root, 1, 1).unlink()  # a power loss; the boot cannot be told apart
    assert vals(FileLog(log.root, grouped_manifests=False), 1) == expected(1, ["a"])


def test_a_seal_given_up_and_aborted_is_not_replayed(log: FileLog, monkeypatch) -> None:
    """The writer died after its record, before any entry; its shared file was aborted
    since. A power loss later: nothing of it comes back, and the partition reads."""
    seals = group(log, 2, "a", rounds=1)

    def dies(part: Partition, data: bytes, **kwargs: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(Partition, "create_entry", dies)
    with pytest.raises(KeyboardInterrupt):
        log.seal_many(seals)
    monkeypatch.undo()
    assert (
        FileLog(log.root, grouped_manifests=False).abort_unsealed_shared(
            lambda writer: writer == "w-a"
        )
        == 2
    )
    reboot(log.root)
    after = FileLog(log.root, grouped_manifests=False)
    assert [after.end_offset(TOPIC, p) for p in range(2)] == [0, 0]
    after.append(TOPIC, 0, recs(1, "x"))
    assert vals(FileLog(log.root, grouped_manifests=False), 0) == [b"x0"]


def test_a_lost_entry_whose_segment_a_truncation_deleted_is_rebuilt(log: FileLog) -> None:
    first = log.write_segment(TOPIC, 0, recs(3, "a"), writer_id="w")
    second = log.write_segment(TOPIC, 0, recs(2, "b"), writer_id="w")
    log.seal_many([(first, "s/0"), (second, "s/1")])
    assert log.truncate_before(TOPIC, 0, 3) == 3  # durable; deletes the first file
    entry(log.root, 0, 0).unlink()  # the power loss took the unsynced entry before it
    reboot(log.root)
    after = FileLog(log.root, grouped_manifests=False)
    assert after.begin_offset(TOPIC, 0) == 3
    assert [r.value for r in after.read(TOPIC, 0, 3)] == [b"b0", b"b1"]
