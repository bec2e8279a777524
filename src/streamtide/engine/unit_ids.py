"""The transactional ids of work units on Kafka, and the fencing when a task moves.

A work unit commits all its tasks' runs in one transaction of one producer
(``runtime.kafka_unit_commit``). Its ``transactional.id`` names the slot and stage it runs and
a generation: ``<application_id>-unit-<client>-<slot>-s<stage>-g<generation>``. Only the
driver hands ids out, and it records each one, with every task it may hold, before the run
that uses it (``record``; the application directory, and on Kafka also a transaction of the
driver's fencing producer, so that a driver with another application directory finds them).

Kafka fences a producer only through its own id (our work units use ``assign()``, so the
broker never checks a group generation as KIP-447 relies on). Hence the rule: before a task
runs under an id, every recorded id that may still hold it under another slot is fenced
(``init_transactions``: its open transaction is aborted, its later sends and commit refused),
and the slot it left gets a new generation, so the work unit running there next uses a new
id and only the driver's record can bring the old one back. A task that stays on its slot
keeps the id: the next producer of the same id fences the earlier ones by itself (a retried or
replaced work unit). A starting driver fences every recorded id not fenced yet (its
predecessor's work units may still run) and starts every slot at a new generation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamtide.runtime.kafka_task_commit import unit_transactional_id

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class UnitKey:
    """One slot of one executor (``client``), for one stage."""

    client: str
    slot: int
    stage: int

    def text(self) -> str:
        return f"{self.client}/{self.slot}/{self.stage}"

    @classmethod
    def parse(cls, text: str) -> UnitKey:
        client, slot, stage = text.rsplit("/", 2)
        return cls(client, int(slot), int(stage))


@dataclass
class _Entry:
    key: UnitKey
    tasks: set[str] = field(default_factory=set)  # every task a run under the id was given


class UnitIds:
    """The ids handed out and not fenced yet, and each slot's generation (see the module
    docstring). ``save(data)`` records them durably; ``fence(ids)`` initialises ids."""

    def __init__(
        self,
        application_id: str,
        saved: Mapping[str, Any] | None,
        save: Callable[[dict[str, Any]], None],
        fence: Callable[[list[str]], None],
    ) -> None:
        self.application_id = application_id
        self._save = save
        self._fence = fence
        data = dict(saved or {})
        self._generations = {
            UnitKey.parse(k): int(g) for k, g in data.get("generations", {}).items()
        }
        self._open = {
            str(tid): _Entry(UnitKey.parse(e["key"]), set(e["tasks"]))
            for tid, e in data.get("unfenced", {}).items()
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "generations": {k.text(): g for k, g in sorted(self._generations.items())},
            "unfenced": {
                tid: {"key": e.key.text(), "tasks": sorted(e.tasks)}
                for tid, e in sorted(self._open.items())
            },
        }

    def start(self) -> None:
        """A driver starts: fence every recorded id its predecessors left unfenced, and begin
        every slot at a new generation (no id a zombie may hold is handed out again)."""
        if self._open:
            self._fence(sorted(self._open))
            self._open.clear()
        self._generations = {k: g + 1 for k, g in self._generations.items()}
        self._save(self.to_dict())

    def ids_for(self, units: Mapping[UnitKey, Iterable[str]]) -> dict[UnitKey, str]:
        """The id each unit (``{key: its active tasks}``) runs under. Recorded before they
        are returned; ids that may still hold one of the tasks under another slot are fenced
        first, and their slots move to a new generation."""
        owner = {task: key for key, tasks in units.items() for task in tasks}
        stale = [
            tid
            for tid, entry in self._open.items()
            if any(owner.get(task, entry.key) != entry.key for task in entry.tasks)
        ]
        for tid in stale:  # the slot lost a task: its next run gets a new generation
            key = self._open[tid].key
            if self._current(key) == tid:
                self._generations[key] = self._generations.get(key, 0) + 1
        ids: dict[UnitKey, str] = {}
        changed = bool(stale)
        for key, tasks in units.items():
            tid = self._current(key)
            entry = self._open.get(tid)
            if entry is None:
                entry = self._open[tid] = _Entry(key)
                self._generations.setdefault(key, 0)
                changed = True
            if not entry.tasks.issuperset(tasks):
                entry.tasks.update(tasks)
                changed = True
            ids[key] = tid
        if changed:
            self._save(self.to_dict())  # the new ids first: a crash now leaves them recorded
        if stale:
            log.info("fencing work-unit producers that held tasks which moved: %s", stale)
            self._fence(sorted(stale))
            for tid in stale:
                del self._open[tid]
            self._save(self.to_dict())
        return ids

    def _current(self, key: UnitKey) -> str:
        return unit_transactional_id(
            self.application_id, key.client, key.slot, key.stage, self._generations.get(key, 0)
        )

    def unfenced(self) -> list[str]:
        """The ids handed out and not fenced yet."""
        return sorted(self._open)


def encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True).encode()
