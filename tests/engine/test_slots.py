"""Two applications in one Spark session: one whose continuous work units hold every task
slot leaves none for the other, which fails at once, naming it (``engine.slots``)."""

from __future__ import annotations

import threading

import pytest

from streamtide import StreamsApp
from streamtide.errors import ConfigError
from tests.engine.scenarios import engine_config, make_events, session_topology, write_events

pytestmark = pytest.mark.spark

#: A guard against waiting forever for slots that never free (what happened before).
HANG_GUARD_S = 300


@pytest.mark.parametrize("execution", ["continuous", "micro_batch"])
def test_a_second_application_fails_at_once_naming_the_one_that_holds_the_slots(
    spark, log_url, tmp_path, execution: str
) -> None:
    write_events(log_url, make_events(40, seed=61))
    holder_config = engine_config(
        log_url, str(tmp_path / "a"), app="holder", execution="continuous"
    )
    holder = StreamsApp(session_topology(), holder_config, spark=spark)
    holder.run_batch()  # its work units now hold both slots of local[2], until it stops
    config = engine_config(log_url, str(tmp_path / "b"), app="newcomer", execution=execution)
    newcomer = StreamsApp(session_topology(), config, spark=spark)
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            newcomer.run_batch()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(HANG_GUARD_S)
    if thread.is_alive():
        holder.stop()
        thread.join()
        pytest.fail("the second application waited for the slots instead of failing")
    error = outcome.get("error")
    assert isinstance(error, ConfigError), f"expected a clear ConfigError, got {error!r}"
    message = str(error)
    assert "application 'holder' holds 2 of the 2 task slot(s) of executor driver" in message
    assert "application 'newcomer' cannot run in this Spark session" in message
    assert "Spark reports 2 of them busy" in message
    if execution == "continuous":
        assert newcomer._workers.launched == 0  # it launched nothing that would queue
    holder.stop()
    newcomer.run_batch()  # with the slots free, the same application runs
