"""The storage primitives (``log/storage.py``), above all exclusive creation."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa

from streamtide.log.storage import TMP_PREFIX, LocalStorage


def test_create_exclusive_wins_once_and_leaves_no_temp_files(tmp_path: Path) -> None:
    st = LocalStorage(str(tmp_path))
    st.make_dir("d")
    assert st.create_exclusive("d/x", b"first")
    assert not st.create_exclusive("d/x", b"second")
    assert st.read_bytes("d/x") == b"first"
    assert os.listdir(tmp_path / "d") == ["x"]


def test_create_exclusive_among_racing_threads(tmp_path: Path) -> None:
    st = LocalStorage(str(tmp_path), fsync=False)
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        if st.create_exclusive("entry", str(i).encode()):
            wins.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert st.read_bytes("entry") == str(wins[0]).encode()


def test_atomic_writes_and_tables(tmp_path: Path) -> None:
    st = LocalStorage(str(tmp_path))
    st.write_bytes_atomic("a", b"1")
    st.write_bytes_atomic("a", b"2")
    assert st.read_bytes("a") == b"2"
    table = pa.table({"x": [1, 2, 3]})
    st.write_table("t.arrow", table)
    assert st.read_table("t.arrow").equals(table)
    assert st.read_schema("t.arrow") == table.schema
    assert sorted(i.base_name for i in st.list_dir("")) == ["a", "t.arrow"]
    assert st.list_dir("missing") == []
    assert st.delete_file("a") and not st.delete_file("a")


def test_remove_stale_tmp_only_removes_old_temporary_files(tmp_path: Path) -> None:
    st = LocalStorage(str(tmp_path))
    old, new, keep = (
        (tmp_path / f"{TMP_PREFIX}old"),
        (tmp_path / f"{TMP_PREFIX}new"),
        tmp_path / "k",
    )
    for p in (old, new, keep):
        p.write_bytes(b"x")
    (tmp_path / f"{TMP_PREFIX}deleted-dir").mkdir()
    past = time.time() - 7200
    os.utime(old, (past, past))
    os.utime(tmp_path / f"{TMP_PREFIX}deleted-dir", (past, past))
    assert st.remove_stale_tmp("", 3600) == 2
    assert sorted(os.listdir(tmp_path)) == sorted([new.name, keep.name])
