"""``rocksdb_handover.handover()``: a store closing inside the block leaves its database open
for the next store of the same directory; the rest behaves as a close and a reopen."""

from __future__ import annotations

from pathlib import Path

import streamtide.state.rocksdb as rocksdb_module
from streamtide.state import RocksDBKeyValueBytesStore
from streamtide.state.rocksdb_handover import handover


def test_the_next_store_of_the_directory_takes_the_open_database(
    tmp_path: Path, rocksdb_opens: list[str]
) -> None:
    first = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    first.put_all([(b"a", b"1"), (b"b", b"2")])
    handle = first._db
    with handover():
        first.close()
        assert not first.is_open
        second = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert rocksdb_opens == [str(tmp_path / "db")]  # only the first open reached RocksDB
    assert second._db is handle and not second.created_fresh
    assert list(second.all()) == [(b"a", b"1"), (b"b", b"2")]
    second.put(b"c", b"3")
    second.close()  # outside a block: really closed, the lock released
    third = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert list(third.all()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    third.close()


def test_a_database_nobody_takes_is_closed_when_the_block_ends(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put(b"a", b"1")
    with handover():
        store.close()
        with handover():  # a nested block shares the shelf: the database is still there
            pass
        assert rocksdb_module.recovery.held(tmp_path / "db")  # open on the shelf
    assert not rocksdb_module.recovery.held(tmp_path / "db")
    again = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert list(again.all()) == [(b"a", b"1")]
    again.close()


def test_a_store_of_another_directory_opens_its_own(
    tmp_path: Path, rocksdb_opens: list[str]
) -> None:
    one = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "one")
    one.put(b"a", b"1")
    with handover():
        one.close()
        two = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "two")
        assert two.created_fresh and list(two.all()) == []
        two.close()
    assert rocksdb_opens == [str(tmp_path / "one"), str(tmp_path / "two")]


def test_clearing_inside_a_block_still_drops_the_files(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    store.put(b"a", b"1")
    with handover():
        store.clear()  # closes, deletes and reopens: never through the shelf
        assert list(store.all()) == []
        store.close()
    again = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert list(again.all()) == []
    again.close()


def test_a_temporary_store_is_not_handed_over(tmp_path: Path) -> None:
    store = RocksDBKeyValueBytesStore("s").open_standalone()
    directory = store.directory
    with handover():
        store.close()
        assert not directory.exists()  # its temporary directory is gone, as without a block
