"""The versioned store against a plain model of its rules, and its life as a logged store:
restore, expiry, the write buffer, and the ``Stores`` factory.

The model keeps every version of every key forever and answers from the rules alone (the
``state.versioned`` docstring); the store must answer the same for every query the rules
define, whatever it has physically expired.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtide.errors import StoreError, TopologyError
from streamtide.serde import Serdes
from streamtide.state.changelogging import RANGE_END_HEADER
from streamtide.state.encoding import MAX_LONG, MIN_LONG
from streamtide.state.stores import Stores
from streamtide.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    ResultOrder,
    VersionedRecord,
)
from streamtide.state.versioned_format import HISTORY, default_segment_interval
from tests.state.versioned_support import Versioned

RETENTION = 20
INTERVAL = 7


class Model:
    """Every version of every key, and the rules of a versioned store."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.versions: dict[str, dict[int, str | None]] = {}
        self.observed = -1

    def _times(self, key: str) -> list[int]:
        return sorted(self.versions.get(key, {}))

    def put(self, key: str, value: str | None, timestamp: int) -> int:
        if timestamp < self.observed - self.retention:
            return PUT_RETURN_CODE_NOT_PUT
        self.observed = max(self.observed, timestamp)
        self.versions.setdefault(key, {})[timestamp] = value
        later = [t for t in self._times(key) if t > timestamp]
        return later[0] if later else PUT_RETURN_CODE_VALID_TO_UNDEFINED

    def delete(self, key: str, timestamp: int) -> VersionedRecord | None:
        if timestamp < self.observed - self.retention:
            return None
        existing = self.get(key, timestamp)
        self.put(key, None, timestamp)
        return existing

    def _record(self, key: str, start: int) -> VersionedRecord | None:
        times = self._times(key)
        value = self.versions[key][start]
        if value is None:
            return None
        later = [t for t in times if t > start]
        return VersionedRecord(value, start, later[0] if later else None)

    def get(self, key: str, as_of: int | None = None) -> VersionedRecord | None:
        times = self._times(key)
        if not times:
            return None
        latest = self._record(key, times[-1])
        if as_of is None or (latest is not None and latest.timestamp <= as_of):
            return latest
        if as_of < self.observed - self.retention:
            return None
        starts = [t for t in times if t <= as_of]
        return self._record(key, starts[-1]) if starts else None

    def get_versions(self, key: str, time_from: int, time_to: int) -> list[VersionedRecord]:
        live_from = self.observed - self.retention
        found = []
        for start in reversed(self._times(key)):
            record = self._record(key, start)
            if record is None or record.timestamp > time_to:
                continue
            if record.valid_to is None or (
                time_to >= live_from and record.valid_to > max(time_from, live_from)
            ):
                found.append(record)
        return found


KEYS = st.sampled_from(["a", "b", "c"])
TIMES = st.integers(min_value=0, max_value=60)
VALUES = st.one_of(st.none(), st.sampled_from(["", "x", "y", "z"]))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, VALUES, TIMES),
        st.tuples(st.just("delete"), KEYS, st.none(), TIMES),
        st.tuples(st.just("commit"), st.none(), st.none(), st.none()),
    ),
    max_size=40,
)


def check_reads(store, model: Model) -> None:
    for key in ("a", "b", "c"):
        assert store.get(key) == model.get(key), key
        for as_of in range(-1, 63):
            assert store.get(key, as_of) == model.get(key, as_of), (key, as_of)
        for time_from, time_to in [(MIN_LONG, MAX_LONG), (0, 10), (25, 40), (44, 44), (50, 70)]:
            expected = model.get_versions(key, time_from, time_to)
            assert store.get_versions(key, time_from, time_to) == expected
            ascending = store.get_versions(key, time_from, time_to, ResultOrder.ASCENDING)
            assert ascending == expected[::-1]


@pytest.mark.parametrize("variant", [("in_memory", "buffered"), ("rocksdb", "committed")])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_the_store_and_its_restored_copy_answer_as_the_model(variant, ops, tmp_path_factory):
    vs = Versioned(variant, tmp_path_factory.mktemp("v"), RETENTION, INTERVAL)
    model = Model(RETENTION)
    try:
        for op, key, value, timestamp in ops:
            if op == "put":
                assert vs.put(key, value, timestamp) == model.put(key, value, timestamp)
            elif op == "delete":
                assert vs.delete(key, timestamp) == model.delete(key, timestamp)
            else:
                vs.commit()
        check_reads(vs.store, model)
        restored = vs.restored()
        check_reads(restored, model)
        restored.close()
    finally:
        vs.close()


