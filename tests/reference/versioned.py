"""Versioned source tables (KIP-889, KIP-914): every version of a key is kept for the
history retention, which is also how late an update may come.

- The store's observed time is the largest timestamp it was given. An update older than
  ``observed - retention`` is dropped (``dropped-records``).
- An update at or after the key's latest version's timestamp becomes the latest and is
  forwarded; an older one (out of order) only joins the history and is not forwarded.
- Looking a key up as of ``t``: the version with the largest timestamp not after ``t``
  (None if that is a delete, or if there is none); for ``t`` older than
  ``observed - retention`` only the latest version answers, and only if it is not after ``t``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.reference.tables import TableNode

if TYPE_CHECKING:
    from tests.reference.records import Rec
    from tests.reference.task import Task


class VersionedTableSource(TableNode):
    """``args``: retention, send_old."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.versions: dict[Any, dict[int, Any]] = {}
        self.observed = -1

    def process(self, rec: Rec, task: Task, port: int) -> None:
        if rec.key is None:
            task.count("dropped-records")
            return
        if rec.ts < self.observed - self.args["retention"]:
            task.count("dropped-records")
            return
        self.observed = max(self.observed, rec.ts)
        versions = self.versions.setdefault(rec.key, {})
        latest = max(versions, default=None)
        versions[rec.ts] = rec.value
        if latest is not None and rec.ts < latest:
            return  # out of order: history only
        old = self.lookup(rec.key)
        self.send(rec, task, rec.value, old and old[0])

    def lookup_as_of(self, key: Any, ts: int) -> tuple[Any, int] | None:
        versions = self.versions.get(key, {})
        if not versions:
            return None
        latest = max(versions)
        if ts < self.observed - self.args["retention"]:
            value = versions[latest] if latest <= ts else None
            return None if value is None else (value, latest)
        starts = [t for t in versions if t <= ts]
        if not starts:
            return None
        start = max(starts)
        value = versions[start]
        return None if value is None else (value, start)
