"""The per-task checkpoint file (state/checkpoint.py): atomic, checksummed, strict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamtide.state.checkpoint import (
    CheckpointError,
    TaskCheckpoint,
    checkpoint_path,
    delete_checkpoint,
    read_checkpoint,
    write_checkpoint,
)


def test_round_trip_and_replace(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path) is None
    first = TaskCheckpoint({"a": 3, "b": 0}, {"offsets": {"in:0": 7}}, batch=4, commits=2)
    write_checkpoint(tmp_path, first)
    assert read_checkpoint(tmp_path) == first
    second = TaskCheckpoint({"a": 9})
    write_checkpoint(tmp_path / "missing-parent", second, fsync=False)
    write_checkpoint(tmp_path, second)
    assert read_checkpoint(tmp_path) == second
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == [checkpoint_path(tmp_path).name]
    delete_checkpoint(tmp_path)
    delete_checkpoint(tmp_path)
    assert read_checkpoint(tmp_path) is None


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda text: text[: len(text) // 2], "corrupt"),
        (lambda text: "", "corrupt"),
        (lambda text: text.replace('\\"a\\": 3', '\\"a\\": 4'), "checksum"),
        (lambda text: json.dumps({"nothing": 1}), "corrupt"),
    ],
)
def test_damaged_files_are_reported(tmp_path: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    write_checkpoint(tmp_path, TaskCheckpoint({"a": 3}))
    path = checkpoint_path(tmp_path)
    path.write_text(damage(path.read_text()))
    with pytest.raises(CheckpointError, match=message):
        read_checkpoint(tmp_path)


def _forge(tmp_path: Path, body: dict) -> None:  # type: ignore[type-arg]
    import hashlib

    text = json.dumps(body, sort_keys=True)
    checkpoint_path(tmp_path).write_text(
        json.dumps({"body": text, "sha256": hashlib.sha256(text.encode()).hexdigest()})
    )


def test_unknown_version_and_bad_offsets_are_rejected(tmp_path: Path) -> None:
    _forge(tmp_path, {"version": 99, "offsets": {}})
    with pytest.raises(CheckpointError, match="version"):
        read_checkpoint(tmp_path)
    _forge(tmp_path, {"version": 1, "offsets": {"a": -1}})
    with pytest.raises(CheckpointError, match="offsets"):
        read_checkpoint(tmp_path)
    _forge(tmp_path, {"version": 1, "offsets": {"a": "7"}})
    with pytest.raises(CheckpointError, match="offsets"):
        read_checkpoint(tmp_path)
