"""The application directory: exclusive records, epochs, and unreadable files named."""

from __future__ import annotations

import pytest

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.protocol import CommitRecord, OffsetsRecord
from streamtide.errors import CorruptRecordError, FencedError


def test_a_record_is_created_once_and_a_second_writer_adopts_it(tmp_path) -> None:
    first, second = AppDirectory(tmp_path, "app"), AppDirectory(tmp_path, "app")
    first.take_epoch()
    mine = first.create_offsets(OffsetsRecord(0, 0, first.epoch, {"0_0": {"t": (0, 5)}}))
    second.epoch = first.epoch  # (a writer of the same epoch, e.g. a retried call)
    theirs = second.create_offsets(OffsetsRecord(0, 0, second.epoch, {"0_0": {"t": (0, 9)}}))
    assert theirs == mine and first.read_offsets(0, 0) == mine


def test_a_newer_epoch_fences_every_write_of_the_older_driver(tmp_path) -> None:
    old, new = AppDirectory(tmp_path, "app"), AppDirectory(tmp_path, "app")
    assert (old.take_epoch(), new.take_epoch()) == (1, 2)
    with pytest.raises(FencedError, match=r"'app' took over \(epoch 2; this driver holds epoch 1"):
        old.create_commit(CommitRecord(0, 1, {}))
    with pytest.raises(FencedError):
        old.write_assignment(0, {}, {})
    new.create_commit(CommitRecord(0, 2, {}))
    assert old.last_committed().epoch == 2


def test_writing_without_an_epoch_is_refused(tmp_path) -> None:
    with pytest.raises(Exception, match="no epoch"):
        AppDirectory(tmp_path).create_commit(CommitRecord(0, 0, {}))


@pytest.mark.parametrize(
    "name", ["commit.json", "offsets-0.json", "prepare-0.json", "sealed-0.json"]
)
def test_a_truncated_record_is_reported_with_its_path(tmp_path, name) -> None:
    app_dir = AppDirectory(tmp_path, "app")
    app_dir.take_epoch()
    path = tmp_path / "batches" / f"{0:012d}" / name
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"v": 1, "kind": "co')
    read = {
        "commit.json": app_dir.last_committed,
        "offsets-0.json": lambda: app_dir.read_offsets(0, 0),
        "prepare-0.json": lambda: app_dir.read_prepare(0, 0),
        "sealed-0.json": lambda: app_dir.read_seal(0, 0),
    }[name]
    with pytest.raises(CorruptRecordError, match=str(path)):
        read()


def test_an_unreadable_assignment_record_is_reported_with_its_path(tmp_path) -> None:
    app_dir = AppDirectory(tmp_path, "app")
    path = tmp_path / "assignments" / f"{3:012d}.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{")
    with pytest.raises(CorruptRecordError, match=str(path)):
        app_dir.read_assignment(3)


def test_old_epoch_records_are_pruned_and_their_drivers_stay_fenced(tmp_path) -> None:
    first = AppDirectory(tmp_path, "app")
    first.take_epoch()
    for _ in range(12):
        AppDirectory(tmp_path, "app").take_epoch()
    assert first.epochs() == list(range(4, 14))
    with pytest.raises(FencedError, match="epoch 13; this driver holds epoch 1"):
        first.check_fence()
