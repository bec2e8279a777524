"""Ctrl-C in ``streamtide run`` (``cli/interrupt.py``): a stop the user asked for prints one
line, also while Spark starts, and leaves no process behind. (A stop after a committed batch
is in tests/cli/test_readme_commands.py.)"""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from pathlib import Path

import pytest

from streamtide.cli.interrupt import StopRequest, configure_logging
from tests.cli.installed import STREAMTIDE, Running

#: What Spark's JVM prints while it starts, whatever happens next (not part of a stop).
SPARK_START_UP = re.compile(
    r"^(WARNING: Using incubator modules|Using Spark's default log4j profile|Setting default "
    r"log level|To adjust logging level|\d\d/\d\d/\d\d [\d:]{8} WARN (Utils|NativeCodeLoader):)"
)
APP = """
from streamtide import Consumed, Serdes, StreamsBuilder

builder = StreamsBuilder()
builder.stream("clicks", Consumed.with_(Serdes.string(), Serdes.json())).group_by_key().count()
topology = builder.build()
"""


@pytest.mark.spark
@pytest.mark.slow
def test_ctrl_c_while_spark_starts_prints_one_line_and_leaves_no_jvm(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(APP)
    log = f"file://{tmp_path / 'data'}"
    created = Running([str(STREAMTIDE), "topics", "create", "clicks", "--log", log], tmp_path)
    assert created.finish(timeout=60) == 0
    args = [str(STREAMTIDE), "run", "myapp:topology", "--application-id", "app", "--log", log]
    running = Running(args, tmp_path)
    try:
        seen = running.wait_for("WARNING: Using incubator modules", timeout=300)
        running.ctrl_c()  # the JVM has started; PySpark is still setting its gateway up
        status = running.finish(timeout=300)  # also: the JVM is gone (it held the output)
        after = [x for x in running.lines[seen:] if x.strip() and not SPARK_START_UP.match(x)]
        assert after == ["stopping (Ctrl-C) ... stopped before its first batch"], after
        assert status == 130
        assert _group_ends(running.process.pid, timeout=60)  # the JVM does not stay behind
    finally:
        running.close()


def _group_ends(group: int, timeout: float) -> bool:
    """Whether every process of the process group ``group`` is gone within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_the_first_ctrl_c_asks_and_a_second_one_interrupts_once_spark_is_up() -> None:
    stop = StopRequest()
    try:
        with stop.handling_ctrl_c():
            os.kill(os.getpid(), signal.SIGINT)  # while Spark starts: only a request
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.requested
            stop.spark_is_up()
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is not stop._on_sigint  # the old one is back
    finally:
        logging.getLogger("streamtide").setLevel(logging.NOTSET)  # a request quiets it


def test_keyboard_interrupt_tracebacks_and_library_chatter_are_left_out_of_the_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    root.handlers = []  # a command of its own: nothing configured logging yet
    try:
        configure_logging(logging.INFO)
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            logging.exception("KeyboardInterrupt while sending command.")  # as py4j does
        try:
            raise ValueError("a real error")
        except ValueError:
            logging.exception("something failed")
        logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
        logging.getLogger("streamtide.engine").info("app batch 0: 5 in")
    finally:
        root.handlers, root.level = handlers, level
    err = capsys.readouterr().err
    assert "KeyboardInterrupt" not in err and "Closing down" not in err
    assert "something failed" in err and "ValueError: a real error" in err
    assert "streamtide.engine app batch 0: 5 in" in err
