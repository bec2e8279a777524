"""TaskStores of an active task: checkpoints, restore, commits, bad checkpoints, snapshots."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from durable_support import APP, file_log, open_task, store_topology

from streamtide.errors import StoreError
from streamtide.log import LogRecord
from streamtide.runtime.committed import TaskCommittedState
from streamtide.serde import Serdes
from streamtide.state import Stores
from streamtide.state.checkpoint import checkpoint_path, read_checkpoint
from streamtide.state.rocksdb import RocksDBKeyValueBytesStore

CHANGELOG = f"{APP}-kv-changelog"


def _topology(kind: str = "rocksdb"):  # type: ignore[no-untyped-def]
    supplier = (
        Stores.persistent_key_value_store("kv")
        if kind == "rocksdb"
        else Stores.in_memory_key_value_store("kv")
    )
    return store_topology(Stores.key_value_store_builder(supplier, Serdes.string(), Serdes.int()))


def _write_batches(log, state_dir: Path, batches: list[dict[str, int | None]], **options):  # type: ignore[no-untyped-def]
    """Run one committed batch per dict (None deletes); return the final contents."""
    expected: dict[str, int] = {}
    for batch in batches:
        run = open_task(log, _topology(), state_dir, **options)
        for key, value in batch.items():
            run.store("kv").put(key, value)
            if value is None:
                expected.pop(key, None)
            else:
                expected[key] = value
        run.commit()
        run.close()
    return dict(sorted(expected.items()))


def _contents(run) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return dict(run.store("kv").all())


def _local(run) -> list[tuple[bytes, bytes]]:  # type: ignore[no-untyped-def]
    return list(run.stores.logged["kv"].inner.all())


BATCHES = [{"a": 1, "b": 2}, {"a": 3, "c": 4}, {"b": None, "d": 5}, {"e": 6}]


def test_a_restart_replays_nothing_after_a_confirmed_commit(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    run = open_task(log, _topology(), tmp_path / "state")
    assert _contents(run) == expected
    assert run.metrics.get("records-restored", 0) == 0
    assert read_checkpoint(tmp_path / "state" / APP / "0_0").offsets == {"kv": 7}  # type: ignore[union-attr]
    run.close()


def test_sent_writes_stay_out_of_rocksdb_until_confirmed(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    run = open_task(log, _topology(), tmp_path / "state")
    run.store("kv").put("a", 1)
    run.commit(confirm=False)  # sent and sealed, not yet known to be committed
    assert _local(run) == []
    assert run.store("kv").get("a") == 1
    run.close()  # the engine closes the stores at the end of every work unit
    run = open_task(log, _topology(), tmp_path / "state")
    assert run.metrics["records-restored"] == 1  # its own last batch, from the log
    assert _contents(run) == {"a": 1}
    run.store("kv").put("b", 2)
    run.commit()  # confirmed while still open: applied without reading the log
    assert _local(run) == [(b"a", Serdes.int().serialize(1)), (b"b", Serdes.int().serialize(2))]
    run.close()


def test_an_aborted_attempt_never_reaches_rocksdb(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    _write_batches(log, tmp_path / "state", [{"a": 1}])
    run = open_task(log, _topology(), tmp_path / "state")
    run.store("kv").put("a", 100)
    run.store("kv").put("zombie", 1)
    run.commit(seal=False, confirm=False)
    run.stores.abort()
    assert _contents(run) == {"a": 1}
    run.close()
    db = RocksDBKeyValueBytesStore("kv").open_standalone(tmp_path / "state" / APP / "0_0" / "kv")
    assert list(db.all()) == [(b"a", Serdes.int().serialize(1))]
    db.close()
    assert log.end_offset(CHANGELOG, 0) == 1


def _other_attempt_wins(tmp_path: Path, their_records: int):  # type: ignore[no-untyped-def]
    log = file_log(tmp_path / "log")
    run = open_task(log, _topology(), tmp_path / "state")
    run.store("kv").put("mine", 1)
    run.commit(seal=False, confirm=False)
    # a duplicate attempt of the same batch won the seal with different writes
    theirs = [LogRecord(b"t%d" % i, Serdes.int().serialize(i), 0) for i in range(their_records)]
    log.append(CHANGELOG, 0, theirs)
    return run, {f"t{i}": i for i in range(their_records)}


def test_when_another_attempt_wins_abort_adopts_its_writes(tmp_path: Path) -> None:
    run, theirs = _other_attempt_wins(tmp_path, 1)
    run.stores.abort()
    assert _contents(run) == theirs
    assert run.stores.local_offsets() == {"kv": 1}
    run.close()


def test_confirming_a_commit_the_log_does_not_match_follows_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run, theirs = _other_attempt_wins(tmp_path, 3)
    with caplog.at_level(logging.WARNING):
        run.stores.on_committed()
    assert "ends at 3, not at 1" in caplog.text
    assert _contents(run) == theirs
    run.close()


def test_a_crash_after_sending_unconfirmed_writes_leaves_committed_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES[:2])
    run = open_task(log, _topology(), tmp_path / "state")
    run.store("kv").put("a", 999)
    run.task.commit()  # sent, never sealed; the process "dies" here
    assert _local(run) == sorted(
        (k.encode(), Serdes.int().serialize(v)) for k, v in expected.items()
    )
    assert read_checkpoint(tmp_path / "state" / APP / "0_0").offsets == {"kv": 4}  # type: ignore[union-attr]
    run.task.stores.stores["kv"].close()
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "state")
    assert caplog.text == ""  # nothing to distrust, nothing rebuilt
    assert run.metrics.get("records-restored", 0) == 0
    assert _contents(run) == expected
    run.close()


def test_corrupt_checkpoint_leads_to_a_full_restore(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    path = checkpoint_path(tmp_path / "state" / APP / "0_0")
    path.write_text(path.read_text()[:-10])
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "checkpoint file is unusable" in caplog.text
    assert "from the beginning" in caplog.text
    assert _contents(run) == expected
    assert run.metrics["records-restored"] == 7
    run.close()


def test_tampered_checkpoint_fails_its_checksum(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    path = checkpoint_path(tmp_path / "state" / APP / "0_0")
    data = json.loads(path.read_text())
    data["body"] = data["body"].replace('"kv": 7', '"kv": 6')
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "checksum mismatch" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_missing_checkpoint_next_to_a_local_copy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    checkpoint_path(tmp_path / "state" / APP / "0_0").unlink()
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "no checkpoint file to vouch for its local copy" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_deleted_state_directory_leads_to_a_full_restore(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    shutil.rmtree(tmp_path / "state")
    with caplog.at_level(logging.INFO):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "local copy is missing" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_deleted_store_directory_with_checkpoint_left_behind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    shutil.rmtree(tmp_path / "state" / APP / "0_0" / "kv")
    with caplog.at_level(logging.INFO):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "local copy is missing" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_checkpoint_ahead_of_the_changelog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    _write_batches(log, tmp_path / "state", BATCHES)
    log.delete_topic(CHANGELOG)
    log.create_topic(CHANGELOG, 1)
    log.append(CHANGELOG, 0, [LogRecord(b"only", Serdes.int().serialize(1), 0)])
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "ahead of the changelog end 1" in caplog.text
    assert _contents(run) == {"only": 1}
    run.close()


def test_changelog_truncated_behind_the_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    _write_batches(log, tmp_path / "old", BATCHES[:1])  # this copy stops at offset 2
    more = [{f"k{i}": i, "a": i} for i in range(6)]
    expected = _write_batches(log, tmp_path / "new", BATCHES[:1] + more, snapshot_interval=3)
    assert log.begin_offset(CHANGELOG, 0) > 2
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "old")
    assert "changelog was truncated" in caplog.text
    assert "from the snapshot at offset" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_truncated_changelog_without_any_snapshot_is_an_error(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    _write_batches(log, tmp_path / "state", BATCHES)
    log.truncate_before(CHANGELOG, 0, 7)
    shutil.rmtree(tmp_path / "state")
    with pytest.raises(StoreError, match="no snapshot covers"):
        open_task(log, _topology(), tmp_path / "state")


def test_snapshots_bound_the_restore(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    batches = [{f"k{i % 4}": i} for i in range(10)]
    expected = _write_batches(log, tmp_path / "state", batches, snapshot_interval=4)
    snapshots = sorted((tmp_path / "log" / "_snapshots" / APP / "0_0" / "kv").iterdir())
    assert [p.name for p in snapshots] == [f"{4:020d}.tar", f"{8:020d}.tar"]
    assert log.begin_offset(CHANGELOG, 0) == 4  # truncated below the older kept snapshot only
    run = open_task(log, _topology(), tmp_path / "fresh")
    assert _contents(run) == expected
    assert run.metrics["records-restored"] == 2  # only the changelog after the snapshot
    run.close()


def test_an_unreadable_snapshot_falls_back_to_an_older_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    batches = [{f"k{i % 4}": i} for i in range(10)]
    options = {"snapshot_interval": 4, "truncate_changelog": False}
    expected = _write_batches(log, tmp_path / "state", batches, **options)
    newest = tmp_path / "log" / "_snapshots" / APP / "0_0" / "kv" / f"{8:020d}.tar"
    newest.write_bytes(newest.read_bytes()[:100])
    with caplog.at_level(logging.INFO):
        run = open_task(log, _topology(), tmp_path / "fresh", **options)
    assert "cannot load the snapshot of store 'kv' at offset 8" in caplog.text
    assert "from the snapshot at offset 4" in caplog.text
    assert _contents(run) == expected
    assert run.metrics["records-restored"] == 6
    run.close()


def test_a_damaged_newest_snapshot_is_survivable_after_changelog_truncation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    batches = [{f"k{i % 4}": i} for i in range(10)]
    expected = _write_batches(log, tmp_path / "state", batches, snapshot_interval=4)
    assert log.begin_offset(CHANGELOG, 0) > 0  # the changelog was truncated
    newest = tmp_path / "log" / "_snapshots" / APP / "0_0" / "kv" / f"{8:020d}.tar"
    newest.write_bytes(newest.read_bytes()[:100])
    with caplog.at_level(logging.INFO):
        run = open_task(log, _topology(), tmp_path / "fresh")
    assert "cannot load the snapshot of store 'kv' at offset 8" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_a_store_with_damaged_rocksdb_files_is_wiped_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = file_log(tmp_path / "log")
    expected = _write_batches(log, tmp_path / "state", BATCHES)
    (tmp_path / "state" / APP / "0_0" / "kv" / "CURRENT").write_text("garbage\n")
    with caplog.at_level(logging.WARNING):
        run = open_task(log, _topology(), tmp_path / "state")
    assert "local RocksDB files" in caplog.text and "are damaged" in caplog.text
    assert "rebuilding store 'kv' from the beginning of changelog" in caplog.text
    assert _contents(run) == expected
    run.close()


def test_in_memory_stores_restore_fully_on_every_open(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    for batch in BATCHES:
        run = open_task(log, _topology("in_memory"), tmp_path / "state")
        for key, value in batch.items():
            run.store("kv").put(key, value)
        run.commit()
        run.close()
    run = open_task(log, _topology("in_memory"), tmp_path / "state")
    assert _contents(run) == {"a": 3, "c": 4, "d": 5, "e": 6}
    assert run.metrics["records-restored"] == 7
    assert read_checkpoint(tmp_path / "state" / APP / "0_0").offsets == {}  # type: ignore[union-attr]
    run.close()


def test_checkpoint_carries_the_committed_metadata(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    run = open_task(log, _topology(), tmp_path / "state")
    run.store("kv").put("a", 1)
    state = run.task.commit()
    run.collector.seal()
    committed = TaskCommittedState({"in:0": 42}, 1234, {"p/0/stream_time/10": 2000})
    run.stores.on_committed(committed, batch=17)
    run.close()
    checkpoint = read_checkpoint(tmp_path / "state" / APP / "0_0")
    assert checkpoint is not None and checkpoint.batch == 17 and checkpoint.commits == 1
    assert TaskCommittedState.from_dict(checkpoint.committed) == committed != state
    run = open_task(log, _topology(), tmp_path / "state")
    assert run.stores.checkpointed_state == committed
    assert run.stores.local_offsets() == {"kv": 1}
    run.close()


def test_changelog_topic_gets_one_partition_per_task(tmp_path: Path) -> None:
    log = file_log(tmp_path / "log")
    log.create_topic("in", 3)
    run = open_task(log, _topology(), tmp_path / "state", partition=2)
    run.store("kv").put("x", 1)
    run.commit()
    run.close()
    assert log.partitions(CHANGELOG) == 3
    assert [r.key for r in log.read(CHANGELOG, 2)] == [b"x"]
