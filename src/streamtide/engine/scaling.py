"""Adding and removing executors through Spark's executor-allocation calls.

``SparkContext.requestTotalExecutors`` sets how many executors the application wants and
``killExecutors`` removes given ones (lowering that number). Both reach the cluster manager
through the scheduler backend, which supports them on standalone clusters (``spark://``,
``local-cluster``), YARN and Kubernetes; ``local[N]`` runs everything in the driver and has
no executors to add or remove. With dynamic allocation Spark decides the number itself and
refuses both calls, so ``StreamsApp.scale`` refuses too: the engine follows executors that
come and go on their own at every batch either way.
"""

from __future__ import annotations

import time
from typing import Any

from streamtide.engine.interop import list_executors
from streamtide.errors import ConfigError, StreamtideError


def check_scalable(sc: Any) -> None:
    """Raise ``ConfigError`` unless the cluster manager lets the application choose its
    number of executors."""
    master = str(sc.master)
    if master == "local" or master.startswith("local["):
        raise ConfigError(
            f"cannot scale an application running on {master!r}: local mode runs every task "
            "in the driver; run on a cluster (local-cluster[N,cores,memory], spark://..., "
            "yarn or k8s://...) to add or remove executors"
        )
    if str(sc.getConf().get("spark.dynamicAllocation.enabled", "false")).lower() == "true":
        raise ConfigError(
            "spark.dynamicAllocation.enabled is true: Spark adds and removes executors "
            "itself (Streamtide follows them at every batch); scale() needs it off"
        )


def request_total(sc: Any, total: int) -> None:
    """Ask the cluster manager for ``total`` executors in all (it starts missing ones when
    it has the resources, and replaces executors that die up to that number)."""
    jvm = sc._jvm
    empty = jvm.scala.Predef.Map().empty()
    if not sc._jsc.sc().requestTotalExecutors(total, 0, empty):
        raise StreamtideError(
            f"the cluster manager of {sc.master!r} refused a request for {total} executors"
        )


def kill(sc: Any, executor_ids: list[str]) -> None:
    """Remove the given executors (their running Spark tasks fail; the caller moves
    Streamtide's tasks off them first)."""
    jvm = sc._jvm
    ids = jvm.java.util.ArrayList()
    for executor_id in executor_ids:
        ids.add(executor_id)
    seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(ids).toSeq()
    if not sc._jsc.sc().killExecutors(seq):
        raise StreamtideError(
            f"the cluster manager of {sc.master!r} refused to remove executors {executor_ids}"
        )


def await_executors(sc: Any, ready: Any, timeout: float, what: str) -> list[str]:
    """Wait until ``ready(live executor ids)`` holds; return the live ids."""
    deadline = time.monotonic() + timeout
    while True:
        live = [e.id for e in list_executors(sc)]
        if ready(live):
            return live
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s (live executors: {live})")
        time.sleep(0.25)
