"""The installed ``streamtide`` command (the console script next to this interpreter), run as a
subprocess the way a user runs it from a shell."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

#: The console script pip installed with the project (``.venv/bin/streamtide`` under ./dev).
STREAMTIDE = Path(sys.executable).with_name("streamtide")


def command_env(**extra: str) -> dict[str, str]:
    """This environment without a log chosen elsewhere, with the venv's interpreter for Spark's
    Python workers and no terminal (so output is never decorated)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMTIDE_")}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["TERM"] = "dumb"
    env.update(extra)
    return env


def streamtide(
    *args: str,
    cwd: Path | str | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``streamtide ARGS`` and return what it printed and its exit status."""
    assert STREAMTIDE.exists(), f"{STREAMTIDE} is not installed (run ./dev test)"
    return subprocess.run(
        [str(STREAMTIDE), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env or command_env(),
        timeout=timeout,
    )


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The non-empty lines the command wrote to stderr."""
    return [line for line in result.stderr.splitlines() if line.strip()]


class Running:
    """A command running in a session (process group) of its own, its stderr and stdout read
    line by line as they come, so a test can act on a line (send Ctrl-C) and then see what
    followed. ``close`` kills whatever of the group is left (a JVM, say)."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            args,
            cwd=cwd,
            env=env or command_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, marker: str, timeout: float) -> int:
        """Wait until a line containing ``marker`` was printed; the number of lines so far."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: self._ended or any(marker in line for line in self.lines), timeout
            )
            assert found and not (self._ended and not any(marker in x for x in self.lines)), (
                f"no line with {marker!r}:\n" + "\n".join(self.lines[-40:])
            )
            return len(self.lines)

    def ctrl_c(self) -> None:
        """SIGINT to the whole process group, as Ctrl-C in a terminal sends it."""
        os.killpg(self.process.pid, signal.SIGINT)

    def finish(self, timeout: float) -> int:
        """Wait until the command ended and its output closed (every process holding it is
        gone); its exit status. Fails after ``timeout`` seconds."""
        with self._changed:
            closed = self._changed.wait_for(lambda: self._ended, timeout)
        assert closed, "the output stayed open:\n" + "\n".join(self.lines[-40:])
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
