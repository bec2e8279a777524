"""The work units' transactional ids: handed out per slot and stage, recorded before use, and
fenced before a task they may hold runs under another id (the broker side is in
``test_kafka_zombie_unit``)."""

from __future__ import annotations

from typing import Any

import pytest

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.unit_ids import UnitIds, UnitKey

A, B = UnitKey("e1", 0, 0), UnitKey("e2", 0, 0)


class Recorder:
    """What the ids saved and fenced, in order (``events``), and the last record."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.saved: dict[str, Any] | None = None

    def save(self, data: dict[str, Any]) -> None:
        self.saved = data
        self.events.append(("save", sorted(data["unfenced"])))

    def fence(self, ids: list[str]) -> None:
        self.events.append(("fence", list(ids)))

    def ids(self, saved: dict[str, Any] | None = None) -> UnitIds:
        return UnitIds("app", saved, self.save, self.fence)


def test_a_task_that_stays_keeps_its_units_id_and_nothing_is_fenced() -> None:
    rec = Recorder()
    ids = rec.ids()
    first = ids.ids_for({A: ["0_0", "0_1"], B: ["0_2"]})
    assert first == {A: "app-unit-e1-0-s0-g0", B: "app-unit-e2-0-s0-g0"}
    assert rec.events == [("save", ["app-unit-e1-0-s0-g0", "app-unit-e2-0-s0-g0"])]
    assert ids.ids_for({A: ["0_0", "0_1"], B: ["0_2"]}) == first
    assert ids.ids_for({A: ["0_0"], B: ["0_2"]}) == first  # a task not run now moved nowhere
    assert len(rec.events) == 1  # nothing new to record


def test_a_moved_task_fences_the_id_that_held_it_after_the_new_ids_are_recorded() -> None:
    rec = Recorder()
    ids = rec.ids()
    ids.ids_for({A: ["0_0", "0_1"], B: ["0_2"]})
    rec.events.clear()
    moved = ids.ids_for({A: ["0_0"], B: ["0_1", "0_2"]})  # 0_1 left A
    assert moved == {A: "app-unit-e1-0-s0-g1", B: "app-unit-e2-0-s0-g0"}
    assert rec.events == [
        ("save", ["app-unit-e1-0-s0-g0", "app-unit-e1-0-s0-g1", "app-unit-e2-0-s0-g0"]),
        ("fence", ["app-unit-e1-0-s0-g0"]),
        ("save", ["app-unit-e1-0-s0-g1", "app-unit-e2-0-s0-g0"]),
    ]
    # B's id may now hold 0_1 as well: 0_1 going back to A fences it
    rec.events.clear()
    back = ids.ids_for({A: ["0_0", "0_1"], B: ["0_2"]})
    assert back == {A: "app-unit-e1-0-s0-g1", B: "app-unit-e2-0-s0-g1"}
    assert ("fence", ["app-unit-e2-0-s0-g0"]) in rec.events


def test_an_executor_that_left_has_its_ids_fenced_before_its_tasks_run_elsewhere() -> None:
    rec = Recorder()
    ids = rec.ids()
    ids.ids_for({A: ["0_0"], B: ["0_1"]})
    rec.events.clear()
    assert ids.ids_for({A: ["0_0", "0_1"]}) == {A: "app-unit-e1-0-s0-g0"}
    assert ("fence", ["app-unit-e2-0-s0-g0"]) in rec.events
    assert ids.unfenced() == ["app-unit-e1-0-s0-g0"]


def test_stages_have_ids_of_their_own() -> None:
    rec = Recorder()
    got = rec.ids().ids_for({A: ["0_0"], UnitKey("e1", 0, 1): ["1_0"]})
    assert got[UnitKey("e1", 0, 1)] == "app-unit-e1-0-s1-g0" != got[A]


def test_a_new_driver_fences_what_was_left_unfenced_and_starts_new_generations(
    tmp_path,
) -> None:
    app_dir = AppDirectory(tmp_path / "app", "app")
    app_dir.take_epoch()
    rec = Recorder()
    first = UnitIds("app", None, app_dir.write_unit_ids, rec.fence)
    first.start()
    first.ids_for({A: ["0_0"], B: ["0_1"]})
    # the driver dies; the next one reads the record back
    second = UnitIds("app", app_dir.read_unit_ids(), app_dir.write_unit_ids, rec.fence)
    second.start()
    assert rec.events == [("fence", ["app-unit-e1-0-s0-g0", "app-unit-e2-0-s0-g0"])]
    assert second.unfenced() == []
    assert second.ids_for({A: ["0_0"], B: ["0_1"]}) == {
        A: "app-unit-e1-0-s0-g1",
        B: "app-unit-e2-0-s0-g1",
    }
    assert app_dir.read_unit_ids()["unfenced"].keys() == {
        "app-unit-e1-0-s0-g1",
        "app-unit-e2-0-s0-g1",
    }


def test_a_fence_that_fails_leaves_the_ids_recorded_for_the_next_driver() -> None:
    rec = Recorder()

    def failing(ids: list[str]) -> None:
        raise OSError("the broker went away")

    ids = UnitIds("app", None, rec.save, failing)
    ids.ids_for({A: ["0_0", "0_1"]})
    with pytest.raises(OSError):
        ids.ids_for({A: ["0_0"], B: ["0_1"]})
    assert rec.saved is not None
    assert set(rec.saved["unfenced"]) >= {"app-unit-e1-0-s0-g0", "app-unit-e2-0-s0-g0"}
