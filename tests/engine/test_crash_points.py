"""Every crash point of the commit protocol, and fencing, without Spark.

A driver runs batches of a two-stage stateful topology (a repartition, then a count) with
real work units, stores and the file log. It "dies" after its n-th protocol write (offset,
prepare, each seal, seal and commit records); a new driver for the same application must
reach exactly the committed state and outputs of a run that never crashed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from streamtide import Consumed, Materialized, Produced, StreamsBuilder, Topology
from streamtide.errors import FencedError
from streamtide.log import LogRecord, open_log
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import INT, JSON, STRING, engine_config, make_events, write_events

WRITES = ("create_offsets", "create_prepare", "create_seal", "create_commit")


class DriverDied(BaseException):
    """The driver process is gone: nothing after this point of the protocol happens."""


def counting_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .select_key(lambda k, v: f"n{v.get('n', 0) % 5}")
        .group_by_key()
        .count(Materialized.as_("counts"))
        .to_stream()
        .to("out", Produced.with_(STRING, INT))
    )
    return builder.build()


def setup(tmp_path: Path, events: int = 90):
    log_url = f"file://{tmp_path / 'log'}"
    write_events(log_url, make_events(events, seed=11))
    return engine_config(log_url, str(tmp_path / "state"), app="crash")


def outcome(driver: LocalDriver) -> tuple[dict, dict]:
    """Committed task states and every output/changelog partition's records."""
    log = open_log(driver.config.log)
    topics = [t for t in log.list_topics() if t != "events"]
    records = {
        (t, p): [(r.key, r.value, r.timestamp) for r in log.read(t, p)]
        for t in topics
        for p in range(log.partitions(t))
    }
    return driver.app_dir.last_committed().tasks, records


def die_after(
    driver: LocalDriver,
    n: int,
    also: tuple[tuple[object, str], ...] = (),
    set_attribute: Callable[[object, str, object], None] = setattr,
) -> list[int]:
    """Make the driver die right after its n-th protocol write (and writes of ``also``,
    ``(owner, method name)`` pairs, replaced with ``set_attribute``); returns the write
    counter."""
    count = [0]

    def wrap(owner: object, name: str, replace: Callable = setattr) -> None:
        original: Callable = getattr(owner, name)

        def write(*args, **kwargs):
            result = original(*args, **kwargs)
            count[0] += 1
            if count[0] == n:
                raise DriverDied(f"after write {n} ({name})")
            return result

        replace(owner, name, write)

    for name in WRITES:
        wrap(driver.app_dir, name)
    driver.log.parallel_seals = False  # one seal at a time: every write is a crash point
    wrap(driver.log, "seal")
    for owner, name in also:
        wrap(owner, name, set_attribute)
    return count


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A run that never crashes, and how many protocol writes it made."""
    config = setup(tmp_path_factory.mktemp("reference"))
    driver = LocalDriver(counting_topology(), config)
    count = die_after(driver, -1)
    driver.run_until_caught_up()
    assert driver.batch >= 2
    return outcome(driver), count[0]


def test_the_reference_run_writes_every_kind_of_protocol_record(reference) -> None:
    (_, records), writes = reference
    assert writes > 20
    assert sum(len(r) for (t, _), r in records.items() if t == "out") > 0


def test_a_driver_dying_after_any_write_leaves_a_state_a_new_driver_completes(
    tmp_path, reference
) -> None:
    expected, writes = reference
    for crash_at in range(1, writes + 1):
        config = setup(tmp_path / f"crash-{crash_at}")
        first = LocalDriver(counting_topology(), config)
        die_after(first, crash_at)
        with pytest.raises(DriverDied):
            first.run_until_caught_up()
        second = LocalDriver(counting_topology(), config)
        second.run_until_caught_up()
        assert outcome(second) == expected, f"crash after write {crash_at}"
        log = open_log(config.log)
        leftovers = [
            s
            for t in log.list_topics()
            for p in range(log.partitions(t))
            for s in log.list_unsealed(t, p)
        ]
        assert leftovers == [], f"unsealed segments left after a crash at write {crash_at}"


def test_a_driver_that_another_instance_took_over_from_stops_at_its_next_write(
    tmp_path, reference
) -> None:
    expected, _ = reference
    config = setup(tmp_path)
    first = LocalDriver(counting_topology(), config)
    first.run_batch()
    second = LocalDriver(counting_topology(), config)  # takes a newer epoch
    with pytest.raises(FencedError, match="another instance of application 'crash' took over"):
        first.run_batch()
    second.run_until_caught_up()
    assert outcome(second) == expected


def test_an_older_driver_that_slips_past_its_fence_check_cannot_interleave(
    tmp_path, reference
) -> None:
    """A zombie whose check raced with the take-over writes only records that already
    exist: it adopts them, so nothing is sealed twice and the outcome is unchanged."""
    expected, _ = reference
    config = setup(tmp_path)
    zombie = LocalDriver(counting_topology(), config)
    zombie.run_batch()
    successor = LocalDriver(counting_topology(), config)
    successor.run_batch()
    zombie.app_dir.check_fence = lambda: None  # its checks all happened just before
    zombie.run_batch()  # batch 1 again: every record it writes exists already
    assert zombie.app_dir.read_prepare(1, 0).epoch == successor.committer.epoch
    successor.run_until_caught_up()
    assert outcome(successor) == expected


def test_unsealed_segments_of_decided_batches_are_deleted_on_restart(tmp_path) -> None:
    config = setup(tmp_path)
    LocalDriver(counting_topology(), config).run_batch()
    log = open_log(config.log)
    records = [LogRecord(b"k", b"v", 1)]
    log.write_segment("out", 0, records, writer_id="crash/b0/s1/1_0/late-attempt")
    pending = log.write_segment("out", 0, records, writer_id="crash/b1/s0/0_0/in-flight")
    foreign = log.write_segment("out", 0, records, writer_id="other-app/b0/s0/0_0/x")
    LocalDriver(counting_topology(), config)  # a restart
    assert {s.name for s in log.list_unsealed("out", 0)} == {pending.name, foreign.name}
