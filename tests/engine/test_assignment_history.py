"""The assignment history: events between two placements, their storage in the application
directory, and ``streamtide status --history`` rendering them with ISO times."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from streamtide.cli import main
from streamtide.config import StreamsConfig
from streamtide.engine.app_dir import AppDirectory, app_dir_for
from streamtide.engine.assignment_history import (
    EventKind,
    HistoryEvent,
    MoveReason,
    Placement,
    TaskRestore,
    changes,
)
from streamtide.engine.status import read_status

AT = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _kinds(events: list[HistoryEvent]) -> list[tuple]:
    return [(e.kind, e.task, e.source, e.target, e.reason) for e in events]


def test_a_new_executor_warms_up_then_takes_the_task_over() -> None:
    before = Placement({"1", "2"}, {"0_0": "1", "0_1": "2"}, {"2": {"0_0"}, "1": {"0_1"}})
    joined = Placement(
        {"1", "2", "3"},
        {"0_0": "1", "0_1": "2"},
        {"2": {"0_0"}, "1": {"0_1"}},
        {"3": {"0_1"}},
    )
    first = changes(7, AT, before, joined, lags={("3", "0_1"): 40})
    assert _kinds(first) == [
        (EventKind.EXECUTOR_JOINED, None, None, "3", None),
        (EventKind.WARMUP, "0_1", None, "3", None),
    ]
    assert first[1].lag == 40
    moved = Placement({"1", "2", "3"}, {"0_0": "1", "0_1": "3"}, {"2": {"0_0"}, "1": {"0_1"}}, {})
    second = changes(
        8, AT + 1000, joined, moved, lags={("3", "0_1"): 2}, restores={"0_1": TaskRestore(2, 5)}
    )
    assert _kinds(second) == [(EventKind.MOVE, "0_1", "2", "3", MoveReason.WARMUP_CAUGHT_UP)]
    assert (second[0].lag, second[0].restored_records, second[0].restore_ms) == (2, 2, 5)


def test_lost_and_removed_executors_hand_their_tasks_to_standbys() -> None:
    before = Placement(
        {"1", "2", "3"}, {"0_0": "1", "0_1": "2", "0_2": "3"}, {"2": {"0_0"}, "1": {"0_2"}}
    )
    after = Placement({"2"}, {"0_0": "2", "0_1": "2", "0_2": "2"}, {}, {})
    events = changes(3, AT, before, after, removed=frozenset({"3"}))
    assert _kinds(events) == [
        (EventKind.EXECUTOR_LOST, None, "1", None, None),
        (EventKind.EXECUTOR_REMOVED, None, "3", None, None),
        (EventKind.MOVE, "0_0", "1", "2", MoveReason.EXECUTOR_LOST),
        (EventKind.MOVE, "0_2", "3", "2", MoveReason.EXECUTOR_REMOVED),
    ]


def test_nothing_changed_records_nothing_and_the_first_batch_no_joins() -> None:
    placement = Placement({"1"}, {"0_0": "1"}, {}, {})
    assert changes(1, AT, placement, placement) == []
    assert changes(0, AT, Placement(), placement) == []


def test_events_round_trip_through_dicts() -> None:
    event = HistoryEvent(4, AT, EventKind.MOVE, "0_3", "1", "2", MoveReason.REBALANCE, 0, 9, 1)
    assert HistoryEvent.from_dict(json.loads(json.dumps(event.as_dict()))) == event


def test_the_history_file_keeps_the_latest_events(tmp_path: Path) -> None:
    app_dir = AppDirectory(tmp_path, "app")
    app_dir.take_epoch()
    for batch in range(25):
        app_dir.append_history([{"batch": batch, "at": AT, "kind": "move"}], keep=10)
    assert len((tmp_path / "history.jsonl").read_bytes().splitlines()) <= 20
    assert [e["batch"] for e in app_dir.read_history(3)] == [22, 23, 24]
    # cut back to 10 when it held 21, then 4 more appended
    assert [e["batch"] for e in app_dir.read_history(100)] == list(range(11, 25))
    with open(tmp_path / "history.jsonl", "ab") as out:
        out.write(b'{"batch": 25, "at"')  # cut short by a crash while appending
    assert app_dir.read_history(1)[0]["batch"] == 24


def test_status_shows_the_history_with_iso_times(tmp_path: Path) -> None:
    config = StreamsConfig(application_id="hist", log=f"file://{tmp_path / 'log'}")
    app_dir = AppDirectory(app_dir_for(config), "hist")
    app_dir.take_epoch()
    move = HistoryEvent(5, AT, EventKind.MOVE, "0_1", "1", "3", MoveReason.EXECUTOR_LOST, 0, 12, 3)
    app_dir.append_history([move.as_dict()])
    assert read_status(config, history=20)["history"] == [move.as_dict()]
    runner = CliRunner()
    args = ["status", "--application-id", "hist", "--log", config.log, "--history", "20"]
    shown = runner.invoke(main, [*args, "--json"])
    assert shown.exit_code == 0, shown.output
    (event,) = json.loads(shown.output)["history"]
    assert event["at_iso"].startswith("2026-01-01T00:00:00") and event["reason"] == "executor lost"