def test_expired_versions_leave_the_store_and_are_deleted_one_by_one(tmp_path):
    vs = Versioned(("in_memory", "buffered"), tmp_path, RETENTION, INTERVAL)
    for timestamp in range(0, 30, 3):
        vs.put("k", f"v{timestamp}", timestamp)
    vs.commit()
    history = list(vs.store.inner.range(HISTORY, HISTORY + b"\xff"))
    assert len(history) == 7  # all but the latest, and the two ending before 27 - 20 = 7
    vs.put("other", "x", 200)  # moves the observed stream time far on
    vs.commit()
    assert list(vs.store.inner.range(HISTORY, HISTORY + b"\xff")) == []
    assert vs.store.get("k") == VersionedRecord("v27", 27)  # the latest never expires
    deletes = [record for record in vs.changelog if record[1] is None]
    assert len(deletes) == 9
    assert all(RANGE_END_HEADER not in dict(headers) for _, _, headers in vs.changelog)


def test_reads_see_the_batch_writes_and_the_local_store_only_committed_ones(tmp_path):
    vs = Versioned(("rocksdb", "buffered"), tmp_path, 1_000, 100)
    vs.put("k", "v1", 10)
    vs.commit()
    vs.put("k", "v2", 20)
    assert vs.store.get("k") == VersionedRecord("v2", 20)
    assert vs.store.get("k", 15) == VersionedRecord("v1", 10, 20)
    local = vs.logged.inner  # type: ignore[union-attr]
    assert local.get(b"L" + b"k") is not None and local.get(b"L" + b"k")[8:] == b"v1"
    vs.logged.discard_writes()  # type: ignore[union-attr]  # the attempt is abandoned
    assert vs.store.get("k") == VersionedRecord("v1", 10)
    assert vs.store.get("k", 15) == VersionedRecord("v1", 10)
    assert vs.store.observed_stream_time == 10
    vs.close()


def test_factory_checks_and_defaults():
    supplier = Stores.persistent_versioned_key_value_store("v", 300_000)
    assert (supplier.kind, supplier.history_retention_ms) == ("rocksdb", 300_000)
    assert supplier.segment_interval_ms == default_segment_interval(300_000) == 60_000
    assert default_segment_interval(60_000) == 20_000
    assert default_segment_interval(3_600_000) == 300_000
    assert default_segment_interval(86_400_000) == 3_600_000
    memory = Stores.in_memory_versioned_key_value_store("m", 1_000, segment_interval=10)
    assert (memory.kind, memory.segment_interval_ms) == ("in_memory", 10)
    with pytest.raises(ValueError, match="history_retention"):
        Stores.persistent_versioned_key_value_store("v", -1)
    with pytest.raises(ValueError, match="segment_interval"):
        Stores.persistent_versioned_key_value_store("v", 10, segment_interval=0)
    with pytest.raises(TopologyError, match="versioned store supplier"):
        Stores.versioned_key_value_store_builder(Stores.persistent_key_value_store("kv"))
    builder = Stores.versioned_key_value_store_builder(supplier, Serdes.string(), Serdes.long())
    assert builder.name == "v" and builder.logging_enabled
    assert builder.history_retention_ms == 300_000
    assert builder.build().kind == "versioned_key_value"


def test_a_none_key_is_refused_and_an_unopened_store_says_so(tmp_path):
    vs = Versioned(("in_memory", "plain"), tmp_path, 100, 10)
    with pytest.raises(StoreError, match="does not accept a None key"):
        vs.store.put(None, "v", 1)
    with pytest.raises(StoreError, match="does not accept a None key"):
        vs.store.get(None)
    vs.close()
    builder = Stores.versioned_key_value_store_builder(
        Stores.in_memory_versioned_key_value_store("v", 100)
    )
    with pytest.raises(StoreError, match="needs serdes"):
        builder.build().open_standalone()
