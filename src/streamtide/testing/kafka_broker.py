"""A local Kafka-protocol broker for tests and the Kafka demo: the ``noida-db`` binary (a
development dependency) on a free loopback port.

Started directly (not through its console-script wrapper) so that SIGTERM reaches the server
itself; docs/kafka.md says how it differs from Apache Kafka. ``start_broker`` raises
``BrokerUnavailable`` with a reason when the binary is missing or cannot start, so that tests
needing it can skip with that reason.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class BrokerUnavailable(Exception):
    """The test broker cannot run here; the message says why."""


@dataclass
class Broker:
    """A running broker process and how to reach it."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    data_dir: Path
    output: Path

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def stop(self) -> None:
        """SIGTERM (lets it save its state), then SIGKILL if it does not exit in time."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)


def binary() -> Path:
    """The broker binary shipped in the ``noida_db`` package."""
    try:
        from importlib.resources import files

        path = Path(str(files("noida_db") / "noida-db"))
    except ImportError as e:
        raise BrokerUnavailable(f"the noida-db package is not installed ({e})") from None
    if not path.is_file():
        raise BrokerUnavailable(f"the noida-db binary is missing at {path}")
    if not os.access(path, os.X_OK):
        try:
            path.chmod(0o755)
        except OSError as e:
            raise BrokerUnavailable(f"the noida-db binary is not executable: {e}") from None
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def start_broker(data_dir: Path, *, port: int | None = None) -> Broker:
    """Start the broker with its data in ``data_dir`` and wait until it answers metadata."""
    host = "127.0.0.1"
    exe = binary()
    port = port or free_port(host)
    data_dir.mkdir(parents=True, exist_ok=True)
    output = data_dir.parent / f"{data_dir.name}.out"
    command = [str(exe), "start", "--only", "kafka", "--host", host]
    command += ["--kafka-port", str(port), "--data-dir", str(data_dir)]
    with open(output, "ab") as out:
        try:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        except OSError as e:
            raise BrokerUnavailable(f"cannot run {exe}: {e}") from None
    broker = Broker(process, host, port, data_dir, output)
    try:
        _wait_until_ready(broker)
    except BaseException:
        broker.stop()
        raise
    return broker


def _die_with_parent() -> None:
    """In the child: SIGTERM it when the test process dies, even by SIGKILL (Linux), so no
    broker outlives an interrupted test run."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wait_until_ready(broker: Broker) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if broker.process.poll() is not None:
            tail = broker.output.read_text(errors="replace")[-600:]
            raise BrokerUnavailable(
                f"the broker exited with code {broker.process.returncode}: {tail.strip()}"
            )
        try:
            admin.list_topics(timeout=1.0)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise BrokerUnavailable(
                    f"the broker did not answer on {broker.bootstrap} within {START_TIMEOUT_S} s"
                ) from None
            time.sleep(0.1)
