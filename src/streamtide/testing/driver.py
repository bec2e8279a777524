"""``TopologyTestDriver``: runs a topology in-process, deterministically, without Spark.

One task per sub-topology (partition 0, as every topic has one partition here), running the
same code as the engine's tasks. Each record piped in is processed at once, as a batch of one
(so the wall clock is checked after every record); records a task writes to an internal
repartition topic are routed to the task that reads it before the pipe call returns. The
wall clock is a mock that moves only through ``advance_wall_clock_time``. The record cache is
off unless ``cache_enabled`` (SEMANTICS section 5): every update is emitted.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from streamtide.config import StreamsConfig
from streamtide.engine.topology_names import check_explicit_names
from streamtide.errors import TopologyError, UnknownTopicError
from streamtide.log.api import LogRecord
from streamtide.processor.topology import Topology
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.global_stores import GlobalStores
from streamtide.runtime.stream_task import StreamTask, task_options
from streamtide.serde import Serde, Serdes
from streamtide.testing.topics import TestInputTopic, TestOutputTopic
from streamtide.time import MockClock


class TopologyTestDriver:
    """Drives a topology one piped record at a time; see the module docstring."""

    def __init__(
        self,
        topology: Topology,
        config: StreamsConfig | None = None,
        initial_wall_clock_ms: int | timedelta = 0,
        *,
        cache_enabled: bool = False,
        state_dir: str | Path | None = None,
    ) -> None:
        if config is None:
            config = StreamsConfig(application_id="test-driver")
        check_explicit_names(topology, config)
        self.config = config
        self.topology = topology
        start = initial_wall_clock_ms
        if isinstance(start, timedelta):
            start = int(start.total_seconds() * 1000)
        self.clock = MockClock(start)
        self._own_state_dir = state_dir is None
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="streamtide-driver-"))
        self._topics: dict[str, list[LogRecord]] = {}
        self._committed: dict[str, TaskCommittedState] = {}
        self.tasks: list[StreamTask] = []
        self._readers: dict[str, StreamTask] = {}
        self._patterns = bool(topology.pattern_sources)
        self._unmatched: set[str] = set()  # topics no pattern source matches
        self.global_stores = GlobalStores(
            topology,
            config.application_id,
            config.default_key_serde or Serdes.bytes(),
            config.default_value_serde or Serdes.bytes(),
        )
        for sub in topology.subtopologies():
            options = {**task_options(config), "cache_enabled": cache_enabled}
            task = StreamTask(
                topology,
                sub.id,
                0,
                self,
                clock=self.clock,
                state_dir=self.state_dir,
                global_stores=self.global_stores,
                **options,
            )
            self.tasks.append(task)
            for topic in sub.source_topics:
                self._readers[task.resolve(topic)] = task
        for task in self.tasks:
            task.initialize()
        self._closed = False

    # ---- RecordCollector ---------------------------------------------------------------

    def partitions_for(self, topic: str) -> int:
        return 1

    def send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        records = self._topics.setdefault(topic, [])
        record = LogRecord(key, value, timestamp, tuple(headers or ()), len(records))
        records.append(record)
        if topic in self.global_stores.topics():
            self.global_stores.apply(topic, key, value)
        reader = self._readers.get(topic) or self._read_matching(topic)
        if reader is not None:
            reader.add_records(topic, [record])

    # ---- topics --------------------------------------------------------------------------

    def _physical(self, topic: str) -> str:
        return self.topology.resolve_topic(topic, self.config.application_id)

    def create_input_topic(
        self, topic: str, key_serde: Serde, value_serde: Serde
    ) -> TestInputTopic:
        """A topic to pipe records into; some source or global table must read it."""
        if not self._reads(self._physical(topic)):
            raise UnknownTopicError(
                f"no source of the topology reads topic {topic!r}; source topics: "
                f"{sorted(self.topology.source_topics())}"
                + "".join(
                    f", pattern of {name}: {pattern.pattern!r}"
                    for name, pattern in self.topology.pattern_sources.items()
                )
            )
        return TestInputTopic(self, self._physical(topic), key_serde, value_serde)

    def _reads(self, topic: str) -> bool:
        return (
            topic in self._readers
            or topic in self.global_stores.topics()
            or self._read_matching(topic) is not None
        )

    def _read_matching(self, topic: str) -> StreamTask | None:
        """The task that reads ``topic`` from now on because a pattern source matches it
        (None: no pattern source does)."""
        if not self._patterns or topic in self._unmatched:
            return None
        if not self.topology.match_topics([*self._readers, topic], self.config.application_id):
            self._unmatched.add(topic)
            return None
        for source, pattern in self.topology.pattern_sources.items():
            if pattern.fullmatch(topic):
                for task in self.tasks:
                    if any(s.name == source for s in task.subtopology.sources):
                        task.read_topic(topic, source)
                        self._readers[topic] = task
                        return task
        return None

    def create_output_topic(
        self, topic: str, key_serde: Serde, value_serde: Serde
    ) -> TestOutputTopic:
        """A topic to read what the topology wrote (internal topics by their short name)."""
        return TestOutputTopic(self, self._physical(topic), key_serde, value_serde)

    def topic_records(self, topic: str) -> list[LogRecord]:
        return self._topics.get(topic, [])

    def produced_topic_names(self) -> set[str]:
        return set(self._topics)

    # ---- driving -------------------------------------------------------------------------

    @property
    def wall_clock_ms(self) -> int:
        return self.clock.now_ms()

    def pipe_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Iterable[tuple[str, bytes]] = (),
    ) -> None:
        """Append a serialized record to an input topic and process everything it causes."""
        self._check_open()
        if not self._reads(topic):
            raise UnknownTopicError(f"no source of the topology reads topic {topic!r}")
        self.send(topic, 0, key, value, timestamp, headers)
        self._drain()

    def _drain(self) -> None:
        progress = True
        while progress:
            progress = False
            for task in self.tasks:
                if task.buffered:
                    task.process()
                    progress = True

    def commit(self) -> None:
        """Commit every task: caches emit, stores send their writes to the changelogs, which
        this driver holds at once, so the commit is confirmed and the stores apply them."""
        self._check_open()
        while True:
            for task in self.tasks:
                self._committed[task.task_id] = task.commit()
                task.stores.on_committed()
            if not any(task.buffered for task in self.tasks):
                return
            self._drain()

    def advance_wall_clock_time(self, advance: int | timedelta) -> None:
        """Move the mock wall clock and run wall-clock punctuators of every task."""
        self._check_open()
        self.clock.advance(advance)
        for task in self.tasks:
            task.punctuate_wall_clock()
            self._drain()
        self.commit()

    # ---- state ---------------------------------------------------------------------------

    def get_state_store(self, name: str) -> Any:
        if name in self.global_stores:
            return self.global_stores[name]
        for task in self.tasks:
            if name in task.subtopology.stores:
                return task.store(name)
        raise TopologyError(
            f"unknown state store {name!r}; stores: {sorted(self.topology.store_builders)}"
        )

    def _typed_store(self, name: str, kind: str) -> Any:
        store = self.get_state_store(name)
        if getattr(store, "kind", None) != kind:
            raise TopologyError(
                f"state store {name!r} is a {getattr(store, 'kind', 'generic')} store, not {kind}"
            )
        return store

    def get_key_value_store(self, name: str) -> Any:
        return self._typed_store(name, "key_value")

    def get_versioned_key_value_store(self, name: str) -> Any:
        """A versioned store (``get(key)``, ``get(key, as_of)``, ``get_versions``)."""
        return self._typed_store(name, "versioned_key_value")

    def get_window_store(self, name: str) -> Any:
        return self._typed_store(name, "window")

    def get_session_store(self, name: str) -> Any:
        return self._typed_store(name, "session")

    def metrics(self, task_id: str | None = None) -> dict[str, int]:
        """Counters of one task, or summed over every task."""
        total: dict[str, int] = {}
        for task in self.tasks:
            if task_id is None or task.task_id == task_id:
                for name, value in task.metrics.as_dict().items():
                    total[name] = total.get(name, 0) + value
        return total

    def committed_state(self, task_id: str) -> TaskCommittedState:
        return self._committed[task_id]

    # ---- lifecycle -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the test driver is closed")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for task in self.tasks:
                task.close()
        finally:
            if self._own_state_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
