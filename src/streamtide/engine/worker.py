"""Executor side of a stage: unpickle the topology once per worker, run work units."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streamtide.engine.failures import failure_report
from streamtide.log import open_log
from streamtide.runtime.messages import (
    Ended,
    MessageError,
    Query,
    QueryAnswered,
    Release,
    Released,
    RunUnits,
    Settle,
    Stop,
    UnitsRan,
    decode,
    encode,
)
from streamtide.runtime.store_query import StoreQuery
from streamtide.runtime.task_host import new_global_stores
from streamtide.runtime.work_unit import WorkUnitSpec, run_work_unit

_CACHE: dict[str, Any] = {}


def _load(blob: bytes) -> tuple[Any, Any, Any, Any, Any]:
    """The application of ``blob`` for this worker process, with the worker's copy of the
    global tables, which lives as long as the process and is brought up to date by every
    work unit (bootstrapped by the first)."""
    key = hashlib.sha1(blob).hexdigest()
    cached = _CACHE.get(key)
    if cached is None:
        from pyspark import cloudpickle

        topology, config, factory = cloudpickle.loads(blob)
        _CACHE.clear()
        global_stores = new_global_stores(topology, config) if topology.global_stores else None
        cached = _CACHE[key] = (
            topology,
            config,
            factory,
            open_log(config.log, **config.log_options),
            global_stores,
        )
    return cached


def observed_executor() -> str:
    """The executor this Python worker belongs to, from its working directory
    (``.../work/<app-id>/<executor-id>`` on a cluster); ``driver`` in local mode."""
    parts = os.getcwd().rstrip("/").split("/")
    if len(parts) >= 3 and parts[-3] == "work" and parts[-2].startswith("app-"):
        return parts[-1]
    return "driver"


def run_payloads(blob: bytes, payloads: Iterable[str]) -> Iterator[str]:
    """Run each JSON work-unit payload and yield its JSON report (or failure report)."""
    try:
        topology, config, factory, log_, global_stores = _load(blob)
    except Exception as exc:  # e.g. user code that cannot be unpickled here
        loading: BaseException | None = exc
    else:
        loading = None
    for payload in payloads:
        try:
            if loading is not None:
                raise loading
            spec = WorkUnitSpec.from_dict(json.loads(payload))
            report = run_work_unit(topology, config, log_, spec, factory, global_stores)
        except Exception as exc:  # reported, not raised: the driver decides about retries
            fatal = config.fatal_exceptions if loading is None else ()
            report = {"failure": failure_report(exc, fatal).to_dict()}
        report["ran_on"] = {"executor": observed_executor(), "pid": os.getpid()}
        yield json.dumps(report)


def make_work(blob: bytes) -> Any:
    """The function Spark runs on each pinned partition."""

    def work(payloads: Iterable[str]) -> Iterator[str]:
        from streamtide.engine.worker import run_payloads as run

        return run(blob, payloads)

    return work


# ---- continuous execution: one long-running work unit per executor slot -----------------

#: How often a waiting work unit checks that its Python worker's parent is still alive.
_LIVENESS_CHECK_S = 1.0


def serve(blob: bytes, payload: str) -> dict[str, Any]:
    """Run one long-running work unit: connect to the driver's control channel and answer its
    messages until told to stop or the connection ends (docs/engine.md, "Continuous
    execution"). Returns why it ended."""
    from streamtide.engine.channel import connect
    from streamtide.runtime.task_host import TaskHost
    from streamtide.runtime.work_unit import client_state_dir

    job = json.loads(payload)
    executor = observed_executor()
    if job["executor"] != "driver" and executor not in ("driver", job["executor"]):
        # Spark ran the pinned task elsewhere (its executor was lost or busy): not ours
        return {"ended": f"ran on executor {executor}, not {job['executor']}"}
    topology, config, factory, log_, global_stores = _load(blob)
    hello = {
        "slot": job["slot"],
        "generation": job["generation"],
        "executor": executor,
        "pid": os.getpid(),
    }
    sock = connect(job["host"], int(job["port"]), job["secret"], job["fingerprint"], hello)
    parent = os.getppid()
    host = TaskHost(
        topology,
        config,
        log_,
        factory,
        client_state_dir(config, job["client"]),
        keep_open=True,
        global_stores=global_stores,
    )

    def gone() -> str | None:
        if os.getppid() != parent:
            return "its Spark executor went away"
        if _fenced(job):
            return "a newer driver of the application took over"
        return None

    ended = "it failed"
    try:
        ended = answer_driver(
            sock, host, lambda units: _run_units(host, units, blob), gone, host.checkpoint_due
        )
    finally:
        host.close()
        _farewell(sock, ended)
    return {"ended": ended, "slot": job["slot"]}


def _farewell(sock: Any, why: str) -> None:
    """Tell the driver why this work unit ends (so it does not take the end for a death and
    replace it), then close the connection."""
    from streamtide.engine.channel import send_message

    try:
        send_message(sock, encode(Ended(why)))
    except OSError:  # the driver closed it, or is gone
        pass
    finally:
        sock.close()


def answer_driver(
    sock: Any,
    host: Any,
    run_units: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    gone: Callable[[], str | None],
    after_reply: Callable[[], object] | None = None,
) -> str:
    """Answer the driver's control messages (``runtime.messages``) on ``sock`` with
    ``host``'s tasks until the driver says stop, the connection closes, or ``gone()`` (asked
    every second while idle) names a reason to end; returns why it ended. ``after_reply``
    runs once each run's reply is sent, while the driver seals (``TaskHost.checkpoint_due``:
    the checkpoints that are due)."""
    import select

    from streamtide.engine.channel import ChannelClosedError, pending, recv_message

    answer = _Answers(sock, host, run_units, after_reply)
    while True:
        # a message TLS already decrypted is invisible to select: read it without waiting
        readable = pending(sock) or select.select([sock], [], [], _LIVENESS_CHECK_S)[0]
        if not readable:
            reason = gone()
            if reason is not None:
                return reason
            continue
        try:
            message = decode(recv_message(sock))
        except ChannelClosedError:
            return "the driver closed the control channel"
        except MessageError:
            continue  # nothing this release understands: ignored, as an unknown kind always was
        if isinstance(message, Stop):
            return "stopped by the driver"
        answer(message)


class _Answers:
    """A long-running work unit's answer to each control message, by its type."""

    def __init__(
        self,
        sock: Any,
        host: Any,
        run_units: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
        after_reply: Callable[[], object] | None = None,
    ) -> None:
        self.sock = sock
        self.host = host
        self.run_units = run_units
        self.after_reply = after_reply
        #: spent settling since the last run (reported with the next run), ``after_reply``
        #: included (the checkpoints written after the run: ``TaskHost.checkpoint_due``)
        self.settle_ms = 0.0
        self._handlers: dict[type, Callable[[Any], None]] = {
            RunUnits: self.run,
            Settle: self.settle,
            Query: self.query,
            Release: self.release,
        }

    def __call__(self, message: Any) -> None:
        handler = self._handlers.get(type(message))
        if handler is not None:  # (a reply sent to a work unit means nothing to it)
            handler(message)

    def _send(self, reply: Any) -> None:
        from streamtide.engine.channel import send_message

        send_message(self.sock, encode(reply))

    def run(self, message: RunUnits) -> None:
        import time

        reports = self.run_units(list(message.units))
        self._send(UnitsRan(tuple(reports), round(self.settle_ms, 3)))
        self.settle_ms = 0.0
        if self.after_reply is not None:  # the driver now seals: time for what can wait
            began = time.perf_counter()
            self.after_reply()
            self.settle_ms = (time.perf_counter() - began) * 1000

    def settle(self, message: Settle) -> None:
        import time

        began = time.perf_counter()
        self.host.settle(message.winners)
        self.settle_ms += (time.perf_counter() - began) * 1000

    def query(self, message: Query) -> None:
        self._send(answer_query(self.host, message.query))

    def release(self, message: Release) -> None:
        self._send(Released(tuple(self.host.release(message.keep))))


def _fenced(job: dict[str, Any]) -> bool:
    """Whether a newer driver took the application's epoch: this work unit's driver is a
    zombie, and the unit ends so that it holds neither stores nor a task slot."""
    from streamtide.engine.app_dir import AppDirectory
    from streamtide.engine.protocol import fenced_by

    return fenced_by(int(job["epoch"]), AppDirectory(job["app_dir"]).epochs()) is not None


def _run_units(host: Any, units: list[dict[str, Any]], blob: bytes) -> list[dict[str, Any]]:
    topology, config, factory, log_, _ = _load(blob)
    reports = []
    for unit in units:
        try:
            spec = WorkUnitSpec.from_dict(unit)
            report = run_work_unit(topology, config, log_, spec, factory, host=host)
        except Exception as exc:  # reported, not raised: the driver decides about retries
            host.close()  # what the failed run left open is not trusted
            report = {"failure": failure_report(exc, config.fatal_exceptions).to_dict()}
        report["ran_on"] = {"executor": observed_executor(), "pid": os.getpid()}
        reports.append(report)
    return reports


def answer_query(host: Any, query: StoreQuery) -> QueryAnswered:
    """The answers (``{task: answer}``) to ``query``, or why the tasks could not answer (sent
    back, never raised: the driver reports it)."""
    try:
        return QueryAnswered(answers=host.query(query))
    except Exception as exc:
        return QueryAnswered(error=f"{type(exc).__name__}: {exc}")


def run_queries(blob: bytes, payloads: Iterable[str]) -> Iterator[str]:
    """Micro-batch execution: answer each JSON payload's query from the stores of executor
    ``client`` (opened, read and closed here; nothing stays open between Spark tasks)."""
    from streamtide.runtime.task_host import TaskHost
    from streamtide.runtime.work_unit import client_state_dir

    topology, config, factory, log_, _ = _load(blob)
    for payload in payloads:
        job = json.loads(payload)
        host = TaskHost(topology, config, log_, factory, client_state_dir(config, job["client"]))
        try:
            yield json.dumps(encode(answer_query(host, StoreQuery.from_dict(job["query"]))))
        finally:
            host.close()


def make_query(blob: bytes) -> Any:
    """The function Spark runs on a query's pinned partition (micro-batch execution)."""

    def work(payloads: Iterable[str]) -> Iterator[str]:
        from streamtide.engine.worker import run_queries as run

        return run(blob, payloads)

    return work


def make_serve(blob: bytes) -> Any:
    """The function Spark runs on a long-running work unit's pinned partition."""

    def work(payloads: Iterable[str]) -> Iterator[str]:
        from streamtide.engine.worker import serve as run

        for payload in payloads:
            yield json.dumps(run(blob, payload))

    return work
