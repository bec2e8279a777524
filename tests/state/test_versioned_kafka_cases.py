"""Kafka Streams' ``RocksDBVersionedStoreTest``, ported: each test is named after the Kafka
test it comes from and keeps its inputs and expected values (timestamps, ``valid_to``s and
return codes included). They run against every store variant (``versioned_support``).

Kafka's restore tests hand the store its changelog records (key, value, timestamp), which
are the puts that wrote them; here the same records are put into a store and a new store is
rebuilt from the changelog that wrote, which must answer exactly as Kafka's restored store.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamtide.state.encoding import MAX_LONG, MIN_LONG
from streamtide.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    ResultOrder,
    VersionedKeyValueStore,
)
from tests.state.versioned_support import VARIANT_IDS, VARIANTS, Versioned

HISTORY_RETENTION = 300_000
GRACE_PERIOD = HISTORY_RETENTION  # history retention doubles as the grace period
SEGMENT_INTERVAL = HISTORY_RETENTION // 3
SI = SEGMENT_INTERVAL
BASE_TIMESTAMP = 10
UNDEFINED = PUT_RETURN_CODE_VALID_TO_UNDEFINED
NOT_PUT = PUT_RETURN_CODE_NOT_PUT
ANY = ResultOrder.ANY


@pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
def vs(request: pytest.FixtureRequest, tmp_path) -> Iterator[Versioned]:
    store = Versioned(request.param, tmp_path, HISTORY_RETENTION, SEGMENT_INTERVAL)
    yield store
    store.close()


def put_to_store(vs: Versioned, key: str, value: str | None, timestamp: int, valid_to: int):
    assert vs.put(key, value, timestamp) == valid_to


def verify_get_value(store: VersionedKeyValueStore, key: str, value: str, timestamp: int):
    record = store.get(key)
    assert record is not None, f"get({key!r}) is None"
    assert (record.value, record.timestamp, record.valid_to) == (value, timestamp, None)


def verify_get_null(store: VersionedKeyValueStore, key: str):
    assert store.get(key) is None


def verify_as_of_value(
    store: VersionedKeyValueStore, key: str, as_of: int, value: str, ts: int, valid_to: int
):
    record = store.get(key, as_of)
    assert record is not None, f"get({key!r}, {as_of}) is None"
    expected_to = None if valid_to == UNDEFINED else valid_to
    assert (record.value, record.timestamp, record.valid_to) == (value, ts, expected_to)


def verify_as_of_null(store: VersionedKeyValueStore, key: str, as_of: int):
    assert store.get(key, as_of) is None, f"get({key!r}, {as_of})"


def verify_versions(
    store: VersionedKeyValueStore,
    key: str,
    time_from: int,
    time_to: int,
    order: ResultOrder,
    values: list[str],
    timestamps: list[int],
    valid_tos: list[int],
):
    found = store.get_versions(key, time_from, time_to, order)
    expected = [
        (v, t, None if to == UNDEFINED else to) for v, t, to in zip(values, timestamps, valid_tos)
    ]
    assert [(r.value, r.timestamp, r.valid_to) for r in found] == expected


def verify_versions_null(store: VersionedKeyValueStore, key: str, time_from: int, time_to: int):
    assert store.get_versions(key, time_from, time_to, ANY) == []


def both(vs: Versioned) -> list[VersionedKeyValueStore]:
    """The store and (with a changelog) a store restored from it: both must answer alike."""
    return [vs.store] if vs.logged is None else [vs.store, vs.restored()]


def test_should_put_latest(vs):
    put_to_store(vs, "k", "v", BASE_TIMESTAMP, UNDEFINED)
    put_to_store(vs, "k", "v2", BASE_TIMESTAMP + 1, UNDEFINED)

    for store in both(vs):
        verify_get_value(store, "k", "v2", BASE_TIMESTAMP + 1)
        verify_as_of_value(store, "k", BASE_TIMESTAMP, "v", BASE_TIMESTAMP, BASE_TIMESTAMP + 1)
        verify_as_of_value(store, "k", BASE_TIMESTAMP + 1, "v2", BASE_TIMESTAMP + 1, UNDEFINED)
        verify_as_of_value(store, "k", BASE_TIMESTAMP + 2, "v2", BASE_TIMESTAMP + 1, UNDEFINED)


def test_should_put_null_as_latest(vs):
    put_to_store(vs, "k", None, BASE_TIMESTAMP, UNDEFINED)
    put_to_store(vs, "k", None, BASE_TIMESTAMP + 1, UNDEFINED)

    for store in both(vs):
        verify_get_null(store, "k")
        verify_as_of_null(store, "k", BASE_TIMESTAMP)
        verify_as_of_null(store, "k", BASE_TIMESTAMP + 1)
        verify_as_of_null(store, "k", BASE_TIMESTAMP + 2)


def test_should_put_older_with_non_null_latest(vs):
    put_to_store(vs, "k", "v", BASE_TIMESTAMP, UNDEFINED)
    put_to_store(vs, "k", "v2", BASE_TIMESTAMP - 2, BASE_TIMESTAMP)
    put_to_store(vs, "k", "v1", BASE_TIMESTAMP - 1, BASE_TIMESTAMP)
    put_to_store(vs, "k", "v4", BASE_TIMESTAMP - 4, BASE_TIMESTAMP - 2)

    for store in both(vs):
        verify_get_value(store, "k", "v", BASE_TIMESTAMP)
        verify_as_of_value(store, "k", BASE_TIMESTAMP, "v", BASE_TIMESTAMP, UNDEFINED)
        b = BASE_TIMESTAMP
        verify_as_of_value(store, "k", b - 1, "v1", b - 1, b)
        verify_as_of_value(store, "k", b - 2, "v2", b - 2, b - 1)
        verify_as_of_value(store, "k", b - 3, "v4", b - 4, b - 2)


def test_should_put_older_with_null_latest(vs):
    b = BASE_TIMESTAMP
    put_to_store(vs, "k", None, b, UNDEFINED)
    put_to_store(vs, "k", "v2", b - 2, b)
    put_to_store(vs, "k", "v1", b - 1, b)
    put_to_store(vs, "k", "v4", b - 4, b - 2)

    for store in both(vs):
        verify_get_null(store, "k")
        verify_as_of_null(store, "k", b)
        verify_as_of_value(store, "k", b - 1, "v1", b - 1, b)
        verify_as_of_value(store, "k", b - 2, "v2", b - 2, b - 1)
        verify_as_of_value(store, "k", b - 3, "v4", b - 4, b - 2)


def test_should_put_older_null_with_non_null_latest(vs):
    b = BASE_TIMESTAMP
    put_to_store(vs, "k", "v", b, UNDEFINED)
    put_to_store(vs, "k", None, b - 2, b)
    put_to_store(vs, "k", None, b - 1, b)
    put_to_store(vs, "k", None, b - 4, b - 2)
    put_to_store(vs, "k", "v5", b - 5, b - 4)
    put_to_store(vs, "k", "v3", b - 3, b - 2)
    put_to_store(vs, "k", None, b - 6, b - 5)

    for store in both(vs):
        verify_get_value(store, "k", "v", b)
        verify_as_of_value(store, "k", b, "v", b, UNDEFINED)
        verify_as_of_null(store, "k", b - 1)
        verify_as_of_null(store, "k", b - 2)
        verify_as_of_value(store, "k", b - 3, "v3", b - 3, b - 2)
        verify_as_of_null(store, "k", b - 4)
        verify_as_of_value(store, "k", b - 5, "v5", b - 5, b - 4)
        verify_as_of_null(store, "k", b - 6)


def test_should_put_older_null_with_null_latest(vs):
    b = BASE_TIMESTAMP
    put_to_store(vs, "k", None, b, UNDEFINED)
    put_to_store(vs, "k", None, b - 2, b)
    put_to_store(vs, "k", None, b - 1, b)
    put_to_store(vs, "k", None, b - 4, b - 2)
    put_to_store(vs, "k", "v3", b - 3, b - 2)
    put_to_store(vs, "k", "v5", b - 5, b - 4)
    put_to_store(vs, "k", None, b - 6, b - 5)

    for store in both(vs):
        verify_get_null(store, "k")
        verify_as_of_null(store, "k", b)
        verify_as_of_null(store, "k", b - 1)
        verify_as_of_null(store, "k", b - 2)
        verify_as_of_value(store, "k", b - 3, "v3", b - 3, b - 2)
        verify_as_of_null(store, "k", b - 4)
        verify_as_of_value(store, "k", b - 5, "v5", b - 5, b - 4)
        verify_as_of_null(store, "k", b - 6)


def test_should_put_repeat_timestamp_as_latest(vs):
    b = BASE_TIMESTAMP
    put_to_store(vs, "k", "to_be_replaced", b, UNDEFINED)
    put_to_store(vs, "k", "b", b, UNDEFINED)

    verify_get_value(vs.store, "k", "b", b)
    verify_as_of_value(vs.store, "k", b, "b", b, UNDEFINED)
    verify_as_of_null(vs.store, "k", b - 1)

    put_to_store(vs, "k", None, b, UNDEFINED)

    verify_get_null(vs.store, "k")
    verify_as_of_null(vs.store, "k", b)
    verify_as_of_null(vs.store, "k", b - 1)

    put_to_store(vs, "k", None, b, UNDEFINED)

    verify_get_null(vs.store, "k")
    verify_as_of_null(vs.store, "k", b)
    verify_as_of_null(vs.store, "k", b - 1)

    put_to_store(vs, "k", "b", b, UNDEFINED)

    for store in both(vs):
        verify_get_value(store, "k", "b", b)
        verify_as_of_value(store, "k", b, "b", b, UNDEFINED)
        verify_as_of_null(store, "k", b - 1)


REPEAT_TIMESTAMPS = [  # shouldPutRepeatTimestamps (and its restore twin): key "k"
    ("to_be_replaced", SI + 20, UNDEFINED),
    (None, SI - 10, SI + 20),
    ("to_be_replaced", SI - 10, SI + 20),  # null -> non-null, timestamps spanning segments
    (None, SI - 10, SI + 20),  # non-null -> null
    ("to_be_replaced", SI - 1, SI + 20),
    ("to_be_replaced", SI + 1, SI + 20),
    (None, SI - 1, SI + 1),  # non-null -> null
    (None, SI + 1, SI + 20),  # non-null -> null, timestamps spanning segments
    (None, SI + 10, SI + 20),
    (None, SI + 5, SI + 10),
    ("vp5", SI + 5, SI + 10),  # null -> non-null
    ("to_be_replaced", SI - 5, SI - 1),
    ("vn5", SI - 5, SI - 1),  # non-null -> non-null
    (None, SI + 20, UNDEFINED),  # the latest value -> null
    (None, SI + 20, UNDEFINED),  # null -> null
    ("vn6", SI - 6, SI - 5),
]


def verify_repeat_timestamps(store: VersionedKeyValueStore):
    verify_get_null(store, "k")
    verify_as_of_null(store, "k", SI + 30)
    verify_as_of_null(store, "k", SI + 15)
    verify_as_of_value(store, "k", SI + 6, "vp5", SI + 5, SI + 10)
    verify_as_of_null(store, "k", SI + 2)
    verify_as_of_null(store, "k", SI)
    verify_as_of_null(store, "k", SI - 1)
    verify_as_of_value(store, "k", SI - 5, "vn5", SI - 5, SI - 1)
    verify_as_of_value(store, "k", SI - 6, "vn6", SI - 6, SI - 5)
    verify_as_of_null(store, "k", SI - 8)


def test_should_put_repeat_timestamps(vs):
    for value, timestamp, valid_to in REPEAT_TIMESTAMPS:
        put_to_store(vs, "k", value, timestamp, valid_to)
    verify_repeat_timestamps(vs.store)


def test_should_put_into_multiple_segments(vs):
    put_to_store(vs, "k", None, SI - 20, UNDEFINED)
    put_to_store(vs, "k", "vn10", SI - 10, UNDEFINED)
    put_to_store(vs, "k", None, SI - 1, UNDEFINED)
    put_to_store(vs, "k", None, SI + 1, UNDEFINED)
    put_to_store(vs, "k", "vp10", SI + 10, UNDEFINED)
    put_to_store(vs, "k", None, SI + 20, UNDEFINED)

    for store in both(vs):
        verify_get_null(store, "k")
        verify_as_of_null(store, "k", SI + 30)
        verify_as_of_value(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
        verify_as_of_null(store, "k", SI + 5)
        verify_as_of_null(store, "k", SI + 2)
        verify_as_of_null(store, "k", SI)
        verify_as_of_null(store, "k", SI - 1)
        verify_as_of_value(store, "k", SI - 5, "vn10", SI - 10, SI - 1)
        verify_as_of_null(store, "k", SI - 15)


MOVE_TO_OLDER_SEGMENT = [  # shouldMoveRecordToOlderSegmentDuringPut (and shouldRestore)
    ("vp20", SI + 20, UNDEFINED),
    ("vp10", SI + 10, SI + 20),
    ("vn10", SI - 10, SI + 10),
    ("vn2", SI - 2, SI + 10),
    ("vn1", SI - 1, SI + 10),
    ("vp1", SI + 1, SI + 10),
]


def verify_moved_to_older_segment(store: VersionedKeyValueStore):
    verify_get_value(store, "k", "vp20", SI + 20)
    verify_as_of_value(store, "k", SI + 30, "vp20", SI + 20, UNDEFINED)
    verify_as_of_value(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
    verify_as_of_value(store, "k", SI + 5, "vp1", SI + 1, SI + 10)
    verify_as_of_value(store, "k", SI, "vn1", SI - 1, SI + 1)
    verify_as_of_value(store, "k", SI - 1, "vn1", SI - 1, SI + 1)
    verify_as_of_value(store, "k", SI - 2, "vn2", SI - 2, SI - 1)
    verify_as_of_value(store, "k", SI - 5, "vn10", SI - 10, SI - 2)


def test_should_move_record_to_older_segment_during_put(vs):
    for value, timestamp, valid_to in MOVE_TO_OLDER_SEGMENT:
        put_to_store(vs, "k", value, timestamp, valid_to)
    verify_moved_to_older_segment(vs.store)


MOVE_WITH_NULLS = [  # shouldMoveRecordToOlderSegmentWithNullsDuringPut (and its restore twin)
    (None, SI + 20, UNDEFINED),
    (None, SI - 1, SI + 20),
    (None, SI + 1, SI + 20),
    (None, SI - 10, SI - 1),
    (None, SI + 10, SI + 20),
    ("vp5", SI + 5, SI + 10),
    ("vn5", SI - 5, SI - 1),
    ("vn6", SI - 6, SI - 5),
]


def test_should_move_record_to_older_segment_with_nulls_during_put(vs):
    for value, timestamp, valid_to in MOVE_WITH_NULLS:
        put_to_store(vs, "k", value, timestamp, valid_to)
    verify_repeat_timestamps(vs.store)  # Kafka checks the very same values here


def test_should_fall_through_to_existing_older_segment_as_latest_during_put(vs):
    put_to_store(vs, "k", None, SI - 5, UNDEFINED)
    put_to_store(vs, "k", "vn6", SI - 6, SI - 5)
    put_to_store(vs, "k", "vp20", SI + 20, UNDEFINED)
    put_to_store(vs, "k", None, SI + 10, SI + 20)
    put_to_store(vs, "k", None, SI - 1, SI + 10)
    put_to_store(vs, "k", "vn2", SI - 2, SI - 1)

    for store in both(vs):
        verify_get_value(store, "k", "vp20", SI + 20)
        verify_as_of_value(store, "k", SI + 30, "vp20", SI + 20, UNDEFINED)
        verify_as_of_null(store, "k", SI + 12)
        verify_as_of_null(store, "k", SI)
        verify_as_of_null(store, "k", SI - 1)
        verify_as_of_value(store, "k", SI - 2, "vn2", SI - 2, SI - 1)
        verify_as_of_null(store, "k", SI - 5)
        verify_as_of_value(store, "k", SI - 6, "vn6", SI - 6, SI - 5)


def test_should_put_non_latest_tombstone_into_new_segment_with_valid_to(vs):
    put_to_store(vs, "k", "vp30", SI + 30, UNDEFINED)
    put_to_store(vs, "k", None, SI - 10, SI + 30)  # a tombstone valid to SI + 30
    put_to_store(vs, "k", "vn5", SI - 5, SI + 30)
    put_to_store(vs, "k", "vn1", SI - 1, SI + 30)
    put_to_store(vs, "k", None, SI - 2, SI - 1)

    for store in both(vs):
        verify_get_value(store, "k", "vp30", SI + 30)
        verify_as_of_value(store, "k", SI + 10, "vn1", SI - 1, SI + 30)
        verify_as_of_value(store, "k", SI - 1, "vn1", SI - 1, SI + 30)
        verify_as_of_null(store, "k", SI - 2)
        verify_as_of_value(store, "k", SI - 5, "vn5", SI - 5, SI - 2)
        verify_as_of_null(store, "k", SI - 10)


def test_should_delete(vs):
    put_to_store(vs, "k", "vp20", SI + 20, UNDEFINED)
    put_to_store(vs, "k", "vp10", SI + 10, SI + 20)
    put_to_store(vs, "k", "vn10", SI - 10, SI + 10)
    put_to_store(vs, "k", "vn2", SI - 2, SI + 10)

    deleted = vs.delete("k", SI - 5)  # from a segment
    assert (deleted.value, deleted.timestamp) == ("vn10", SI - 10)

    deleted = vs.delete("k", SI + 10)  # an existing timestamp
    assert (deleted.value, deleted.timestamp) == ("vp10", SI + 10)

    deleted = vs.delete("k", SI + 10)  # the same timestamp again
    assert deleted is None

    deleted = vs.delete("k", SI + 25)  # the latest value
    assert (deleted.value, deleted.timestamp) == ("vp20", SI + 20)


def test_should_not_put_expired(vs):
    put_to_store(vs, "k", "v", HISTORY_RETENTION + 10, UNDEFINED)

    # grace period has not elapsed
    put_to_store(vs, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD, UNDEFINED)
    verify_get_value(vs.store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)

    # grace period has elapsed, so this put does not take place
    put_to_store(vs, "k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD, NOT_PUT)
    verify_get_null(vs.store, "k2")

    assert vs.dropped() == 1


def test_should_not_delete_expired(vs):
    put_to_store(vs, "k1", "v1", 1, UNDEFINED)
    put_to_store(vs, "k2", "v2", 1, UNDEFINED)
    put_to_store(vs, "kother", "vother", HISTORY_RETENTION + 10, UNDEFINED)

    # grace period has not elapsed
    deleted = vs.delete("k1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    assert (deleted.value, deleted.timestamp) == ("v1", 1)
    verify_get_null(vs.store, "k1")

    # grace period has elapsed, so this delete does not take place
    deleted = vs.delete("k2", HISTORY_RETENTION + 9 - GRACE_PERIOD)
    assert deleted is None  # even though the record exists: the delete did not take place
    verify_get_value(vs.store, "k2", "v2", 1)

    assert vs.dropped() == 1


def test_should_get_from_older_segments(vs):
    # a different key creates three segments
    put_to_store(vs, "ko", None, SI - 10, UNDEFINED)
    put_to_store(vs, "ko", None, 2 * SI - 10, UNDEFINED)
    put_to_store(vs, "ko", None, 3 * SI - 10, UNDEFINED)

    # null after visiting every segment
    verify_as_of_null(vs.store, "k", SI - 20)

    # data in the first segment
    put_to_store(vs, "k", "v", SI - 20, UNDEFINED)
    put_to_store(vs, "k", None, SI - 10, UNDEFINED)

    verify_as_of_null(vs.store, "k", SI - 30)
    verify_as_of_value(vs.store, "k", SI - 15, "v", SI - 20, SI - 10)
    verify_as_of_null(vs.store, "k", SI - 5)

    # data in the third segment
    put_to_store(vs, "k", "v2", 3 * SI - 20, UNDEFINED)
    put_to_store(vs, "k", None, 3 * SI - 10, UNDEFINED)

    # a non-empty later segment does not change what the earlier one answers
    for store in both(vs):
        verify_as_of_null(store, "k", SI - 30)
        verify_as_of_value(store, "k", SI - 15, "v", SI - 20, SI - 10)
        verify_as_of_null(store, "k", SI - 5)


def test_should_not_get_expired(vs):
    put_to_store(vs, "k", "v_old", 0, UNDEFINED)
    put_to_store(vs, "k", "v", SI - 10, UNDEFINED)

    # old record has not yet expired
    verify_as_of_value(vs.store, "k", SI - 11, "v_old", 0, SI - 10)

    put_to_store(vs, "ko", "vo", HISTORY_RETENTION + SI - 11, UNDEFINED)

    # old record still has not yet expired
    verify_as_of_value(vs.store, "k", SI - 11, "v_old", 0, SI - 10)

    put_to_store(vs, "ko", "vo2", HISTORY_RETENTION + SI - 10, UNDEFINED)

    # old record is expired now
    for store in both(vs):
        verify_as_of_null(store, "k", SI - 11)


def test_should_get_expired_if_latest_value(vs):
    put_to_store(vs, "k", "v", 1, UNDEFINED)
    put_to_store(vs, "ko", "vo_old", 1, UNDEFINED)
    put_to_store(vs, "ko", "vo_new", HISTORY_RETENTION + 12, UNDEFINED)

    for store in both(vs):
        # an expired get of a key whose latest version satisfies the bound still answers
        verify_as_of_value(store, "k", 10, "v", 1, UNDEFINED)
        # the same get of a key whose latest version does not, does not
        verify_as_of_null(store, "ko", 10)


def test_should_distinguish_empty_and_null(vs):
    put_to_store(vs, "k", None, SI + 20, UNDEFINED)
    put_to_store(vs, "k", None, SI - 10, SI + 20)
    put_to_store(vs, "k", None, SI - 1, SI + 20)
    put_to_store(vs, "k", None, SI + 1, SI + 20)
    put_to_store(vs, "k", None, SI + 10, SI + 20)
    # the empty string serializes to empty bytes, which is not a tombstone
    put_to_store(vs, "k", "", SI + 5, SI + 10)
    put_to_store(vs, "k", "", SI - 5, SI - 1)
    put_to_store(vs, "k", "", SI - 6, SI - 5)

    for store in both(vs):
        verify_get_null(store, "k")
        verify_as_of_null(store, "k", SI + 30)
        verify_as_of_null(store, "k", SI + 15)
        verify_as_of_value(store, "k", SI + 6, "", SI + 5, SI + 10)
        verify_as_of_null(store, "k", SI + 2)
        verify_as_of_null(store, "k", SI)
        verify_as_of_null(store, "k", SI - 1)
        verify_as_of_value(store, "k", SI - 5, "", SI - 5, SI - 1)
        verify_as_of_value(store, "k", SI - 6, "", SI - 6, SI - 5)
        verify_as_of_null(store, "k", SI - 8)


def test_should_get_record_versions_from_older_segments(vs):
    # a different key creates three segments
    put_to_store(vs, "ko", None, SI - 10, UNDEFINED)
    put_to_store(vs, "ko", None, 2 * SI - 10, UNDEFINED)
    put_to_store(vs, "ko", None, 3 * SI - 10, UNDEFINED)

    # nothing after visiting every segment (the key does not exist)
    verify_versions_null(vs.store, "k", SI - 20, SI)

    # data in the first segment
    put_to_store(vs, "k", "v1", SI - 30, UNDEFINED)
    put_to_store(vs, "k", "v2", SI - 25, UNDEFINED)
    put_to_store(vs, "k", None, SI - 20, UNDEFINED)
    put_to_store(vs, "k", None, SI - 15, UNDEFINED)
    put_to_store(vs, "k", "v3", SI - 10, UNDEFINED)
    put_to_store(vs, "k", "v4", SI - 5, UNDEFINED)

    s = vs.store
    all_values = ["v4", "v3", "v2", "v1"]
    all_times = [SI - 5, SI - 10, SI - 25, SI - 30]
    all_tos = [UNDEFINED, SI - 5, SI - 20, SI - 25]
    verify_versions_null(s, "k", SI - 40, SI - 35)  # before any value
    verify_versions(s, "k", SI - 30, SI - 5, ANY, all_values, all_times, all_tos)
    verify_versions(s, "k", MIN_LONG, MAX_LONG, ANY, all_values, all_times, all_tos)
    # only the latest (from the latest values)
    verify_versions(s, "k", SI - 4, SI, ANY, ["v4"], [SI - 5], [UNDEFINED])
    verify_versions(s, "k", SI - 5, SI - 5, ANY, ["v4"], [SI - 5], [UNDEFINED])
    verify_versions(s, "k", SI - 4, SI - 4, ANY, ["v4"], [SI - 5], [UNDEFINED])
    # before the tombstones
    verify_versions(
        s, "k", SI - 31, SI - 21, ANY, ["v2", "v1"], [SI - 25, SI - 30], [SI - 20, SI - 25]
    )
    # a range covering both tombstones
    verify_versions(s, "k", SI - 24, SI - 11, ANY, ["v2"], [SI - 25], [SI - 20])
    # after the tombstones
    verify_versions(
        s, "k", SI - 11, SI - 4, ANY, ["v4", "v3"], [SI - 5, SI - 10], [UNDEFINED, SI - 5]
    )
    # every version valid in the range, also those put before it
    verify_versions(s, "k", SI - 26, SI - 5, ANY, all_values, all_times, all_tos)
    # a version starting at the range's upper bound
    verify_versions(s, "k", SI - 15, SI - 10, ANY, ["v3"], [SI - 10], [SI - 5])
    # no version valid in the range
    verify_versions_null(s, "k", SI - 19, SI - 16)

    # data in the third segment
    put_to_store(vs, "k", "v5", 3 * SI - 30, UNDEFINED)
    put_to_store(vs, "k", None, 3 * SI - 20, UNDEFINED)

    # a non-empty earlier segment does not change what a later one answers
    for store in both(vs):
        verify_versions_null(store, "k", SI - 40, SI - 35)
        verify_versions(store, "k", SI - 30, SI - 26, ANY, ["v1"], [SI - 30], [SI - 25])
        verify_versions_null(store, "k", SI - 19, SI - 16)


def test_should_get_record_versions_in_ascending_order(vs):
    put_to_store(vs, "k", "v1", SI - 30, UNDEFINED)
    put_to_store(vs, "k", "v2", SI - 25, UNDEFINED)
    put_to_store(vs, "k", "v3", SI - 10, UNDEFINED)
    put_to_store(vs, "k", "v4", SI - 5, UNDEFINED)

    verify_versions(
        vs.store,
        "k",
        SI - 30,
        SI - 5,
        ResultOrder.ASCENDING,
        ["v1", "v2", "v3", "v4"],
        [SI - 30, SI - 25, SI - 10, SI - 5],
        [SI - 25, SI - 10, SI - 5, UNDEFINED],
    )


def test_should_get_record_versions_from_multiple_old_segments_in_ascending_order(vs):
    put_to_store(vs, "k", "v1", SI - 10, UNDEFINED)
    put_to_store(vs, "k", "v2", SI - 5, UNDEFINED)
    put_to_store(vs, "k", "v3", 2 * SI - 10, UNDEFINED)
    put_to_store(vs, "k", "v4", 2 * SI - 5, UNDEFINED)

    for store in both(vs):
        verify_versions(
            store,
            "k",
            MIN_LONG,
            MAX_LONG,
            ResultOrder.ASCENDING,
            ["v1", "v2", "v3", "v4"],
            [SI - 10, SI - 5, 2 * SI - 10, 2 * SI - 5],
            [SI - 5, 2 * SI - 10, 2 * SI - 5, UNDEFINED],
        )


def test_should_not_get_expired_record_versions(vs):
    put_to_store(vs, "k", "v_old", 0, UNDEFINED)
    put_to_store(vs, "k", "v", SI - 10, UNDEFINED)

    # old record has not yet expired
    verify_versions(vs.store, "k", 0, SI - 11, ANY, ["v_old"], [0], [SI - 10])

    put_to_store(vs, "ko", "vo", HISTORY_RETENTION + SI - 11, UNDEFINED)

    # old record still has not yet expired
    verify_versions(vs.store, "k", 0, SI - 11, ANY, ["v_old"], [0], [SI - 10])

    put_to_store(vs, "ko", "vo2", HISTORY_RETENTION + SI - 10, UNDEFINED)

    # old record is expired now
    verify_versions_null(vs.store, "k", 0, SI - 11)


def test_should_get_expired_if_latest_version_value(vs):
    put_to_store(vs, "k", "v", 1, UNDEFINED)
    put_to_store(vs, "ko", "vo_old", 1, UNDEFINED)
    put_to_store(vs, "ko", "vo_new", HISTORY_RETENTION + 12, UNDEFINED)

    # an expired range of a key whose latest version satisfies the bound still answers
    verify_versions(vs.store, "k", 0, 10, ANY, ["v"], [1], [UNDEFINED])
    # the same range of a key whose latest version does not, does not
    verify_versions_null(vs.store, "ko", 0, 10)


def put_all(vs: Versioned, records: list[tuple[str, str | None, int]]) -> None:
    """Kafka's restore input: changelog records (key, value, timestamp), put in order."""
    if vs.logged is None:
        pytest.skip("a store without a changelog is not restored")
    for key, value, timestamp in records:
        vs.store.put(key, value, timestamp)
        vs.after_write()


