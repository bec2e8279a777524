"""Subscription and assignment records: round trips in every version, old and new readers."""

from __future__ import annotations

import math
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide.assignment import (
    LATEST_VERSION,
    AssignmentInfo,
    AssignorConfig,
    ClientState,
    CorruptMetadataError,
    SubscriptionInfo,
    TaskId,
    assign,
    peek_versions,
)
from streamtide.errors import UnsupportedVersionError

task_ids = st.builds(TaskId, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
small_task_ids = st.builds(TaskId, st.integers(0, 3), st.integers(0, 20))


@st.composite
def subscriptions(draw) -> SubscriptionInfo:
    held = draw(st.lists(task_ids, unique=True, max_size=12))
    split = draw(st.integers(0, len(held)))
    return SubscriptionInfo(
        client_id=draw(st.text(min_size=1, max_size=20)),
        host=draw(st.text(max_size=30)),
        slots=draw(st.integers(1, 2**31 - 1)),
        prev_active=frozenset(held[:split]),
        prev_standby=frozenset(held[split:]),
        offset_sums=draw(st.dictionaries(task_ids, st.integers(0, 2**63 - 1), max_size=8)),
    )


@st.composite
def assignments(draw) -> AssignmentInfo:
    tasks = draw(st.lists(task_ids, unique=True, max_size=15))
    a, b = sorted(draw(st.lists(st.integers(0, len(tasks)), min_size=2, max_size=2)))
    return AssignmentInfo(
        active=frozenset(tasks[:a]),
        standby=frozenset(tasks[a:b]),
        warmup=frozenset(tasks[b:]),
        error_code=draw(st.integers(-(2**31), 2**31 - 1)),
    )


SAMPLE_SUB = SubscriptionInfo(
    client_id="executor-7",
    host="10.0.0.7:4040",
    slots=2,
    prev_active=frozenset({TaskId(0, 1), TaskId(1, 0)}),
    prev_standby=frozenset({TaskId(0, 2), TaskId(2, 5)}),
    offset_sums={TaskId(0, 2): 900, TaskId(2, 5): 40, TaskId(0, 1): 1234},
)
SAMPLE_ASSIGNMENT = AssignmentInfo(
    active=frozenset({TaskId(0, 1)}),
    standby=frozenset({TaskId(0, 2)}),
    warmup=frozenset({TaskId(1, 3)}),
    error_code=0,
)


@settings(max_examples=100, deadline=None)
@given(subscriptions())
def test_subscription_round_trips_in_latest_version(info: SubscriptionInfo) -> None:
    data = info.encode()
    assert peek_versions(data) == (LATEST_VERSION, LATEST_VERSION)
    assert SubscriptionInfo.decode(data) == info


@settings(max_examples=100, deadline=None)
@given(subscriptions())
def test_subscription_version_1_drops_offset_sums(info: SubscriptionInfo) -> None:
    data = info.encode(version=1)
    assert peek_versions(data) == (1, LATEST_VERSION)
    decoded = SubscriptionInfo.decode(data)
    assert decoded.offset_sums == {}
    assert (decoded.client_id, decoded.host, decoded.slots) == (
        info.client_id,
        info.host,
        info.slots,
    )
    assert (decoded.prev_active, decoded.prev_standby) == (info.prev_active, info.prev_standby)


@settings(max_examples=100, deadline=None)
@given(assignments())
def test_assignment_round_trips_in_latest_version(info: AssignmentInfo) -> None:
    assert AssignmentInfo.decode(info.encode()) == info


@settings(max_examples=100, deadline=None)
@given(assignments())
def test_assignment_version_1_lists_warmups_as_standbys(info: AssignmentInfo) -> None:
    decoded = AssignmentInfo.decode(info.encode(version=1))
    assert decoded.active == info.active
    assert decoded.standby == info.standby | info.warmup
    assert decoded.warmup == frozenset()
    assert decoded.error_code == info.error_code


def test_version_1_subscription_has_unknown_standby_lags() -> None:
    ends = {TaskId(0, 2): 1000, TaskId(2, 5): 40}
    latest = SubscriptionInfo.decode(SAMPLE_SUB.encode()).client_state(ends)
    assert dict(latest.lags) == {TaskId(0, 2): 100, TaskId(2, 5): 0}
    old = SubscriptionInfo.decode(SAMPLE_SUB.encode(version=1)).client_state(ends)
    assert dict(old.lags) == {}
    assert old.lag(TaskId(0, 2)) == math.inf
    assert old.lag(TaskId(0, 1)) == 0  # ran it as active
    assert (old.slots, old.prev_active, old.prev_standby) == (
        2,
        SAMPLE_SUB.prev_active,
        SAMPLE_SUB.prev_standby,
    )


def test_client_state_treats_a_local_offset_beyond_the_end_as_a_full_restore() -> None:
    info = SubscriptionInfo(
        "c", "h", 1, prev_standby=frozenset({TaskId(0, 0)}), offset_sums={TaskId(0, 0): 80}
    )
    assert dict(info.client_state({TaskId(0, 0): 50}).lags) == {TaskId(0, 0): 50}
    assert dict(info.client_state({}).lags) == {}  # end unknown: lag unknown


def test_assignment_info_for_client_carries_its_part_of_an_assignment() -> None:
    tasks = [TaskId(0, p) for p in range(4)]
    clients = {"p1": ClientState(1, prev_active=frozenset(tasks)), "p2": ClientState(1)}
    config = AssignorConfig(acceptable_recovery_lag=100, max_warmup_replicas=1)
    result = assign(clients, tasks, tasks, config)
    info = AssignmentInfo.for_client(result, "p2", error_code=3)
    assert info == AssignmentInfo(warmup=frozenset({TaskId(0, 2)}), error_code=3)
    assert AssignmentInfo.decode(info.encode()) == info


def _with_version(data: bytes, version: int, latest: int) -> bytes:
    """``data`` re-framed as if a writer of another version had written it."""
    body = data[8:-4]
    framed = struct.pack(">ii", version, latest) + body
    return framed + struct.pack(">I", zlib.crc32(framed))


@pytest.mark.parametrize("record", [SAMPLE_SUB, SAMPLE_ASSIGNMENT])
def test_a_newer_version_is_rejected_naming_both_versions(record) -> None:
    future = _with_version(record.encode(), LATEST_VERSION + 1, LATEST_VERSION + 3)
    with pytest.raises(UnsupportedVersionError) as info:
        type(record).decode(future)
    message = str(info.value)
    assert f"version {LATEST_VERSION + 1}" in message
    assert f"1 to {LATEST_VERSION}" in message
    assert f"up to {LATEST_VERSION + 3}" in message


def test_a_newer_writer_using_an_old_version_is_read() -> None:
    """Version probing: a newer release writing version 1 for old readers is still readable."""
    data = _with_version(SAMPLE_ASSIGNMENT.encode(version=1), 1, LATEST_VERSION + 5)
    decoded = AssignmentInfo.decode(data)
    assert decoded.standby == SAMPLE_ASSIGNMENT.standby | SAMPLE_ASSIGNMENT.warmup


@pytest.mark.parametrize("record", [SAMPLE_SUB, SAMPLE_ASSIGNMENT])
def test_encoding_an_unknown_version_is_refused(record) -> None:
    for version in (0, LATEST_VERSION + 1):
        with pytest.raises(UnsupportedVersionError, match=f"version {version}"):
            record.encode(version=version)


@pytest.mark.parametrize("version", range(1, LATEST_VERSION + 1))
@pytest.mark.parametrize("record", [SAMPLE_SUB, SAMPLE_ASSIGNMENT])
def test_every_truncation_is_an_error(record, version: int) -> None:
    data = record.encode(version=version)
    for size in range(len(data)):
        with pytest.raises(CorruptMetadataError):
            type(record).decode(data[:size])


@pytest.mark.parametrize("version", range(1, LATEST_VERSION + 1))
@pytest.mark.parametrize("record", [SAMPLE_SUB, SAMPLE_ASSIGNMENT])
def test_every_flipped_bit_is_an_error_never_a_wrong_record(record, version: int) -> None:
    data = record.encode(version=version)
    for bit in range(len(data) * 8):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        # A flip in the high bits of the version field can look like a future version.
        with pytest.raises((CorruptMetadataError, UnsupportedVersionError)):
            type(record).decode(bytes(damaged))


@pytest.mark.parametrize("record", [SAMPLE_SUB, SAMPLE_ASSIGNMENT])
def test_trailing_bytes_are_an_error(record) -> None:
    data = record.encode()
    with pytest.raises(CorruptMetadataError):
        type(record).decode(data + b"\x00")
    # Even with a valid checksum over the extra bytes, the body must end where it ends.
    with pytest.raises(CorruptMetadataError, match="trailing"):
        type(record).decode(_with_version(data[:-4] + b"\x00\x00\x00\x00" + data[-4:], 2, 2))


def test_malformed_bodies_with_valid_checksums_are_errors() -> None:
    def framed(body: bytes, version: int = 2) -> bytes:
        head = struct.pack(">ii", version, 2) + body
        return head + struct.pack(">I", zlib.crc32(head))

    def tasks(*pairs: tuple[int, int]) -> bytes:
        return struct.pack(">i", len(pairs)) + b"".join(struct.pack(">ii", *p) for p in pairs)

    error = struct.pack(">i", 0)
    ok = tasks((0, 1)) + tasks() + tasks() + error
    assert AssignmentInfo.decode(framed(ok)).active == frozenset({TaskId(0, 1)})
    cases = {  # body -> what the error says
        "impossible count": struct.pack(">i", 1000) + tasks() + tasks() + error,
        "impossible count -1": struct.pack(">i", -1) + tasks() + tasks() + error,
        "negative task id": tasks((0, -1)) + tasks() + tasks() + error,
        "out of order": tasks((0, 2), (0, 1)) + tasks() + tasks() + error,
        "listed both": tasks((0, 1)) + tasks((0, 1)) + tasks() + error,
    }
    for message, body in cases.items():
        with pytest.raises(CorruptMetadataError, match=message):
            AssignmentInfo.decode(framed(body))
    bad_text = struct.pack(">i", 2) + b"\xff\xfe"
    with pytest.raises(CorruptMetadataError, match="UTF-8"):
        SubscriptionInfo.decode(
            framed(bad_text + bad_text + struct.pack(">i", 1) + tasks() + tasks(), 1)
        )
    zero_slots = struct.pack(">i", 1) + b"c" + struct.pack(">i", 0) + struct.pack(">i", 0)
    with pytest.raises(CorruptMetadataError, match="slots"):
        SubscriptionInfo.decode(framed(zero_slots + tasks() + tasks(), 1))


def test_impossible_headers_are_errors() -> None:
    data = SAMPLE_ASSIGNMENT.encode()
    for version, latest in ((0, 2), (-1, 2), (2, 1)):
        with pytest.raises(CorruptMetadataError, match="impossible versions"):
            AssignmentInfo.decode(_with_version(data, version, latest))
    with pytest.raises(TypeError):
        AssignmentInfo.decode("not bytes")  # type: ignore[arg-type]


def test_records_validate_their_fields() -> None:
    with pytest.raises(ValueError, match="client_id"):
        SubscriptionInfo("", "h", 1)
    with pytest.raises(ValueError, match="slots"):
        SubscriptionInfo("c", "h", 0)
    with pytest.raises(ValueError, match="both"):
        SubscriptionInfo("c", "h", 1, prev_active={TaskId(0, 0)}, prev_standby={TaskId(0, 0)})
    with pytest.raises(ValueError, match="offset sum"):
        SubscriptionInfo("c", "h", 1, offset_sums={TaskId(0, 0): -1})
    with pytest.raises(ValueError, match="32-bit"):
        AssignmentInfo(active={TaskId(2**31, 0)})
    with pytest.raises(ValueError, match="both"):
        AssignmentInfo(active={TaskId(0, 0)}, warmup={TaskId(0, 0)})
    with pytest.raises(ValueError, match="error_code"):
        AssignmentInfo(error_code=2**31)


@settings(max_examples=60, deadline=None)
@given(subscriptions(), st.data())
def test_random_damage_never_decodes_to_a_different_record(info: SubscriptionInfo, data) -> None:
    encoded = bytearray(info.encode())
    position = data.draw(st.integers(0, len(encoded) - 1))
    replacement = data.draw(st.binary(min_size=1, max_size=6))
    damaged = bytes(encoded[:position] + replacement + encoded[position + len(replacement) :])
    if damaged == bytes(encoded):
        return
    with pytest.raises((CorruptMetadataError, UnsupportedVersionError)):
        SubscriptionInfo.decode(damaged)
