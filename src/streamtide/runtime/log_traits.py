"""``LogTraits``: what the runtime relies on of the log it runs on, named once per log.

The runtime never asks which log it runs on; it asks these questions, answered here for the
file log and for Kafka (the only place that tells the two apart)."""

from __future__ import annotations

from dataclasses import dataclass

from streamtide.log.api import Log


@dataclass(frozen=True)
class LogTraits:
    """What one kind of log offers the runtime."""

    #: a work unit commits its runs itself, in a transaction of its producer
    #: (``runtime.run_commit.KafkaCommit``); otherwise the driver seals what they wrote
    transactions: bool
    #: stores upload snapshots next to the changelogs and truncate the changelogs below
    #: them; a log without a directory every executor shares, or with compacted changelogs,
    #: restores by replaying the changelog
    snapshots: bool
    #: committed records' offsets may have gaps (transaction markers, aborted records): a
    #: read that finds nothing below an end offset has reached it
    offset_gaps: bool


FILE_LOG = LogTraits(transactions=False, snapshots=True, offset_gaps=False)
KAFKA_LOG = LogTraits(transactions=True, snapshots=False, offset_gaps=True)


def traits_of(log_: Log) -> LogTraits:
    """The traits of ``log_``: Kafka's when it commits in transactions."""
    return KAFKA_LOG if log_.transactional else FILE_LOG
