"""Adaptive batch size: how many records per partition the next batch may take.

A batch costs a fixed overhead (jobs, store opens, commit) plus time per record, so while a
backlog is worked off, bigger batches go faster; once caught up, batches are small anyway
(they take what arrived). The controller doubles the cap after a full batch that finished
within ``commit_interval`` and halves it after a batch that took more than twice as long,
between the configured ``max_records_per_batch`` (the floor, and where it
starts) and ``adaptive_batch_size_limit``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BatchSizeController:
    """The per-partition record cap of the next batch (see the module docstring)."""

    initial: int
    limit: int
    commit_interval_ms: int
    enabled: bool = True

    def __post_init__(self) -> None:
        self.limit = max(self.limit, self.initial)
        self.cap = self.initial

    def observe(self, duration_ms: float, full: bool) -> int:
        """Adjust after a batch that took ``duration_ms`` (``full``: some partition had more
        input than the cap); returns the new cap."""
        if not self.enabled:
            return self.cap
        if full and duration_ms < self.commit_interval_ms:
            self.cap = min(self.cap * 2, self.limit)
        elif duration_ms > 2 * self.commit_interval_ms:
            self.cap = max(self.cap // 2, self.initial)
        return self.cap
