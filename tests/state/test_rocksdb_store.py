"""What only the RocksDB store has: files, the one-process lock, checkpoints, task layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import streamtide.state.rocksdb as rocksdb_module
from streamtide import Consumed, Materialized, Processor, Serdes, StreamsBuilder, StreamsConfig
from streamtide.dsl.params import DEFAULT_STORE_TYPE
from streamtide.errors import StoreDamagedError, StoreError
from streamtide.processor.topology import Topology
from streamtide.record import Record
from streamtide.state import RocksDBKeyValueBytesStore, Stores
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.testing import TopologyTestDriver


def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert store.created_fresh
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    store.close()
    again = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert not again.created_fresh
    assert list(again.all()) == [(b"a", b"1"), (b"b", b"2")]
    again.close()


def test_a_second_open_in_this_process_fails_clearly(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    try:
        with pytest.raises(StoreError, match="one process"):
            RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    finally:
        store.close()
    RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db").close()  # lock released


def test_a_database_with_damaged_files_is_wiped_and_opens_empty(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all([(b"a", b"1")])
    store.close()
    (tmp_path / "db" / "CURRENT").write_text("garbage\n")
    again = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert again.created_fresh and "are damaged" in (again.wiped_reason or "")
    assert list(again.all()) == []
    again.close()


def damage_data_blocks(directory: Path) -> int:
    """Overwrite the start of every SST file: its first data block, which opening the
    database does not read (it reads the index and metadata at the end of the file)."""
    files = sorted(directory.glob("*.sst"))
    for sst in files:
        with open(sst, "r+b") as f:
            f.write(b"\xff" * 16)
    return len(files)


def test_damage_first_seen_on_a_read_fails_the_read_and_wipes_the_files_at_close(
    tmp_path: Path,
) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all([(b"k%03d" % i, b"v" * 20) for i in range(50)])
    store.close()
    RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db").close()  # to an SST file
    assert damage_data_blocks(tmp_path / "db") > 0
    damaged = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert damaged.wiped_reason is None  # opening did not notice
    with pytest.raises(StoreDamagedError, match="'s': reading its local RocksDB files"):
        damaged.get(b"k001")
    with pytest.raises(StoreDamagedError):  # a scan never ends early as if the data ended
        list(damaged.range(b"k000", b"k049"))
    with pytest.raises(StoreDamagedError):
        list(damaged.range(None, None, reverse=True))
    damaged.close()
    again = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert again.created_fresh and list(again.all()) == []
    again.close()


def test_another_process_cannot_open_an_open_database(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all([(b"kept", b"1")])
    code = (
        "import sys; from streamtide.state import RocksDBKeyValueBytesStore as R\n"
        "from streamtide.state import rocksdb\n"
        "from streamtide.errors import StoreError\n"
        "rocksdb.LOCK_WAIT_S = 0.5\n"
        "try:\n    R('s').open_standalone(sys.argv[1])\nexcept StoreError:\n    sys.exit(3)\n"
    )
    try:
        result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "db")], timeout=60)
        assert result.returncode == 3
        assert list(store.all()) == [(b"kept", b"1")]  # held, so never taken for damaged
    finally:
        store.close()


def test_opening_waits_for_another_process_to_hand_the_database_over(tmp_path: Path) -> None:
    code = (
        "import sys, time; from streamtide.state import RocksDBKeyValueBytesStore as R\n"
        "s = R('s').open_standalone(sys.argv[1]); s.put_all([(b'k', b'v')])\n"
        "print('open', flush=True); time.sleep(1.0); s.close()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "db")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
        assert list(store.all()) == [(b"k", b"v")] and store.wiped_reason is None
        store.close()
    finally:
        holder.wait(timeout=60)


def test_unfinished_iterators_do_not_keep_the_database_locked(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all([(bytes([i]), b"v") for i in range(10)])
    started = store.range(None, None)
    next(started)
    never_started = store.prefix_scan(b"")
    store.clear()  # reopens: must not trip over its own lock
    store.put(b"x", b"1")
    kept = store.range(None, None, reverse=True)
    next(kept)
    store.close()
    again = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert list(again.all()) == [(b"x", b"1")]
    assert list(started) == list(never_started) == list(kept) == []
    again.close()


def test_put_all_writes_in_several_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocksdb_module, "WRITE_BATCH_SIZE", 7)
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all(
        [(b"%03d" % i, b"v") for i in range(50)] + [(b"%03d" % i, None) for i in range(0, 50, 2)]
    )
    assert [k for k, _ in store.all()] == [b"%03d" % i for i in range(1, 50, 2)]
    store.close()


def test_unbounded_delete_range_removes_the_last_key(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"\xff\xff", b"3")])
    store.delete_range(b"b", None)
    assert list(store.all()) == [(b"a", b"1")]
    store.delete_range(None, None)
    assert list(store.all()) == []
    store.close()


def test_clear_drops_files_and_reopens(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put_all([(b"%d" % i, b"v" * 100) for i in range(1000)])
    store.clear()
    assert store.is_open and list(store.all()) == []
    store.put(b"x", b"y")
    assert store.get(b"x") == b"y"
    store.close()


def test_checkpoint_then_replace(tmp_path: Path) -> None:
    source = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "src")
    source.put_all([(b"a", b"1"), (b"b", b"2")])
    source.checkpoint_to(tmp_path / "ckpt")
    source.put(b"c", b"3")  # after the checkpoint: not in it
    source.close()
    target = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "dst")
    target.put(b"z", b"old")
    target.replace_with(tmp_path / "ckpt")
    assert list(target.all()) == [(b"a", b"1"), (b"b", b"2")]
    target.close()


class _Count(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)


def _counting_topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
    topology.add_processor("count", _Count, "src")
    builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("counts"), Serdes.string(), Serdes.int()
    )
    topology.add_state_store(builder, "count")
    return topology


def test_persistent_store_lives_in_the_task_directory(tmp_path: Path) -> None:
    config = StreamsConfig(application_id="app")
    with TopologyTestDriver(_counting_topology(), config, state_dir=tmp_path) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for key in ["a", "b", "a"]:
            source.pipe_input(key, "x", timestamp=1)
        store = driver.get_key_value_store("counts")
        assert list(store.all()) == [("a", 2), ("b", 1)]
        assert isinstance(store.inner, ChangeLoggingKeyValueBytesStore)
        assert isinstance(store.inner.inner, RocksDBKeyValueBytesStore)
        assert (tmp_path / "app" / "0_0" / "counts" / "CURRENT").exists()
    reopened = RocksDBKeyValueBytesStore("counts").open_standalone(
        tmp_path / "app" / "0_0" / "counts"
    )
    assert reopened.get(b"a") == Serdes.int().serialize(2)  # committed data, lock released
    reopened.close()


def test_dsl_stores_default_to_rocksdb() -> None:
    assert DEFAULT_STORE_TYPE == "rocksdb"
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string())).group_by_key().count(
        Materialized.as_("n")
    )
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_input("k", "v")
        store = driver.get_key_value_store("n")
        assert isinstance(store.inner.inner, RocksDBKeyValueBytesStore)
        assert store.get("k") == 1


def test_prefix_end_is_the_first_key_after_every_key_with_the_prefix() -> None:
    from streamtide.state.rocksdb import _prefix_end

    assert _prefix_end(b"ab") == b"ac"
    assert _prefix_end(b"a\xff") == b"b"
    assert _prefix_end(b"\xff\xff") is None
    assert _prefix_end(b"") is None


def test_bounded_scans_at_0xff_edges_and_after_mass_deletes(tmp_path) -> None:
    from streamtide.state.rocksdb import RocksDBKeyValueBytesStore

    store = RocksDBKeyValueBytesStore("edges").open_standalone(tmp_path / "edges")
    keys = [b"a\xff", b"a\xff\x00", b"a\xff\xff", b"b", b"\xff", b"\xff\xff\x01"]
    for key in keys:
        store.put(key, b"v")
    assert [k for k, _ in store.prefix_scan(b"a\xff")] == keys[:3]
    assert [k for k, _ in store.prefix_scan(b"\xff")] == keys[4:]
    assert [k for k, _ in store.range(b"a\xff\x00", b"b")] == keys[1:4]
    assert [k for k, _ in store.range(b"a\xff\x00", b"b", reverse=True)] == keys[3:0:-1]
    for i in range(5000):  # a run of deleted keys right after an empty range
        store.put(b"c%05d" % i, b"v")
    for i in range(5000):
        store.put(b"c%05d" % i, None)
    store.put(b"d", b"v")
    assert list(store.range(b"c", b"c\xff")) == []
    assert [k for k, _ in store.range(b"c", None)] == [b"d", *keys[4:]]
    store.close()
