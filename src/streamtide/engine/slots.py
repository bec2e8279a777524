"""Task slots that applications of this driver process hold, per Spark session.

Continuous execution keeps a long-running Spark task on every slot an application uses, for as
long as the application runs (docs/engine.md, "Continuous execution"). Another application
started in the same Spark session whose work needs one of those slots would wait for it
forever: Spark queues its tasks behind tasks that never end. So before it launches anything,
an application checks the slots it needs against this registry and fails at once, naming the
application that holds them.

The registry, not Spark, is what decides: Spark knows that an executor's cores are busy right
now, not that the tasks on them never end, nor whose they are. A work unit counts as holding
its slot once it connected to its driver (then its Spark task is certainly running) until its
job ends. Spark's own count of busy slots is shown beside the verdict. An application with the
same ``application_id`` is not a holder to wait for: the newer driver fenced it, and its work
units end within a second (``engine.worker.serve``).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from streamtide.engine.interop import ExecutorInfo, busy_slots
from streamtide.errors import ConfigError


class TaskSlotsHeldError(ConfigError):
    """Another application of this Spark session holds the task slots an application needs
    (continuous execution keeps them until it stops): waiting cannot help."""


@dataclass(frozen=True)
class _Holder:
    session: str  # the Spark application id of the holder's SparkContext
    application_id: str
    held: Callable[[], Mapping[str, int]]  # executor id -> slots held now


_lock = threading.Lock()
_tokens = itertools.count(1)
_holders: dict[int, _Holder] = {}  # by token


def _session_key(sc: object) -> str:
    return str(sc.applicationId)  # type: ignore[attr-defined]


def hold(sc: object, application_id: str, held: Callable[[], Mapping[str, int]]) -> int:
    """Register an application that holds slots of ``sc``'s executors (``held()`` says how
    many per executor, asked at every check); returns the token that ``release`` takes."""
    holder = _Holder(_session_key(sc), application_id, held)
    with _lock:
        token = next(_tokens)
        _holders[token] = holder
    return token


def release(token: int) -> None:
    """Forget a holder (its application stopped; its SparkContext may be gone already)."""
    with _lock:
        _holders.pop(token, None)


def check_free(
    sc: object,
    application_id: str,
    slots: Iterable[tuple[ExecutorInfo, int]],
    own_token: int | None = None,
) -> None:
    """Raise ``TaskSlotsHeldError`` when ``application_id`` needs more slots of an executor
    (``slots``: (executor, slot index) pairs) than other applications of the session leave
    free there."""
    needed: dict[str, set[int]] = {}
    executors: dict[str, ExecutorInfo] = {}
    for executor, slot in slots:
        needed.setdefault(executor.id, set()).add(slot)
        executors[executor.id] = executor
    session = _session_key(sc)
    with _lock:
        others = [
            holder
            for token, holder in _holders.items()
            if holder.session == session
            and token != own_token
            and holder.application_id != application_id
        ]
    if not others:
        return
    held = {holder.application_id: Counter(holder.held()) for holder in others}
    for executor_id, wanted in sorted(needed.items()):
        taken = {app: count[executor_id] for app, count in held.items() if count[executor_id]}
        cores = executors[executor_id].cores
        if taken and len(wanted) + sum(taken.values()) > cores:
            raise TaskSlotsHeldError(
                _message(application_id, executor_id, cores, len(wanted), taken, sc)
            )


def _message(
    application_id: str,
    executor_id: str,
    cores: int,
    wanted: int,
    taken: Mapping[str, int],
    sc: object,
) -> str:
    holders = " and ".join(f"application {app!r} holds {n}" for app, n in sorted(taken.items()))
    first = sorted(taken)[0]
    busy = busy_slots(sc).get(executor_id)
    spark_view = "" if busy is None else f" (Spark reports {busy} of them busy)"
    return (
        f"application {application_id!r} cannot run in this Spark session: {holders} of the "
        f"{cores} task slot(s) of executor {executor_id}{spark_view}, and {application_id!r} "
        f"needs {wanted} of them. Continuous execution keeps a long-running work unit on "
        "every slot an application uses until it stops. Stop the other application first "
        f"(app.stop() of {first!r}), run each application in its own Spark session (its own "
        "driver process), give the executors more cores, or run the other application with "
        "execution='micro_batch', which frees its slots between batches."
    )