def test_should_restore(vs):
    put_all(vs, [("k", value, ts) for value, ts, _ in MOVE_TO_OLDER_SEGMENT])
    verify_moved_to_older_segment(vs.restored())


def test_should_restore_with_nulls(vs):
    put_all(vs, [("k", value, ts) for value, ts, _ in MOVE_WITH_NULLS])
    verify_repeat_timestamps(vs.restored())


def test_should_restore_with_nulls_and_repeat_timestamps(vs):
    put_all(vs, [("k", value, ts) for value, ts, _ in REPEAT_TIMESTAMPS])
    verify_repeat_timestamps(vs.restored())


def test_should_restore_multiple_batches(vs):
    put_all(vs, [("k", None, SI - 20), ("k", "vn10", SI - 10), ("k", None, SI - 1)])
    vs.commit()
    put_all(vs, [("k", None, SI + 1), ("k", "vp10", SI + 10), ("k", None, SI + 20)])

    store = vs.restored()
    verify_get_null(store, "k")
    verify_as_of_null(store, "k", SI + 30)
    verify_as_of_value(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
    verify_as_of_null(store, "k", SI + 5)
    verify_as_of_null(store, "k", SI + 2)
    verify_as_of_null(store, "k", SI)
    verify_as_of_null(store, "k", SI - 1)
    verify_as_of_value(store, "k", SI - 5, "vn10", SI - 10, SI - 1)
    verify_as_of_null(store, "k", SI - 15)


def test_should_not_restore_expired(vs):
    put_all(
        vs,
        [
            ("k", "v", HISTORY_RETENTION + 10),
            ("k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD),  # grace not elapsed
            ("k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD),  # grace elapsed: not stored
        ],
    )
    store = vs.restored()
    verify_get_value(store, "k", "v", HISTORY_RETENTION + 10)
    verify_get_value(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    verify_get_null(store, "k2")


def test_should_restore_even_if_record_would_be_expired_by_end_of_batch(vs):
    put_all(
        vs,
        [
            ("k2", "v2", HISTORY_RETENTION - GRACE_PERIOD),  # older than grace by the end
            ("k", "v", HISTORY_RETENTION + 10),
        ],
    )
    store = vs.restored()
    verify_get_value(store, "k2", "v2", HISTORY_RETENTION - GRACE_PERIOD)
    verify_get_value(store, "k", "v", HISTORY_RETENTION + 10)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_should_allow_zero_history_retention(variant, tmp_path):
    vs = Versioned(variant, tmp_path, 0, SEGMENT_INTERVAL)
    b = BASE_TIMESTAMP
    # put and get
    put_to_store(vs, "k", "v", b, UNDEFINED)
    verify_get_value(vs.store, "k", "v", b)
    verify_as_of_value(vs.store, "k", b, "v", b, UNDEFINED)
    verify_as_of_value(vs.store, "k", b + 1, "v", b, UNDEFINED)  # a query "in the future"

    # update the record at the same timestamp
    put_to_store(vs, "k", "updated", b, UNDEFINED)
    verify_get_value(vs.store, "k", "updated", b)
    verify_as_of_value(vs.store, "k", b, "updated", b, UNDEFINED)

    # a new version
    put_to_store(vs, "k", "v2", b + 2, UNDEFINED)
    verify_get_value(vs.store, "k", "v2", b + 2)
    verify_as_of_value(vs.store, "k", b + 2, "v2", b + 2, UNDEFINED)

    # a query in the past (history retention expired) returns null
    verify_as_of_null(vs.store, "k", b + 1)

    # delete the key
    vs.delete("k", b + 3)
    verify_get_null(vs.store, "k")

    # a put in the past (grace period expired) does not update the store
    put_to_store(vs, "k2", "v", b + 2, NOT_PUT)
    verify_get_null(vs.store, "k2")
    assert vs.dropped() == 1
    vs.close()
