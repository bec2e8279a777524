"""The part of a task's context that its stores see, read from the task object."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from streamtide.serde import Serde


class StoreContextSource(Protocol):
    """What a task (active or standby) tells its stores about itself."""

    application_id: str
    task_id: str
    metrics: Any
    state_dir: Path
    default_key_serde: Serde[Any]
    default_value_serde: Serde[Any]


class DelegatingStoreContext:
    """A ``StateStoreContext`` whose fields come from ``self._task`` (active or standby)."""

    _task: StoreContextSource

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
    def default_key_serde(self) -> Serde[Any]:
        return self._task.default_key_serde

    @property
    def default_value_serde(self) -> Serde[Any]:
        return self._task.default_value_serde
