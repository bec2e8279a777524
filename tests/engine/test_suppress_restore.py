"""A suppression buffer that keeps old values is rebuilt from its changelog: after its local
state is lost, the engine restores the buffered records with their prior values, and a
filter below the suppress forwards exactly the tombstones of a run that lost nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from streamtide import (
    BufferConfig,
    Consumed,
    Produced,
    StreamsBuilder,
    Suppressed,
)
from streamtide.log import open_log
from streamtide.processor.topology import Topology
from tests.engine.local_driver import CLIENT, LocalDriver
from tests.engine.scenarios import INT, JSON, STRING, engine_config, make_events, write_events


def held_topology() -> Topology:
    """Counts per ``n % 5``, held back 5 s, then only the counts ``% 3 == 0``."""
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .select_key(lambda k, v: f"n{v.get('n', 0) % 5}")
        .group_by_key()
        .count()
        .suppress(Suppressed.until_time_limit(5_000, BufferConfig.unbounded()).with_name("hold"))
        .filter(lambda k, n: n % 3 == 0)
        .to_stream()
        .to("out", Produced.with_(STRING, INT))
    )
    return builder.build()


FIRST, MORE = make_events(150, seed=21), make_events(60, seed=22)


def run(root: Path, lose_state: bool) -> list[tuple]:
    log_url = f"file://{root / 'log'}"
    write_events(log_url, FIRST)
    config = engine_config(log_url, str(root / "state"), app="held", snapshot_interval=0)
    LocalDriver(held_topology(), config).run_until_caught_up()
    if lose_state:
        stores = list((root / "state" / f"client-{CLIENT}" / "held").glob("1_*/hold-store"))
        assert stores
        for store in stores:
            shutil.rmtree(store)
    write_events(log_url, MORE)
    LocalDriver(held_topology(), config).run_until_caught_up()
    log = open_log(log_url)
    return [(r.key, r.value, r.timestamp) for p in range(2) for r in log.read("out", p)]


def test_a_buffer_with_prior_values_is_restored_from_its_changelog(tmp_path) -> None:
    expected = run(tmp_path / "kept", lose_state=False)
    assert any(value is None for _, value, _ in expected)  # tombstones from prior values
    assert run(tmp_path / "lost", lose_state=True) == expected
