"""A work unit's commit on a Kafka log: every task it ran, in one transaction of one producer.

As Kafka Streams' exactly-once v2 (KIP-447) has one producer per stream thread instead of one
per task, a work unit has one transactional producer for its run, whatever its task count.
Its ``transactional.id`` comes from the driver (``engine.unit_ids``):
``<application_id>-unit-<client>-<slot>-s<stage>-g<generation>``. Creating the producer
initialises the id, which fences every earlier producer of it (a retried attempt of the unit,
a zombie process of the slot) and aborts what they left open. A task that moves to another
slot is no longer covered by that: the driver fences the ids of the slot it left before its
new owner runs, and gives that slot a new generation (our work units use ``assign()``, so the
broker never checks a group generation as KIP-447 relies on; ``init_transactions`` is the only
fence it enforces for us).

The unit's transaction holds all its tasks' outputs, changelog and repartition records and
input offsets (with each task's state in their metadata). A task that fails fails the whole
unit: nothing of the transaction was sent yet, and every task of the unit runs again. After
the commit the offsets are read back, because a broker restart can abort a transaction whose
commit the client then reports as successful. Under ``at_least_once`` the records are appended
and the offsets committed after them, without a transaction: a failure between the two repeats
the run's outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamtide.errors import FencedError, StreamtideError
from streamtide.log.api import Log, LogRecord
from streamtide.log.errors import ProducerFencedError
from streamtide.log.kafka_group import Committed, GroupOffsets, topic_partitions
from streamtide.log.kafka_transaction import KafkaTransaction
from streamtide.runtime.kafka_task_commit import TaskRun


class KafkaUnitCommit:
    """Commits the runs of one work unit's tasks (see the module docstring). Without a
    ``transactional_id`` (``at_least_once``) it appends and commits without a transaction."""

    def __init__(
        self, log: Log, group: GroupOffsets, application_id: str, transactional_id: str | None
    ) -> None:
        self.log = log
        self.group = group
        self.transactional_id = transactional_id
        self.where = f"work unit {transactional_id or 'at least once'} of {application_id!r}"
        self.transaction: KafkaTransaction | None = None
        if transactional_id is not None:
            try:
                self.transaction = KafkaTransaction(log, transactional_id, self.where)
            except ProducerFencedError as exc:
                raise self._fenced(exc) from exc

    def commit(self, runs: Sequence[TaskRun]) -> dict[tuple[str, int], int]:
        """Write and commit ``runs`` (``KafkaTaskCommit.prepare``) together; returns the offset
        of the last record written to each partition."""
        offsets: dict[tuple[str, int], Committed] = {}
        for run in runs:
            offsets.update(run.offsets)
        try:
            if self.transaction is None:
                written = self._append_then_commit(runs, offsets)
            else:
                written = self._commit_transaction(runs, offsets)
        except ProducerFencedError as exc:
            raise self._fenced(exc) from exc
        for run in runs:
            run.task.committed(run)
        return written

    def _commit_transaction(
        self, runs: Sequence[TaskRun], offsets: dict[tuple[str, int], Committed]
    ) -> dict[tuple[str, int], int]:
        txn = self.transaction
        assert txn is not None
        txn.begin()
        for run in runs:
            for topic, partition, columns, headers in run.pending:
                txn.produce_many(
                    topic, partition, columns.keys, columns.values, columns.timestamps, headers
                )
        if offsets:
            txn.send_offsets(topic_partitions(offsets), self.group.group_metadata())
        txn.commit()
        written = dict(txn.last_offsets)
        self._confirm(offsets)
        return written

    def _append_then_commit(
        self, runs: Sequence[TaskRun], offsets: dict[tuple[str, int], Committed]
    ) -> dict[tuple[str, int], int]:
        written = {}
        for run in runs:
            for topic, partition, columns, headers in run.pending:
                records = [
                    LogRecord(k, v, t, tuple(h))
                    for k, v, t, h in zip(columns.keys, columns.values, columns.timestamps, headers)
                ]
                if records:
                    first = self.log.append(topic, partition, records)
                    # an idempotent producer's records of one append are contiguous
                    written[(topic, partition)] = first + len(records) - 1
        if offsets:
            self.group.commit(offsets)
        return written

    def _confirm(self, offsets: dict[tuple[str, int], Committed]) -> None:
        """Read the committed offsets back: a broker restart can abort a transaction whose
        commit the client then reports as successful."""
        if not offsets:
            return
        found = self.group.committed(offsets)
        lost = {k: v for k, v in offsets.items() if found.get(k) != v}
        if lost:
            raise StreamtideError(
                f"{self.where}: the transaction's commit was reported, but Kafka does not hold "
                f"its offsets {sorted(lost)} (the broker aborted it); the run is retried"
            )

    def _fenced(self, exc: BaseException) -> FencedError:
        return FencedError(
            f"{self.where}: Kafka fenced its transactional producer: another instance of the "
            f"application, or the driver moving one of its tasks, fenced it ({exc})"
        )

    def close(self) -> None:
        """Abort an open transaction and drop the producer."""
        if self.transaction is not None:
            self.transaction.abort()
            self.transaction.close()
            self.transaction = None
