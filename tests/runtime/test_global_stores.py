"""Global stores: a whole topic per task, brought to given end offsets of the log."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Serdes, StoreError, StreamsBuilder
from streamtide.log import LogRecord, open_log
from streamtide.runtime.global_stores import GlobalStores

STRING = Serdes.string()


def _stores() -> GlobalStores:
    builder = StreamsBuilder()
    builder.global_table("groups", Consumed.with_(STRING, STRING))
    builder.stream("events").to("out")
    return GlobalStores(builder.build(), "app", Serdes.bytes(), Serdes.bytes())


def _record(key: str | None, value: str | None) -> LogRecord:
    return LogRecord(STRING.serialize(key), STRING.serialize(value), 0)


@pytest.fixture
def log(tmp_path):
    log = open_log(f"file://{tmp_path / 'log'}")
    log.create_topic("groups", 2)
    log.append("groups", 0, [_record("a", "1"), _record("b", "1"), _record(None, "skip")])
    log.append("groups", 1, [_record("c", "1"), _record("a2", "x")])
    yield log
    log.close()


def test_update_applies_every_partition_up_to_the_given_ends(log) -> None:
    stores = _stores()
    (name,) = stores
    assert stores.update(log, {"groups": [2, 1]}) == 3
    table = stores[name]
    assert dict(table.all()) == {"a": "1", "b": "1", "c": "1"}
    log.append("groups", 0, [_record("a", "2"), _record("b", None)])
    assert stores.update(log, {"groups": [5, 2]}) == 4  # the key-less record is skipped
    assert dict(table.all()) == {"a": "2", "a2": "x", "c": "1"}
    assert stores.update(log, {"groups": [5, 2]}) == 0
    assert table.get("a") == "2" and table.approximate_num_entries() == 3
    with pytest.raises(StoreError, match="None key"):
        table.get(None)


def test_a_copy_ahead_of_the_ends_is_rebuilt(log) -> None:
    stores = _stores()
    (name,) = stores
    stores.update(log, {"groups": [3, 2]})
    assert stores.update(log, {"groups": [1, 2]}) == 3
    assert dict(stores[name].all()) == {"a": "1", "a2": "x", "c": "1"}
    assert stores[name].positions == [1, 2]
