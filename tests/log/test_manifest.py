"""Manifest entries, partition state and checkpoints (``log/manifest.py``)."""

from __future__ import annotations

import json

import pytest

from streamtide.errors import UnsupportedVersionError
from streamtide.log import LogError
from streamtide.log.manifest import (
    PartitionState,
    SealedSegment,
    checkpoint_number,
    entry_name,
    seal_entry,
    truncate_entry,
)


def _seal(state: PartitionState, name: str, count: int, seal_id: str | None = None) -> None:
    seg = SealedSegment(name, state.end_offset, count, seal_id or f"s-{name}")
    state.apply(seal_entry(seg, "w", 0), f"entry {state.next_entry}")


def _state(*counts: int) -> PartitionState:
    state = PartitionState()
    for i, count in enumerate(counts):
        _seal(state, f"seg{i}", count)
    return state


def test_entry_and_checkpoint_names() -> None:
    assert entry_name(7) == "00000000000000000007.json"
    assert checkpoint_number(entry_name(123)) == 123
    assert checkpoint_number(".tmp-x-00000000000000000007.json") is None


def test_seal_entries_assign_dense_offsets() -> None:
    state = _state(3, 0, 2)
    assert (state.next_entry, state.begin_offset, state.end_offset) == (3, 0, 5)
    assert [(s.base_offset, s.record_count) for s in state.segments] == [(0, 3), (3, 0), (3, 2)]
    assert state.by_seal_id["s-seg2"].base_offset == 3
    assert state.by_name["seg0"].seal_id == "s-seg0"


def test_seal_entry_at_a_wrong_base_offset_is_corruption() -> None:
    state = _state(3)
    bad = seal_entry(SealedSegment("x", 1, 1, "x"), "w", 0)
    with pytest.raises(LogError, match="corrupt manifest"):
        state.apply(bad, "entry 1")


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"{not json", LogError, "corrupt"),
        (b"[1]", LogError, "not a JSON object"),
        (json.dumps({"v": 1, "kind": "what"}).encode(), LogError, "unknown kind"),
        (json.dumps({"v": 1, "kind": "seal"}).encode(), LogError, "lacks field"),
        (json.dumps({"v": 99, "kind": "seal"}).encode(), UnsupportedVersionError, "version"),
    ],
)
def test_bad_entries_are_reported(data: bytes, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        PartitionState().apply(data, "e")


def test_covering_finds_the_overlapping_non_empty_segments() -> None:
    state = _state(10, 0, 10, 5)  # [0,10) [10,10) [10,20) [20,25)
    names = lambda a, b: [s.name for s in state.covering(a, b)]  # noqa: E731
    assert names(0, 25) == ["seg0", "seg2", "seg3"]
    assert names(10, 11) == ["seg2"]
    assert names(9, 10) == ["seg0"]
    assert names(19, 21) == ["seg2", "seg3"]
    assert names(25, 25) == [] and names(5, 5) == []


def test_truncation_plan_and_apply() -> None:
    state = _state(10, 10, 10)
    assert state.plan_truncation(0) == (0, [])
    assert state.plan_truncation(15) == (10, ["seg0"])
    assert state.plan_truncation(20) == (20, ["seg0", "seg1"])
    assert state.plan_truncation(30) == (30, ["seg0", "seg1", "seg2"])
    dropped = state.apply(truncate_entry(20, ["seg0", "seg1"]), "t")
    assert dropped == ["seg0", "seg1"]
    assert (state.begin_offset, state.end_offset) == (20, 30)
    assert "s-seg0" not in state.by_seal_id and "seg1" not in state.by_name
    assert [s.name for s in state.covering(20, 30)] == ["seg2"]


def test_checkpoint_round_trip_equals_replaying_entries() -> None:
    state = _state(4, 0, 6, 3)
    state.apply(truncate_entry(4, ["seg0"]), "t")
    back = PartitionState.from_checkpoint(state.to_checkpoint(), "cp")
    for attr in ("next_entry", "begin_offset", "end_offset", "segments", "bases"):
        assert getattr(back, attr) == getattr(state, attr)
    assert back.by_seal_id == state.by_seal_id and back.by_name == state.by_name
    assert back.checkpointed_at == back.next_entry
    _seal(back, "more", 2)
    assert back.end_offset == 15


def test_truncating_everything_keeps_the_end() -> None:
    state = _state(4, 6)
    state.apply(truncate_entry(10, ["seg0", "seg1"]), "t")
    assert (state.begin_offset, state.end_offset, state.segments) == (10, 10, [])
    back = PartitionState.from_checkpoint(state.to_checkpoint(), "cp")
    assert (back.begin_offset, back.end_offset) == (10, 10)


def test_corrupt_checkpoint_is_a_log_error() -> None:
    good = json.loads(_state(3).to_checkpoint())
    good["end_offset"] = 7
    with pytest.raises(LogError, match="corrupt manifest checkpoint"):
        PartitionState.from_checkpoint(json.dumps(good).encode(), "cp")
    with pytest.raises(LogError):
        PartitionState.from_checkpoint(b'{"v": 1}', "cp")
