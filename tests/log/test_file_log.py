"""The file log beyond the common ``Log`` contract (``test_log_contract.py``): sealing calls,
threads, pickling, the on-disk layout."""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path

import pytest

from streamtide.log import (
    FileLog,
    LogError,
    LogRecord,
    UnknownTopicError,
)


def recs(n: int, prefix: str = "v") -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), 1000 + i) for i in range(n)]


def vals(items) -> list[bytes]:
    return [r.value for r in items]


# -- topics ----------------------------------------------------------------------------------


def test_missing_topic_errors_of_the_sealing_calls(log: FileLog) -> None:
    calls = [
        lambda: log.write_segment("nope", 0, recs(1), writer_id="w"),
        lambda: log.list_unsealed("nope", 0),
    ]
    for call in calls:
        with pytest.raises(UnknownTopicError, match="does not exist"):
            call()


# -- append and read -------------------------------------------------------------------------


def test_invalid_records_write_nothing(log: FileLog) -> None:
    log.create_topic("t", 1)
    with pytest.raises(LogError):
        log.append("t", 0, [LogRecord(b"k", b"v", 1), LogRecord("k", b"v", 2)])  # type: ignore[arg-type]
    assert log.end_offset("t", 0) == 0
    assert log.list_unsealed("t", 0) == []


# -- handles ---------------------------------------------------------------------------------


def test_pickled_handle_reopens_the_same_root(log: FileLog) -> None:
    log.create_topic("t", 1)
    log.append("t", 0, recs(3))
    clone = pickle.loads(pickle.dumps(log))
    assert isinstance(clone, FileLog) and clone.root == log.root
    assert clone.end_offset("t", 0) == 3


def test_threads_appending_through_one_handle(log: FileLog) -> None:
    log.create_topic("t", 1)

    def work(w: int) -> None:
        for b in range(10):
            log.append("t", 0, recs(3, f"{w}.{b}."))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = list(log.read("t", 0))
    assert [r.offset for r in got] == list(range(120))
    for i in range(0, 120, 3):  # each batch stayed contiguous
        prefix = got[i].value[:-1]
        assert vals(got[i : i + 3]) == [prefix + b"0", prefix + b"1", prefix + b"2"]


def test_on_disk_layout(log: FileLog) -> None:
    log.create_topic("t", 2)
    log.append("t", 1, recs(2))
    root = Path(log.root)
    meta = json.loads((root / "t" / "topic.json").read_text())
    assert meta["partitions"] == 2 and meta["name"] == "t" and meta["manifest"] == "grouped"
    assert sorted(p.name for p in (root / "t").iterdir()) == [
        "0",
        "1",
        "checkpoints",
        "manifest",
        "topic.json",
    ]
    assert sorted(p.name for p in (root / "t" / "1").iterdir()) == ["manifest", "segments"]
    group = json.loads((root / "t" / "manifest" / f"{0:020d}.json").read_bytes())
    assert group["v"] == 1 and group["prev"] == ""
    [(partition, entry)] = group["entries"]
    assert partition == 1 and entry["kind"] == "seal"
    assert entry["base_offset"] == 0 and entry["record_count"] == 2
    assert (root / "t" / "1" / "segments" / entry["segment"]).is_file()
    assert list((root / "t" / "0" / "segments").iterdir()) == []


def test_read_segment_reads_an_unsealed_segment_by_reference(tmp_path) -> None:
    from streamtide.errors import LogError
    from streamtide.log import LogRecord, open_log

    log = open_log(f"file://{tmp_path}")
    log.create_topic("t", 1)
    ref = log.write_segment("t", 0, [LogRecord(b"k", b"v", 5, (("h", b"1"),))], writer_id="w")
    table = log.read_segment(ref)
    assert table.column("value").to_pylist() == [b"v"]
    assert table.column("timestamp").to_pylist() == [5]
    assert log.end_offset("t", 0) == 0  # reading does not seal
    log.abort_unsealed("t", 0, ref)
    with pytest.raises(LogError, match="does not exist"):
        log.read_segment(ref)
