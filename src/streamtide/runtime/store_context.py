"""The part of a task's context that its stores see, read from the task object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamtide.serde import Serde


class DelegatingStoreContext:
    """A ``StateStoreContext`` whose fields come from ``self._task`` (active or standby)."""

    _task: Any

    @property
    def application_id(self) -> str:
        return self._task.application_id

    @property
    def task_id(self) -> str:
        return self._task.task_id

    @property
    def metrics(self) -> Any:
        return self._task.metrics

    @property
    def state_dir(self) -> Path:
        return self._task.state_dir

    @property
    def default_key_serde(self) -> Serde:
        return self._task.default_key_serde

    @property
    def default_value_serde(self) -> Serde:
        return self._task.default_value_serde
