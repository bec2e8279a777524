"""Store and internal topic names that survive topology changes: the start-time check against
the names recorded in the application directory, and explicit naming (KIP-1111)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import (
    BufferConfig,
    Consumed,
    Grouped,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsApp,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    Topology,
    TopologyError,
)
from streamtide.engine.app_dir import AppDirectory, app_dir_for
from streamtide.engine.topology_names import check_resource_names
from streamtide.log import open_log
from streamtide.processor.resource_names import ResourceNames
from streamtide.testing import TopologyTestDriver

STRING = Serdes.string()


def counts(extra_filter: bool = False, named: bool = False) -> Topology:
    """A re-keyed count: a repartition topic and a store; ``extra_filter`` adds an operator
    before them, which shifts every generated name after it."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, STRING))
    if extra_filter:
        stream = stream.filter(lambda k, v: v is not None)
    grouped = stream.group_by(lambda k, v: v, Grouped.as_("by-value") if named else None)
    grouped.count(Materialized.as_("counts") if named else None)
    return builder.build()


def config(tmp_path, **overrides) -> StreamsConfig:
    return StreamsConfig(
        application_id="names",
        log=f"file://{tmp_path / 'log'}",
        state_dir=str(tmp_path),
        **overrides,
    )


def start(tmp_path, topology: Topology, **overrides) -> AppDirectory:
    """What a driver does at start: take an epoch, then check and record the names."""
    settings = config(tmp_path, **overrides)
    app_dir = AppDirectory(app_dir_for(settings), settings.application_id)
    app_dir.take_epoch()
    check_resource_names(app_dir, topology, settings)
    return app_dir


def test_the_names_are_recorded_at_the_first_start(tmp_path) -> None:
    app_dir = start(tmp_path, counts())
    assert app_dir.read_resource_names() == ResourceNames(
        ("KSTREAM-AGGREGATE-STATE-STORE-0000000002",),
        ("KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition",),
    )


def test_a_topology_that_lost_its_generated_names_is_refused(tmp_path) -> None:
    old = ResourceNames.of(counts())
    start(tmp_path, counts())
    with pytest.raises(TopologyError) as info:
        start(tmp_path, counts(extra_filter=True))
    message = str(info.value)
    new = ResourceNames.of(counts(extra_filter=True))
    for name in (*old.stores, *old.topics, *new.stores, *new.topics):
        assert name in message
    assert "Materialized.as_" in message and "Named.as_" in message
    assert "allow_topology_name_changes=True" in message


def test_opting_in_starts_and_records_the_new_names(tmp_path) -> None:
    start(tmp_path, counts())
    app_dir = start(tmp_path, counts(extra_filter=True), allow_topology_name_changes=True)
    assert app_dir.read_resource_names() == ResourceNames.of(counts(extra_filter=True))
    start(tmp_path, counts(extra_filter=True))  # the recorded names are the new ones


def test_explicit_names_survive_upstream_changes(tmp_path) -> None:
    start(tmp_path, counts(named=True))
    start(tmp_path, counts(extra_filter=True, named=True))


def test_new_stores_alone_are_accepted(tmp_path) -> None:
    start(tmp_path, counts(named=True))
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, STRING))
    stream.group_by(lambda k, v: v, Grouped.as_("by-value")).count(Materialized.as_("counts"))
    stream.group_by_key().count(Materialized.as_("per-key"))
    app_dir = start(tmp_path, builder.build())
    assert "per-key" in app_dir.read_resource_names().stores


def explicitly_named() -> Topology:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key()
    (
        grouped.windowed_by(SessionWindows.with_inactivity_gap(timedelta(seconds=5)))
        .count(Materialized.as_("sessions"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
    )
    return builder.build()


def test_explicit_naming_rejects_generated_names_and_lists_them(tmp_path) -> None:
    strict = config(tmp_path, ensure_explicit_internal_resource_naming=True)
    with pytest.raises(TopologyError) as info:
        TopologyTestDriver(counts(), strict)
    names = ResourceNames.of(counts())
    for name in (*names.stores, *names.topics):
        assert name in str(info.value)
    with pytest.raises(TopologyError, match="generated names"):
        start(tmp_path, counts(), ensure_explicit_internal_resource_naming=True)
    TopologyTestDriver(explicitly_named(), strict).close()
    start(tmp_path, explicitly_named(), ensure_explicit_internal_resource_naming=True)


@pytest.mark.spark
def test_the_app_refuses_a_renamed_topology_at_start(spark, tmp_path) -> None:
    settings = config(tmp_path, cache_enabled=False)
    open_log(settings.log).create_topic("in", 1)
    StreamsApp(counts(), settings, spark=spark).run_until_caught_up(timeout=300)
    changed = StreamsApp(counts(extra_filter=True), settings, spark=spark)
    with pytest.raises(TopologyError, match="no longer has state"):
        changed.run_until_caught_up(timeout=300)
