"""Changelogged stores: the write buffer, changelog records, and what reaches the local store."""

from __future__ import annotations

from pathlib import Path

from streamtide import Processor, Serdes, StreamsConfig
from streamtide.processor.topology import Topology
from streamtide.record import Record
from streamtide.state import (
    ChangeLoggingKeyValueBytesStore,
    InMemoryKeyValueBytesStore,
    RocksDBKeyValueBytesStore,
    Stores,
)
from streamtide.state.changelogging import (
    RANGE_END_HEADER,
    apply_changelog,
    range_delete_record,
    range_end,
)
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.testing import TopologyTestDriver


def _logged(tmp_path: Path | None = None) -> ChangeLoggingKeyValueBytesStore:
    inner = (
        RocksDBKeyValueBytesStore("s") if tmp_path is not None else InMemoryKeyValueBytesStore("s")
    )
    store = ChangeLoggingKeyValueBytesStore(inner)
    if tmp_path is not None:
        return store.open_standalone(tmp_path / "db", buffered=True)
    return store.open_standalone(buffered=True)


def test_supplier_wraps_only_when_logging_is_enabled() -> None:
    supplier = KeyValueBytesStoreSupplier("s", "in_memory")
    assert isinstance(supplier.get(), ChangeLoggingKeyValueBytesStore)
    assert isinstance(supplier.with_logging(False).get(), InMemoryKeyValueBytesStore)
    builder = Stores.key_value_store_builder(supplier, Serdes.bytes(), Serdes.bytes())
    assert isinstance(builder.with_logging_disabled().build().inner, InMemoryKeyValueBytesStore)


def test_writes_wait_in_the_buffer_and_reads_see_them(tmp_path: Path) -> None:
    store = _logged(tmp_path)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    assert store.get(b"a") == b"1"
    assert list(store.range(b"a", b"z")) == [(b"a", b"1"), (b"b", b"2")]
    assert list(store.inner.all()) == []  # nothing committed yet
    records = store.take_changelog()
    assert records == [(b"a", b"1", ()), (b"b", b"2", ())]
    assert list(store.inner.all()) == []  # sent is not applied
    assert store.get(b"b") == b"2"  # ... but still visible
    assert store.apply_sent() == 2
    assert list(store.inner.all()) == [(b"a", b"1"), (b"b", b"2")]
    store.close()


def test_changelog_holds_the_last_write_per_key_range_deletes_first() -> None:
    store = _logged()
    store.put(b"k1", b"old")
    store.put(b"x", b"doomed")
    store.delete_range(b"w", b"y")  # drops the buffered b"x"
    store.put(b"k1", b"new")
    store.put(b"k2", None)
    store.put(b"wz", b"after")  # written after the range delete: kept
    records = store.take_changelog()
    assert records == [
        range_delete_record(b"w", b"y"),
        (b"k1", b"new", ()),
        (b"k2", None, ()),
        (b"wz", b"after", ()),
    ]
    assert store.take_changelog() == []


def test_range_delete_records_round_trip() -> None:
    key, value, headers = range_delete_record(b"a", b"m")
    assert (key, value) == (b"a", None) and headers[0][0] == RANGE_END_HEADER
    assert range_end(headers) == (True, b"m")
    assert range_end(range_delete_record(b"a", None)[2]) == (True, None)
    assert range_end(()) == (False, None)
    assert range_end((("other", b"x"),)) == (False, None)


def test_apply_changelog_reproduces_the_store() -> None:
    source = _logged()
    source.put_all([(b"%02d" % i, b"v%d" % i) for i in range(20)])
    source.take_changelog()
    source.apply_sent()
    source.delete_range(b"05", b"10")
    source.put(b"07", b"back")
    source.put(b"15", None)
    source.delete_range(b"18", None)
    records = source.take_changelog()
    source.apply_sent()
    target = InMemoryKeyValueBytesStore("t").open_standalone()
    target.put_all([(b"%02d" % i, b"v%d" % i) for i in range(20)])
    assert apply_changelog(target, records) == len(records)
    assert list(target.all()) == list(source.inner.all()) == list(source.all())


def test_discarded_writes_never_reach_rocksdb(tmp_path: Path) -> None:
    store = _logged(tmp_path)
    store.put(b"committed", b"1")
    store.take_changelog()
    store.apply_sent()
    store.put(b"sent-then-aborted", b"2")
    store.take_changelog()
    store.put(b"never-sent", b"3")
    store.delete_range(None, None)
    assert list(store.all()) == []
    assert store.discard_sent() == 1
    assert store.discard_writes() == 1  # the range delete swallowed the put before it
    assert list(store.all()) == [(b"committed", b"1")]
    store.close()
    on_disk = RocksDBKeyValueBytesStore("s").open_standalone(tmp_path / "db")
    assert list(on_disk.all()) == [(b"committed", b"1")]
    on_disk.close()


def test_a_second_batch_stacks_over_the_sent_one() -> None:
    store = _logged()
    store.put(b"a", b"1")
    store.take_changelog()
    store.put(b"a", b"2")
    store.put(b"b", b"3")
    assert store.take_changelog() == [(b"a", b"2", ()), (b"b", b"3", ())]
    assert store.unapplied == 2
    store.apply_sent()
    assert list(store.inner.all()) == [(b"a", b"2"), (b"b", b"3")]


class _Writer(Processor):
    def init(self, context):  # type: ignore[no-untyped-def]
        super().init(context)
        self.store = context.get_state_store("kv")

    def process(self, record: Record) -> None:
        if record.value == "delete":
            self.store.delete(record.key)
        else:
            self.store.put(record.key, record.value)


def _topology(kind: str, logging: bool) -> Topology:
    topology = Topology()
    topology.add_source("src", "in", key_serde=Serdes.string(), value_serde=Serdes.string())
    topology.add_processor("write", _Writer, "src")
    builder = Stores.key_value_store_builder(
        KeyValueBytesStoreSupplier("kv", kind), Serdes.string(), Serdes.string()
    )
    if not logging:
        builder.with_logging_disabled()
    topology.add_state_store(builder, "write")
    return topology


def test_driver_lists_the_changelog_topic() -> None:
    for kind in ("in_memory", "rocksdb"):
        config = StreamsConfig(application_id="app")
        with TopologyTestDriver(_topology(kind, True), config) as driver:
            source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
            source.pipe_input("a", "1", timestamp=5)
            source.pipe_input("b", "2", timestamp=6)
            source.pipe_input("a", "delete", timestamp=7)
            driver.commit()
            records = driver.topic_records("app-kv-changelog")
            assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (b"b", b"2"), (b"a", None)]
            assert [r.timestamp for r in records] == [5, 6, 7]
            replayed = InMemoryKeyValueBytesStore("r").open_standalone()
            apply_changelog(replayed, [(r.key, r.value, r.headers) for r in records])
            store = driver.get_key_value_store("kv")
            assert list(replayed.all()) == list(store.inner.inner.all()) == [(b"b", b"2")]


def test_no_changelog_when_logging_is_disabled() -> None:
    config = StreamsConfig(application_id="app")
    with TopologyTestDriver(_topology("rocksdb", False), config) as driver:
        driver.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_input("a", "1")
        driver.commit()
        assert "app-kv-changelog" not in driver.produced_topic_names()
        assert driver.get_key_value_store("kv").get("a") == "1"
