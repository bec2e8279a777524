"""When a driver on Kafka checks that no newer driver took over (docs/engine.md, "Drivers
fence each other through Kafka"): before work units that will initialise producers run, and
before an idle batch's commit; not before a batch of long-running units that keep theirs."""

from __future__ import annotations

import pytest

from streamtide.engine.app_dir import AppDirectory
from streamtide.engine.kafka_committer import KafkaBatchCommitter
from streamtide.engine.protocol import CommitRecord
from streamtide.errors import FencedError
from streamtide.log import open_log
from tests.kafka_broker import KAFKA_TEST_OPTIONS


def _driver(log, tmp_path, app: str, machine: str, *, continuous: bool) -> KafkaBatchCommitter:
    committer = KafkaBatchCommitter(AppDirectory(tmp_path / machine), log, app)
    committer.units_fence = continuous
    committer.start()
    committer.fence_work_units([])
    return committer


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "micro-batch"])
def test_a_driver_taken_over_stops_before_its_units_could_initialise_a_producer(
    kafka_url, tmp_path, continuous
) -> None:
    log = open_log(kafka_url, **KAFKA_TEST_OPTIONS)
    app = f"fence-rule-{continuous}"
    first = _driver(log, tmp_path, app, "machine-1", continuous=continuous)
    checks: list[str] = []
    write = first._write_fenced
    first._write_fenced = lambda *a: checks.append(a[0]) or write(*a)  # type: ignore[method-assign]
    try:
        first.begin_batch(0)
        first.units_launched()
        assert len(checks) == 1  # micro-batch: before the batch; continuous: before launches
        first.begin_batch(1)  # continuous: units that keep their producers, nothing asked
        assert len(checks) == (1 if continuous else 2)
        second = _driver(log, tmp_path, app, "machine-2", continuous=continuous)
        with pytest.raises(FencedError, match="took over"):
            first.begin_batch(2)
            first.units_launched()  # units launched anew would re-initialise fenced ids
        with pytest.raises(FencedError, match="took over"):  # an idle batch checks too
            first.commit(CommitRecord(2, first.epoch, {}))
        if continuous:  # a retried unit may initialise its producer anew
            with pytest.raises(FencedError, match="took over"):
                first.retries(RuntimeError("a work unit failed"))
        second.close()
    finally:
        first.close()
        log.close()
