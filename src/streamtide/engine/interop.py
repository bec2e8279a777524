"""Spark interop: the session, the executor list, and jobs pinned to executors.

Uses the classic PySpark gateway (``sc._jvm``); Spark Connect sessions have none and are
rejected with a clear error. See docs/engine.md, "Placement and Python workers", for why
tasks are pinned.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamtide.errors import ConfigError, StreamtideError

DRIVER_ID = "driver"


@dataclass(frozen=True, order=True)
class ExecutorInfo:
    """One executor that can run tasks: its id, host and number of cores (task slots)."""

    id: str
    host: str
    cores: int

    @property
    def location(self) -> str:
        """Spark's preferred-location string for this executor."""
        return f"executor_{self.host}_{self.id}"


#: The driver JVM's logging configuration (warnings only, no start-up notices).
_LOG4J2 = Path(__file__).with_name("spark-log4j2.properties").as_uri()


def build_session(master: str = "local[2]", app_name: str = "streamtide", **conf: str) -> Any:
    """A classic SparkSession with the settings Streamtide needs (quiet, pinned tasks)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.locality.wait", "30s")
        .config("spark.speculation", "false")
        .config("spark.task.maxFailures", "4")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG4J2}")
    )
    for key, value in conf.items():  # given settings win over the defaults above
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_context(spark: Any) -> Any:
    """The SparkContext of a classic session; a clear error for a stopped session and for
    Spark Connect."""
    try:
        sc = spark.sparkContext
    except Exception:  # a Spark Connect session raises here; other objects have none
        sc = None
    if _is_classic_context(sc) and _stopped(sc):
        raise ConfigError(
            "the SparkSession handed to Streamtide is stopped (spark.stop() was called, or its "
            "SparkContext shut down); pass a running session, e.g. a new one from "
            "SparkSession.builder.getOrCreate(), or none and Streamtide builds its own"
        )
    if sc is None or getattr(sc, "_jsc", None) is None:
        raise ConfigError(
            "Streamtide needs a classic PySpark session (with a JVM gateway); "
            "Spark Connect sessions are not supported"
        )
    return sc


def _is_classic_context(sc: Any) -> bool:
    from pyspark import SparkContext

    return isinstance(sc, SparkContext)


def _stopped(sc: Any) -> bool:
    """Whether a classic SparkContext was stopped: from Python (``_jsc`` is then None) or in
    the JVM (an error there shut it down)."""
    if sc._jsc is None:
        return True
    try:
        return bool(sc._jsc.sc().isStopped())
    except Exception:  # the JVM gateway itself is gone
        return True


def list_executors(sc: Any) -> list[ExecutorInfo]:
    """Live executors that run tasks; the driver only in local mode, where it is alone."""
    executors = sc._jsc.sc().statusStore().executorList(True)
    found = []
    for index in range(executors.size()):
        info = executors.apply(index)
        if not info.isActive():
            continue
        host = info.hostPort().rsplit(":", 1)[0]
        found.append(ExecutorInfo(info.id(), host, int(info.totalCores())))
    real = [e for e in found if e.id != DRIVER_ID]
    if real:
        return sorted(real, key=lambda e: _id_order(e.id))
    return found


def busy_slots(sc: Any) -> dict[str, int]:
    """Spark's scheduler's view: how many tasks run on each executor now (``driver`` in
    local mode); empty where the scheduler does not say (it is Spark's internal API)."""
    try:
        running = sc._jsc.sc().taskScheduler().runningTasksByExecutors()
        as_java = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(running)
        return {str(executor): int(count) for executor, count in as_java.items()}
    except Exception:
        return {}


def _id_order(executor_id: str) -> tuple[int, str]:
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 62, executor_id)


def run_pinned(
    sc: Any,
    units: Sequence[tuple[str, ExecutorInfo | None]],
    work: Callable[[Iterable[str]], Iterator[str]],
) -> list[str]:
    """Run ``work`` once per payload, each on its executor; return the outputs in order.

    Each element of ``units`` is one Spark partition (one Spark task) with a preferred
    location; ``work`` receives an iterator over that one payload.
    """
    if not units:
        return []
    from pyspark.core.rdd import RDD
    from pyspark.serializers import UTF8Deserializer

    jvm = sc._jvm
    convert = jvm.scala.jdk.javaapi.CollectionConverters
    pairs = jvm.java.util.ArrayList()
    for payload, executor in units:
        locations = jvm.java.util.ArrayList()
        if executor is not None and executor.id != DRIVER_ID:
            locations.add(executor.location)
        pairs.add(jvm.scala.Tuple2(payload, convert.asScala(locations).toSeq()))
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.String"))
    jrdd = sc._jsc.sc().makeRDD(convert.asScala(pairs).toSeq(), tag)
    rdd: RDD[str] = RDD(jrdd.toJavaRDD(), sc, UTF8Deserializer())
    return rdd.mapPartitions(work).collect()


class PinnedExecutorLostError(StreamtideError):
    """An executor that a pinned job's tasks were pinned to left while the job ran."""

    def __init__(self, message: str, executors: frozenset[str]) -> None:
        super().__init__(message)
        self.executors = executors


def run_pinned_watched(
    sc: Any,
    units: Sequence[tuple[str, ExecutorInfo | None]],
    work: Callable[[Iterable[str]], Iterator[str]],
    poll: float = 0.25,
) -> list[str]:
    """``run_pinned``, cancelled as soon as an executor one of its units is pinned to leaves.

    Spark retries a lost task within its job, and a retried task waits out
    ``spark.locality.wait`` for the executor it prefers, which is gone: cancelling lets the
    caller re-plan at once instead (``PinnedExecutorLostError``)."""
    group = f"streamtide-pinned-{uuid.uuid4().hex[:12]}"
    pinned = frozenset(e.id for _, e in units if e is not None and e.id != DRIVER_ID)
    outputs: list[list[str]] = []  # the job's outputs, once it finished
    errors: list[BaseException] = []  # what it raised, handed to the caller's thread

    def run() -> None:
        try:
            sc.setJobGroup(group, "Streamtide work units", True)
            outputs.append(run_pinned(sc, units, work))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name="streamtide-pinned-job", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(poll if pinned else None)
        if not thread.is_alive():
            break
        gone = pinned - {e.id for e in list_executors(sc)}
        if gone:
            sc.cancelJobGroup(group)
            thread.join()
            raise PinnedExecutorLostError(
                f"executor(s) {', '.join(sorted(gone))} left while the stage's work units ran",
                frozenset(gone),
            )
    if errors:
        raise errors[0]
    return outputs[0]
