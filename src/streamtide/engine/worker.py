"""Executor side of a stage: unpickle the topology once per worker, run work units."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from streamtide.engine.failures import failure_report
from streamtide.log import open_log
from streamtide.runtime.work_unit import WorkUnitSpec, new_global_stores, run_work_unit

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
        cached = _CACHE[key] = (topology, config, factory, open_log(config.log), global_stores)
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
            report = {"failure": failure_report(exc, fatal)}
        report["ran_on"] = {"executor": observed_executor(), "pid": os.getpid()}
        yield json.dumps(report)


def make_work(blob: bytes) -> Any:
    """The function Spark runs on each pinned partition."""

    def work(payloads: Iterable[str]) -> Iterator[str]:
        from streamtide.engine.worker import run_payloads as run

        return run(blob, payloads)

    return work
