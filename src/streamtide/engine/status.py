"""An application's status, read from its directory and the log: works while it runs or after.

Lags are computed now, from the log's end offsets and the committed offsets, so a stopped
application shows the input that has arrived since.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.engine.app_dir import AppDirectory, app_dir_for
from streamtide.errors import ConfigError, StreamtideError
from streamtide.log import is_kafka_url, open_log
from streamtide.task_id import TaskId


def read_status(config: StreamsConfig, history: int = 10) -> dict[str, Any]:
    """Tasks, partitions with their lag, standbys, the latest ``history`` batches and the
    latest ``history`` assignment-history events (task moves, warm-ups, standbys, executors
    joining and leaving; ``engine.assignment_history``)."""
    app_dir = AppDirectory(_existing_app_dir(config))
    recent = app_dir.recent_commits(max(1, history))
    moves = app_dir.read_history(history) if history else []
    if not recent:
        return {
            "application_id": config.application_id,
            "batches": [],
            "tasks": {},
            "history": moves,
        }
    commit = recent[-1]
    batch, progress = commit.batch, commit.progress
    partitions = _partitions(config, commit.tasks)
    tasks = {}
    for task, state in sorted(commit.tasks.items(), key=lambda item: TaskId.parse(item[0])):
        lag = sum(p["lag"] for p in partitions if p["task"] == task)
        tasks[task] = {
            "owner": commit.owners.get(task),
            "state": "caught-up" if lag == 0 else "lagging",
            "lag": lag,
            "stream_time": state.get("stream_time", -1),
            "restored_records": progress.get("restored_by_task", {}).get(task, 0),
        }
    return {
        "application_id": config.application_id,
        "last_batch": batch,
        "committed_at": progress.get("committed_at"),
        "tasks": tasks,
        "partitions": partitions,
        "standbys": progress.get("standbys", {}),
        "standby_note": progress.get("standby_note"),
        "batches": [c.progress for c in recent][-history:] if history else [],
        "history": moves,
    }


def _existing_app_dir(config: StreamsConfig) -> Path:
    """The application's directory; ConfigError naming what was looked for (and the
    applications that are there) if it never ran with this log (and state directory)."""
    root = app_dir_for(config)
    if root.is_dir():
        return root
    where = f"the log {config.log}"
    if is_kafka_url(config.log):
        where += f" and the state directory {config.state_dir}"
    known = (
        sorted(p.name for p in root.parent.iterdir() if p.is_dir()) if root.parent.is_dir() else []
    )
    found = f"applications found there: {', '.join(known)}" if known else "no application ran there"
    raise ConfigError(
        f"application {config.application_id!r} has never run with {where} ({root} does not "
        f"exist); {found}"
    )


def _partitions(config: StreamsConfig, tasks: dict[str, Any]) -> list[dict[str, Any]]:
    """Every committed source partition: committed offset, end offset now, lag."""
    rows = []
    try:
        log = open_log(config.log, **config.log_options)
    except StreamtideError:
        log = None
    try:
        for task, state in tasks.items():
            for key, committed in state.get("offsets", {}).items():
                topic, _, partition = key.rpartition(":")
                end = log.end_offset(topic, int(partition)) if log is not None else None
                rows.append(
                    {
                        "topic": topic,
                        "partition": int(partition),
                        "task": task,
                        "committed": committed,
                        "end": end,
                        "lag": max(0, end - committed) if end is not None else 0,
                    }
                )
    finally:
        if log is not None:
            log.close()
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))
