"""The one place that picks the driver's commit implementation for a log.

Everything else in the engine calls ``BatchCommitter``'s methods and never asks which log it
runs on: the file log's prepare, seal and commit (``engine.committer``), or Kafka's
per-work-unit transactions with the driver's records as their account
(``engine.kafka_committer``)."""

from __future__ import annotations

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.committer import BatchCommitter
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.log.api import Log


def open_committer(
    app_dir: AppDirectory,
    log_: Log,
    application_id: str,
    *,
    exactly_once: bool = True,
    continuous: bool = False,
) -> BatchCommitter:
    """The committer for ``log_``: Kafka's when the log commits in transactions (whose work
    units commit in transactions only ``exactly_once``, and keep their producers from one
    batch to the next only in ``continuous`` execution)."""
    if log_.transactional:
        committer = KafkaBatchCommitter(app_dir, log_, application_id)
        committer.units_fence = exactly_once and continuous
        return committer
    return BatchCommitter(app_dir, log_, application_id)
