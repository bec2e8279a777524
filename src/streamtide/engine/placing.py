"""``Placing``: which executor runs which task in each batch, and its history.

Before a batch (and before a retry) the assignor places the tasks on the live executors from
their reports (``engine.placement``); after the batch's commit the placement is recorded for
a restarted driver (versioned assignment records) and its changes for ``status`` (the
assignment history, ``engine.assignment_history``). ``scale`` drains executors here: an
executor being removed is assigned nothing."""

from __future__ import annotations

import logging

from streamtide.assignment import Assignment, AssignmentInfo, SubscriptionInfo
from streamtide.engine.assignment_history import Placement, TaskRestore, changes
from streamtide.engine.driver_state import DriverState
from streamtide.engine.interop import ExecutorInfo
from streamtide.engine.launcher import WorkUnitLauncher
from streamtide.engine.placement import (
    Assignor,
    ClientReport,
    compute_assignment,
    reports_from,
    standby_shortfall,
    subscriptions,
)
from streamtide.engine.progress import BatchProgress
from streamtide.engine.protocol import CommitRecord
from streamtide.errors import StreamtideError
from streamtide.runtime.committed import offset_key
from streamtide.task_id import TaskId

log = logging.getLogger("streamtide.engine")


class Placing:
    """Assigns the tasks of each batch and keeps the assignment history."""

    def __init__(self, state: DriverState, assignor: Assignor) -> None:
        self.state = state
        self.assignor = assignor
        #: the executors and assignment the running batch uses (a retry may re-assign)
        self.executors: list[ExecutorInfo] = []
        self.assignment: Assignment | None = None
        #: the last batch's placement, the changelog lags the last assignment saw, executors
        #: being removed by ``scale`` (no longer assigned anything) and those removed so far
        self.placement = Placement()
        self.assign_lags: dict[tuple[str, str], int] = {}
        self.draining: set[str] = set()
        self.removed: set[str] = set()
        self._changelog_ends: dict[tuple[str, int], int] = {}  # this batch's
        self._standby_note: str | None = None  # said once, again when it changes

    def resume(self, last: CommitRecord) -> None:
        """Take the reports and placement of the last committed batch (a resumed driver)."""
        state = self.state
        stored = state.app_dir.read_assignment(last.batch)
        if stored is not None:
            subs = {c: SubscriptionInfo.decode(b) for c, b in stored["subscriptions"].items()}
            state.reports = reports_from(subs)
        else:  # no records (an older application directory): owners only
            for task, owner in last.owners.items():
                state.reports.setdefault(owner, ClientReport()).running.add(task)
        self.placement = _stored_placement(last.owners, stored)

    def live_executors(self, launcher: WorkUnitLauncher) -> list[ExecutorInfo]:
        """The executors to assign tasks to: the live ones not being removed by ``scale``."""
        return [e for e in launcher.executors() if e.id not in self.draining]

    def place(self, launcher: WorkUnitLauncher) -> tuple[list[ExecutorInfo], Assignment]:
        """Assign the tasks to the live executors; the batch uses them from now on."""
        executors = self.live_executors(launcher)
        assignment = self.assign(executors)
        self.executors, self.assignment = executors, assignment
        return executors, assignment

    def note_standby_shortfall(
        self, executors: list[ExecutorInfo], progress: BatchProgress
    ) -> None:
        """Say (once, and when it changes) why fewer standbys than configured are kept; the
        commit record keeps it for ``status``."""
        state = self.state
        wanted = state.config.num_standby_replicas if state.stateful_tasks() else 0
        note = standby_shortfall(wanted, executors)
        if note is not None and note != self._standby_note:
            log.warning("%s", note)
        self._standby_note = progress.standby_note = note

    def assign(self, executors: list[ExecutorInfo]) -> Assignment:
        state = self.state
        live = {e.id for e in executors}
        for client in list(state.reports):
            if client not in live:
                del state.reports[client]
        stateful = state.stateful_tasks()
        subs = subscriptions(executors, state.reports, stateful)
        self._fetch_changelog_ends()
        ends: dict[str, int] = {}

        def end_sum(task: str) -> int:
            if task not in ends:
                ends[task] = self._changelog_end_sum(task)
            return ends[task]

        assignment = compute_assignment(state.stages, subs, end_sum, state.config, self.assignor)
        self.assign_lags = {
            (client, task): 0 if task in report.running else max(0, end_sum(task) - held)
            for client, report in state.reports.items()
            for task, held in report.offset_sums.items()
            if task in stateful
        }
        return assignment

    def restore_bound(self, assignment: Assignment) -> int:
        """Changelog records the active tasks may restore this batch: committed end minus
        what their executor last reported holding (snapshots can make it less)."""
        stateful = self.state.stateful_tasks()
        total = 0
        for client, tasks in assignment.active.items():
            held = self.state.reports.get(client, ClientReport()).offset_sums
            for task in map(str, tasks):
                if task in stateful:
                    total += max(0, self._changelog_end_sum(task) - held.get(task, 0))
        return total

    def _changelog_end_sum(self, task: str) -> int:
        return sum(self._changelog_end(task).values())

    def _fetch_changelog_ends(self) -> None:
        """Ask the log for the committed end of every changelog partition at once (one
        request on Kafka), for this batch's assignment (``_changelog_end``)."""
        state = self.state
        self._changelog_ends = state.log.end_offsets(
            (topic, partition)
            for stage in state.stages
            for store, topic in stage.changelog_topics.items()
            if state.topology.source_changelog_topic(store) is None
            for partition in range(stage.partitions)
        )

    def _changelog_end(self, task: str) -> dict[str, int]:
        """Committed changelog end per store (as of ``_fetch_changelog_ends``); a source
        table's is the committed input offset (its changelog is the source topic, read no
        further than processed)."""
        state = self.state
        parsed = TaskId.parse(task)
        sub, partition = parsed.subtopology, parsed.partition
        stage = state.stages[sub]
        ends = {}
        for store, topic in stage.changelog_topics.items():
            if state.topology.source_changelog_topic(store) is None:
                known = self._changelog_ends.get((topic, partition))
                ends[store] = state.log.end_offset(topic, partition) if known is None else known
            else:
                ends[store] = state.committed_offsets(task).get(offset_key(topic, partition), 0)
        return ends

    def write_records(
        self, batch: int, executors: list[ExecutorInfo], assignment: Assignment
    ) -> None:
        """This batch's assignment and each executor's subscription for the next batch, as
        versioned records, so a restarted driver (of this or a later release) resumes them."""
        state = self.state
        subs = subscriptions(executors, state.reports, state.stateful_tasks())
        state.app_dir.write_assignment(
            batch,
            {c: sub.encode() for c, sub in subs.items()},
            {c: AssignmentInfo.for_client(assignment, c).encode() for c in assignment.active},
        )

    def record_history(
        self, progress: BatchProgress, executors: list[ExecutorInfo], assignment: Assignment
    ) -> None:
        """Append what changed since the last batch to the assignment history."""
        learners = {c: {str(t) for t in ts} for c, ts in assignment.learners.items()}
        after = Placement(
            {e.id for e in executors},
            dict(progress.owners),
            {
                c: {str(t) for t in ts} - learners.get(c, set())
                for c, ts in assignment.standby.items()
            },
            {
                c: {str(t) for t in ts} | learners.get(c, set())
                for c, ts in assignment.warmup.items()
            },
        )
        restores = {
            t: TaskRestore(n, progress.restore_ms_by_task.get(t, 0))
            for t, n in progress.restored_by_task.items()
        }
        events = changes(
            progress.batch,
            progress.committed_at,
            self.placement,
            after,
            removed=frozenset(self.removed | self.draining),
            lags=self.assign_lags,
            restores=restores,
        )
        self.state.app_dir.append_history([e.as_dict() for e in events])
        self.placement = after


def _stored_placement(
    owners: dict[str, str], stored: dict[str, dict[str, bytes]] | None
) -> Placement:
    """The last committed batch's placement, for the history of a resumed application."""
    placement = Placement(set(owners.values()), dict(owners))
    for client, blob in (stored or {}).get("assignments", {}).items():
        try:
            info = AssignmentInfo.decode(blob)
        except StreamtideError:
            continue  # an unreadable record costs the history one comparison, nothing more
        placement.executors.add(client)
        placement.standbys[client] = {str(t) for t in info.standby}
        placement.warmups[client] = {str(t) for t in info.warmup}
    return placement
