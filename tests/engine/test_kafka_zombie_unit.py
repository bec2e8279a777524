"""A zombie work unit on Kafka: a unit holding two tasks is stopped (SIGSTOP) with its
transaction open, one of its tasks moves to another slot and commits there, the other runs on
the slot's next work unit; the stopped unit is then continued. Kafka must refuse its commit
(the driver fenced its transactional id before the moved task's new owner ran), so every
count is at read_committed exactly once. Without that fence the same scenario commits the
zombie's outputs a second time: the broker's fence on the id is what holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.engine.unit_ids import UnitIds, UnitKey
from streamtide.log import LogRecord, open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import run_work_unit
from tests.engine.zombie_unit import FENCED, config_for, counting_topology, spec_for
from tests.kafka_broker import KAFKA_TEST_OPTIONS, read_committed

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
KEYS = {0: ["a", "b", "a"], 1: ["c", "c", "d"]}  # per input partition (task 0_p)
EXPECTED = Counter({("a", 1): 1, ("b", 1): 1, ("a", 2): 1, ("c", 1): 1, ("c", 2): 1, ("d", 1): 1})


def _input(url: str, app: str) -> None:
    log = open_log(url, **KAFKA_TEST_OPTIONS)
    for topic in ("in", "counts-out", f"{app}-counts-changelog"):
        if log.has_topic(topic):
            log.delete_topic(topic)
    log.create_topic("in", 2)
    log.create_topic("counts-out", 1)
    log.create_topic(f"{app}-counts-changelog", 2, configs={"cleanup.policy": "compact"})
    for partition, keys in KEYS.items():
        records = [LogRecord(k.encode(), b"x", 1_000 + i) for i, k in enumerate(keys)]
        log.append("in", partition, records)
    log.close()


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def _zombie(url: str, tmp: Path, app: str, transactional_id: str) -> subprocess.Popen[bytes]:
    """The work unit of slot c1 running 0_0 and 0_1, stopped with its transaction open."""
    marker = tmp / "zombie-open"
    args = [sys.executable, "-m", "tests.engine.zombie_unit", url, str(tmp / "zombie-state")]
    args += [app, transactional_id, "3", str(marker)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    zombie = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (marker.exists() and _stopped(zombie.pid)):
        assert zombie.poll() is None, "the zombie work unit ended before it stopped"
        assert time.monotonic() < deadline, "the zombie work unit never stopped"
        time.sleep(0.05)
    return zombie


def _scenario(url: str, tmp: Path, app: str, fence: bool) -> tuple[int, bytes, Counter]:
    """Run the scenario; the zombie's exit status and output, and the counts committed."""
    _input(url, app)
    log = open_log(url, **KAFKA_TEST_OPTIONS)
    committer = KafkaBatchCommitter(AppDirectory(tmp / "app"), log, app)
    committer.start()
    committer.fence_work_units(["0_0", "0_1"])
    ids = committer.unit_ids
    assert ids is not None
    if not fence:  # the same records, but nothing fenced when a task moves
        ids = UnitIds(app, ids.to_dict(), lambda data: None, lambda tids: None)
    first = ids.ids_for({UnitKey("c1", 0, 0): ["0_0", "0_1"]})
    zombie = _zombie(url, tmp, app, first[UnitKey("c1", 0, 0)])
    try:
        # 0_0 moves to c2; 0_1 stays on c1, whose next work unit runs under a new generation
        moved = ids.ids_for({UnitKey("c1", 0, 0): ["0_1"], UnitKey("c2", 0, 0): ["0_0"]})
        assert moved[UnitKey("c1", 0, 0)] != first[UnitKey("c1", 0, 0)]
        assert ids.unfenced() == sorted(moved.values()) or not fence
        config = config_for(url, str(tmp / "state"), app)
        for client, task in (("c2", "0_0"), ("c1", "0_1")):
            spec = spec_for(client, [task], 3, moved[UnitKey(client, 0, 0)])
            report = run_work_unit(counting_topology(), config, log, spec, make_task_stores)
            assert report["tasks"][0]["state"]["offsets"] == {f"in:{task[-1]}": 3}
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
        out, _ = zombie.communicate(timeout=120)
        committer.close()
        log.close()
    rows = read_committed(url, "counts-out")[0]
    counts = Counter((k.decode(), int.from_bytes(v, "big")) for k, v, _ in rows)
    return zombie.returncode, out, counts


def test_a_zombie_work_unit_is_fenced_when_one_of_its_tasks_moved(kafka_url, tmp_path) -> None:
    status, out, counts = _scenario(kafka_url, tmp_path, "zombie-fenced", fence=True)
    assert status == FENCED, f"the zombie's commit went through: {out!r}"
    assert counts == EXPECTED


def test_without_fencing_the_moved_tasks_id_the_zombie_commits_a_duplicate(
    kafka_url, tmp_path
) -> None:
    """The control: the test above fails if the driver does not fence."""
    status, out, counts = _scenario(kafka_url, tmp_path, "zombie-unfenced", fence=False)
    assert status == 0, out
    assert counts == EXPECTED + EXPECTED


def test_a_driver_with_another_application_directory_fences_the_ids_kafka_recorded(
    kafka_url, tmp_path
) -> None:
    """Two drivers on two machines share no application directory: the second finds the
    first's work-unit ids in Kafka and fences them (a work unit of the first, its transaction
    open, cannot commit), and the first can record no id after that."""
    from streamtide.errors import FencedError
    from streamtide.log import ProducerFencedError
    from streamtide.log.kafka_transaction import KafkaTransaction

    app = "zombie-two-machines"
    _input(kafka_url, app)
    log = open_log(kafka_url, **KAFKA_TEST_OPTIONS)
    first = KafkaBatchCommitter(AppDirectory(tmp_path / "machine-1"), log, app)
    first.start()
    first.fence_work_units(["0_0", "0_1"])
    assert first.unit_ids is not None
    handed = first.unit_ids.ids_for({UnitKey("e1", 0, 0): ["0_0", "0_1"]})
    unit = KafkaTransaction(log, handed[UnitKey("e1", 0, 0)], "work unit of the first driver")
    unit.begin()
    unit.produce("counts-out", 0, b"a", b"zombie", 1_000)
    unit.flush()

    second = KafkaBatchCommitter(AppDirectory(tmp_path / "machine-2"), log, app)
    second.start()
    second.fence_work_units(["0_0", "0_1"])
    with pytest.raises(ProducerFencedError):
        unit.commit()
    assert read_committed(kafka_url, "counts-out")[0] == []  # aborted, nothing left open
    with pytest.raises(FencedError, match="took over"):
        first.unit_ids.ids_for({UnitKey("e1", 0, 0): ["0_0"], UnitKey("e2", 0, 0): ["0_1"]})
    unit.close()
    first.close()
    second.close()
    log.close()
