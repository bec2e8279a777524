"""Settings for the whole suite, and the Kafka-protocol test broker (one per session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.kafka_broker import Broker, BrokerUnavailable, delete_all_topics, start_broker

# Property tests run on small, shared CI machines: time them out by example count, not by a
# per-example deadline that a busy neighbour could break.
settings.register_profile("streamtide", deadline=None, print_blob=True)
settings.load_profile("streamtide")

_broker_failure: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the broker carries the ``kafka`` marker (``-m "not kafka"``)."""
    for item in items:
        if "kafka_broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The session's broker, started on first use and stopped with SIGTERM at the end. Tests
    using it skip, with the reason, where it cannot start."""
    if _broker_failure:
        pytest.skip(_broker_failure[0])
    try:
        broker = start_broker(tmp_path_factory.mktemp("kafka") / "data")
    except BrokerUnavailable as e:
        _broker_failure.append(f"the Kafka test broker cannot start here: {e}")
        pytest.skip(_broker_failure[0])
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_url(kafka_broker: Broker) -> str:
    """The ``kafka://`` URL of the session's broker, emptied of topics for this test."""
    delete_all_topics(kafka_broker)
    return kafka_broker.url


@pytest.fixture(autouse=True)
def _stop_apps_after_each_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop every ``StreamsApp`` a test created: a continuous application keeps its work
    units (one busy core each) until stopped, and the suite shares one SparkSession."""
    from streamtide.engine.app import StreamsApp

    created: list[StreamsApp] = []
    original = StreamsApp.__init__

    def tracking_init(self: StreamsApp, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        created.append(self)

    monkeypatch.setattr(StreamsApp, "__init__", tracking_init)
    yield
    for app in created:
        try:
            app.stop()
        except Exception:  # a test may have broken its app on purpose
            pass


@pytest.fixture
def rocksdb_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories at which RocksDB databases are really opened during a test, in order
    (the RocksDB store's open, counted; the databases are real)."""
    import streamtide.state.rocksdb as rocksdb_module

    seen: list[str] = []
    real = rocksdb_module.Rdict

    def counting(path: str, *args: object, **kwargs: object) -> object:
        seen.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(rocksdb_module, "Rdict", counting)
    return seen
