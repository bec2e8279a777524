"""Ctrl-C in the commands that run Spark (``run`` and ``demo``): a stop the user asked for
prints one line.

PySpark's own SIGINT handler cancels every Spark job and raises ``KeyboardInterrupt`` wherever
the main thread is, usually inside a py4j call: the long-running work units die mid-batch (the
killed tasks log Java stack traces) and py4j logs the interrupted call's traceback. Here Ctrl-C
only asks the application to stop: after its running batch (which is committed), or, while
Spark starts, once it is up (a launch cut short leaves its JVM running). Once Spark is up a
second Ctrl-C stops at once. While a stop runs, the JVM loggers that report tasks and status
updates cut short by the shutdown are switched off; at any other time every error shows. The
log leaves out py4j's chatter (below WARNING) and ``KeyboardInterrupt`` tracebacks.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

#: The exit status of a command the user stopped with Ctrl-C (128 + SIGINT, as shells report).
STOPPED_EXIT_CODE = 130

#: JVM loggers that report, as errors, what a shutdown cuts short: tasks killed in their
#: Python worker or missing their broadcast, and status updates arriving after the scheduler
#: stopped.
SHUTDOWN_LOGGERS = (
    "org.apache.spark.TaskContextImpl",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.api.python.PythonRunner",
    "org.apache.spark.storage.BlockManager",
)


class _Shown(logging.Filter):
    """What a command logs: Streamtide's records from its level, other libraries' (py4j's
    chatter) from WARNING, and never a ``KeyboardInterrupt`` traceback (py4j logs one for
    every call that Ctrl-C interrupted)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            return False
        ours = record.name == "streamtide" or record.name.startswith("streamtide.")
        return record.levelno >= (self.level if ours else logging.WARNING)


def configure_logging(level: int) -> None:
    """Log to stderr as ``_Shown`` says, when nothing else configured logging (a command of
    its own, not a call inside another program, whose logging stays as it is)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    handler.addFilter(_Shown(level))
    root.addHandler(handler)
    root.setLevel(min(level, logging.WARNING))


class StopRequest:
    """Ctrl-C as a request to stop. While Spark starts, every Ctrl-C only requests (a launch
    cut short would leave its JVM behind); once Spark is up (``spark_is_up``), a second Ctrl-C
    raises ``KeyboardInterrupt``."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._up = False

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._up and self._event.is_set():
            raise KeyboardInterrupt
        self._event.set()
        logging.getLogger("streamtide").setLevel(logging.ERROR)  # the stop prints its own line

    @contextmanager
    def handling_ctrl_c(self) -> Iterator[StopRequest]:
        """Within: Ctrl-C requests a stop instead of interrupting. The handler found before is
        put back on exit."""
        if threading.current_thread() is not threading.main_thread():
            yield self  # signals reach the main thread only: nothing to handle here
            return
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)

    def spark_is_up(self) -> None:
        """Spark has started (and a new SparkContext installed its own handler, which cancels
        every job): take Ctrl-C back, and let a second one stop at once from now on."""
        self._up = True
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._on_sigint)


def quiet_for_stop(spark: Any) -> None:
    """Before a stop the user asked for: switch off the JVM loggers that report what the
    shutdown cuts short, and Streamtide's progress messages (the stop prints its own line)."""
    logging.getLogger("streamtide").setLevel(logging.ERROR)
    if spark is None:
        return
    try:
        jvm = spark.sparkContext._jvm
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in SHUTDOWN_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
    except Exception:  # no session or the JVM is already gone: nothing left to say anything
        pass


def batches_until_caught_up(app: Any, stop: StopRequest) -> Iterator[Any]:
    """Run ``app``'s batches one after the other, yielding each one's progress, until no input
    is waiting (after at least one batch) or a stop is requested."""
    while True:
        yield app.run_batch()
        if stop.requested or not app.input_waiting():
            return


def stop_app(app: Any, spark: Any, *, asked: bool) -> None:
    """Stop ``app``. If the user ``asked`` for it (Ctrl-C), print one line and exit with
    ``STOPPED_EXIT_CODE``; a Ctrl-C while stopping ends the wait for the running batch."""
    if not asked:
        app.stop()
        return
    click.echo("stopping (Ctrl-C) ...", nl=False, err=True)
    quiet_for_stop(spark)
    try:
        app.stop()
    except KeyboardInterrupt:
        pass
    done = app.last_progress
    when = f"after batch {done.batch}" if done else "before its first batch"
    click.echo(f" stopped {when}", err=True)
    sys.exit(STOPPED_EXIT_CODE)


@contextmanager
def spark_started(app: Any) -> Iterator[StopRequest]:
    """Start ``app``'s Spark and run the body with Ctrl-C as a stop request (the body checks
    ``requested``); stop ``app`` at the end, with one line and ``STOPPED_EXIT_CODE`` when the
    user asked for it."""
    stop, spark, interrupted = StopRequest(), None, False
    with stop.handling_ctrl_c():
        try:
            spark = app.spark
            stop.spark_is_up()
            yield stop
        except KeyboardInterrupt:  # Ctrl-C twice: stop at once
            interrupted = True
        finally:
            stop_app(app, spark, asked=interrupted or stop.requested)
