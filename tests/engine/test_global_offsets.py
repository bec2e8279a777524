"""The global tables' end offsets of a batch are fixed once: a retried batch or a restarted
driver reads the same ones, even after more records arrived."""

from __future__ import annotations

from streamtide import Consumed, Serdes, StreamsBuilder
from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.global_offsets import global_ends
from streamtide.engine.protocol import GlobalOffsetsRecord, decode, encode
from streamtide.log import LogRecord, open_log


def _topology():
    builder = StreamsBuilder()
    table = builder.global_table("groups", Consumed.with_(Serdes.string(), Serdes.string()))
    builder.stream("events").join(table, lambda k, v: v, lambda v, g: g).to("out")
    return builder.build()


def test_a_batchs_global_end_offsets_are_recorded_once(tmp_path) -> None:
    log = open_log(f"file://{tmp_path / 'log'}")
    log.create_topic("groups", 2)
    log.append("groups", 1, [LogRecord(b"g", b"x", 0)] * 3)
    driver = AppDirectory(tmp_path / "app", "app")
    driver.take_epoch()
    assert global_ends(driver, log, _topology(), "app", 7) == {"groups": [0, 3]}
    log.append("groups", 0, [LogRecord(b"h", b"y", 0)])
    assert global_ends(driver, log, _topology(), "app", 7) == {"groups": [0, 3]}
    restarted = AppDirectory(tmp_path / "app", "app")
    restarted.take_epoch()
    assert global_ends(restarted, log, _topology(), "app", 7) == {"groups": [0, 3]}
    assert global_ends(restarted, log, _topology(), "app", 8) == {"groups": [1, 3]}
    log.close()


def test_no_global_table_needs_no_record(tmp_path) -> None:
    builder = StreamsBuilder()
    builder.stream("events").to("out")
    app_dir = AppDirectory(tmp_path / "app", "app")
    assert global_ends(app_dir, None, builder.build(), "app", 0) == {}
    assert app_dir.read_global_offsets(0) is None


def test_the_record_round_trips() -> None:
    record = GlobalOffsetsRecord(3, 2, {"groups": [5, 0, 9]})
    assert decode(encode(record), "global_offsets", "here") == record
