"""``StreamTask``: one partition of one sub-topology, processed a piece of a batch at a time.

The same class runs under the test driver and inside Spark work units: the caller feeds it
raw records (``add_records``, ``add_table``), lets it ``process``, calls
``punctuate_wall_clock`` when it runs without input, and takes ``commit()`` — the task's
committed metadata — at the end.

``process`` is the task's one loop (docs/engine.md, "One path"). It deserializes each topic's
columns at once, orders the rows as the partition group would (lowest head timestamp first),
and cuts them into pieces only where exact semantics need a cut:

- rows of different source topics are never in one piece (a run of one topic at a time);
- within a run, where a punctuation falls due or a row cannot be processed, and often enough
  for wall-clock punctuation (``runtime.pieces``).

Each piece goes to its source node as one ``ColumnBatch`` and through the graph
(``runtime.graph``); the graph hands rows one at a time where its shape needs it
(``runtime.interleaving``). Rows that failed in an operator go to the processing exception
handler in input order once the piece is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamtide.config import StreamsConfig
from streamtide.errors import SerdeError, UserCodeError, from_infrastructure
from streamtide.handlers import Handler, ProcessingHandlerResponse
from streamtide.processor.api import PunctuationType, StateStore
from streamtide.processor.nodes import ProcessorNodeDef, SinkNodeDef, SourceNodeDef
from streamtide.processor.operator import ColumnOperator
from streamtide.processor.punctuation import PunctuationQueue, PunctuationSchedule
from streamtide.processor.topology import Topology
from streamtide.runtime.adapter import adapt
from streamtide.runtime.collector import RecordCollector
from streamtide.runtime.columns import BatchInput, InputColumns, RawRecord, processing_order
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.graph import Node
from streamtide.runtime.interleaving import depth_first_nodes
from streamtide.runtime.metrics import TaskMetrics
from streamtide.runtime.node_context import NodeContext
from streamtide.runtime.pieces import PieceRunner, SourceInput
from streamtide.runtime.record_errors import RecordErrors
from streamtide.runtime.row_failures import Failures
from streamtide.runtime.sink import SinkOperator, TopicChoosingSink
from streamtide.runtime.source import SourceNode, own_values
from streamtide.runtime.stamping import SourceStamper
from streamtide.runtime.store_context import DelegatingStoreContext
from streamtide.runtime.task_stores import TaskStores
from streamtide.serde import Serde, Serdes, resolve_serde
from streamtide.task_id import TaskId
from streamtide.time import UNKNOWN_TIME, Clock, SystemClock
from streamtide.timestamp_extractor import TimestampExtractor

log = logging.getLogger(__name__)


class _StoreContext(DelegatingStoreContext):
    """What the task's stores see of it."""

    _task: StreamTask

    def __init__(self, task: StreamTask) -> None:
        self._task = task

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def register(self, store: StateStore) -> None:
        self._task.register_store(store)


def task_options(config: StreamsConfig) -> dict[str, Any]:
    """The ``StreamTask`` settings an application's config gives (engine and test driver)."""
    return {
        "application_id": config.application_id,
        "default_key_serde": config.default_key_serde,
        "default_value_serde": config.default_value_serde,
        "deserialization_handler": config.deserialization_exception_handler,
        "processing_handler": config.processing_exception_handler,
        "dead_letter_topic": config.errors_dead_letter_topic,
        "invalid_timestamp_handler": config.invalid_timestamp_handler,
        "default_timestamp_extractor": config.default_timestamp_extractor,
        "cache_enabled": config.cache_enabled,
    }


def task_name(subtopology_id: int, partition: int) -> str:
    return str(TaskId(subtopology_id, partition))


class StreamTask:
    """Processes one partition of one sub-topology; owns stream time, schedules and stores."""

    #: The largest piece in rows (None: no limit). With 1 every input row goes through the
    #: graph on its own (record at a time), which must give the same results: tests compare.
    max_piece_rows: int | None = None

    def __init__(
        self,
        topology: Topology,
        subtopology_id: int,
        partition: int,
        collector: RecordCollector,
        *,
        application_id: str = "streamtide-app",
        clock: Clock | None = None,
        state_dir: Path | str = "./streamtide-state",
        default_key_serde: Serde[Any] | None = None,
        default_value_serde: Serde[Any] | None = None,
        committed: TaskCommittedState | None = None,
        deserialization_handler: str | Handler = "fail",
        processing_handler: str | Handler = "fail",
        dead_letter_topic: str | None = None,
        invalid_timestamp_handler: str = "fail",
        cache_enabled: bool = False,
        stores: TaskStores | None = None,
        default_timestamp_extractor: TimestampExtractor | None = None,
        global_stores: Mapping[str, Any] | None = None,
    ) -> None:
        self.topology = topology
        self.global_stores = global_stores or {}
        self.subtopology = topology.subtopology(subtopology_id)
        self.partition = partition
        self.task_id = task_name(subtopology_id, partition)
        self.application_id = application_id
        self.collector = collector
        self.clock = clock or SystemClock()
        self.state_dir = Path(state_dir) / application_id / self.task_id
        self.default_key_serde = default_key_serde or Serdes.bytes()
        self.default_value_serde = default_value_serde or Serdes.bytes()
        self.deserialization_handler = deserialization_handler
        self.invalid_timestamp_handler = invalid_timestamp_handler
        self.cache_enabled = cache_enabled
        #: whether a row that fails can be skipped (the handler is not ``"fail"``)
        self.may_continue_after_failure = processing_handler != "fail"
        self.metrics = TaskMetrics()
        self.record_errors = RecordErrors(
            self.task_id,
            partition,
            collector,
            self.metrics,
            processing=processing_handler,
            deserialization=deserialization_handler,
            dead_letter_topic=dead_letter_topic,
            deserialization_dead_letter_topic=dead_letter_topic or f"{application_id}-dlq",
        )
        committed = committed or TaskCommittedState()
        self.stream_time = committed.stream_time
        self._offsets = dict(committed.offsets)
        self._restored_schedules = dict(committed.schedules)
        self._partition_times = committed.partition_times
        self.default_timestamp_extractor = default_timestamp_extractor
        self._stampers: dict[str, SourceStamper] = {}
        self._queues = {
            PunctuationType.STREAM_TIME: PunctuationQueue(PunctuationType.STREAM_TIME),
            PunctuationType.WALL_CLOCK_TIME: PunctuationQueue(PunctuationType.WALL_CLOCK_TIME),
        }
        self.stream_queue = self._queues[PunctuationType.STREAM_TIME]
        self.wall_queue = self._queues[PunctuationType.WALL_CLOCK_TIME]
        self._pieces = PieceRunner(self)
        self._flush_listeners: list[tuple[Node, Callable[[], None]]] = []
        self.stores = stores or TaskStores(topology, self.subtopology.stores)
        self.failures = Failures(self.task_id, partition, self.record_errors)
        self._nodes: dict[str, Node] = {}
        self._sources: dict[str, SourceNode] = {}
        self._build_nodes()
        self.batch_input = BatchInput([self.resolve(t) for t in self.subtopology.source_topics])
        self._initialized = False
        self._closed = False

    # ---- setup ---------------------------------------------------------------------------

    def resolve(self, topic: str) -> str:
        return self.topology.resolve_topic(topic, self.application_id)

    def _build_nodes(self) -> None:
        failures = self.failures
        for definition in self.subtopology.nodes:
            if isinstance(definition, SourceNodeDef):
                extractor = definition.timestamp_extractor or self.default_timestamp_extractor
                value_serde = resolve_serde(definition.value_serde, self.default_value_serde)
                node: Node = SourceNode(
                    definition.name,
                    resolve_serde(definition.key_serde, self.default_key_serde),
                    value_serde,
                    failures,
                    own_values(
                        self.topology,
                        definition,
                        value_serde,
                        self.default_value_serde,
                        extracted=extractor is not None,
                    ),
                )
                for topic in definition.topics:
                    self._sources[self.resolve(topic)] = node  # type: ignore[assignment]
                    if extractor is not None:
                        self._add_stamper(extractor, self.resolve(topic))
            elif isinstance(definition, ProcessorNodeDef):
                node = Node(definition.name, definition.stores, failures)
            elif isinstance(definition, SinkNodeDef):
                node = Node(definition.name, (), failures)
                node.attach(self._sink_operator(definition))
            self._nodes[definition.name] = node
        for definition in self.subtopology.nodes:
            for child in definition.children:
                self._nodes[definition.name].add_child(self._nodes[child])
        for name in depth_first_nodes(self.subtopology, self.resolve):
            self._nodes[name].depth_first = True
        for definition in self.subtopology.nodes:
            if isinstance(definition, ProcessorNodeDef):
                node = self._nodes[definition.name]
                node.attach(adapt(self._supply(definition), self, node))

    def _supply(self, definition: ProcessorNodeDef) -> Any:
        """A new processor from the node's supplier (user code for a Processor API node)."""
        try:
            return definition.supplier()  # type: ignore[misc]
        except Exception as error:
            raise UserCodeError(
                f"the processor supplier raised {type(error).__name__}: {error}",
                task_id=self.task_id,
                node=definition.name,
            ) from error

    def _sink_operator(self, definition: SinkNodeDef) -> ColumnOperator:
        """The operator of a sink: to one topic, or to the topic chosen per record."""
        key_serde = resolve_serde(definition.key_serde, self.default_key_serde)
        value_serde = resolve_serde(definition.value_serde, self.default_value_serde)
        defaults = definition.key_serde is None or definition.value_serde is None
        if definition.topic_extractor is not None:
            return TopicChoosingSink(definition, key_serde, value_serde, self.collector, defaults)
        return SinkOperator(
            definition,
            self.resolve(definition.topic),
            key_serde,
            value_serde,
            self.collector,
            uses_default_serdes=defaults,
        )

    def read_topic(self, topic: str, source: str) -> None:
        """Let source node ``source`` (a pattern source) read ``topic`` from now on."""
        self._sources[topic] = self._nodes[source]  # type: ignore[assignment]
        self.batch_input.add_topic(topic)
        definition = self.subtopology.node(source)
        assert isinstance(definition, SourceNodeDef)
        extractor = definition.timestamp_extractor or self.default_timestamp_extractor
        if extractor is not None:
            self._add_stamper(extractor, topic)

    def _add_stamper(self, extractor: TimestampExtractor, topic: str) -> None:
        key = offset_key(topic, self.partition)
        self._stampers[topic] = SourceStamper(
            extractor,
            topic,
            self.partition,
            self.task_id,
            self._partition_times.get(key, UNKNOWN_TIME),
        )

    def initialize(self) -> StreamTask:
        """Open the stores and call ``init`` on every operator (in topology order)."""
        if self._initialized:
            return self
        self.stores.open(_StoreContext(self), self.collector, self.partition, self._offsets)
        for node in self._nodes.values():
            operator = node.operator
            if operator is not None:
                context = NodeContext(self, node)
                node.call(partial(operator.init, context))
        self._initialized = True
        return self

    def register_store(self, store: StateStore) -> None:
        self.stores.register(store)

    def store(self, name: str) -> Any:
        """The task's store ``name``, or the global store of that name."""
        if name in self.global_stores:
            return self.global_stores[name]
        return self.stores.get(name)

    def restored_schedule_time(self, key: str) -> int | None:
        return self._restored_schedules.pop(key, None)

    def add_schedule(self, schedule: PunctuationSchedule) -> None:
        self._queues[schedule.punctuation_type].add(schedule)

    def add_flush_listener(self, node: Node, listener: Callable[[], None]) -> None:
        self._flush_listeners.append((node, listener))

    # ---- input ---------------------------------------------------------------------------

    def add_records(self, topic: str, records: Iterable[RawRecord]) -> int:
        """Buffer raw records of a (physical) source topic, in offset order."""
        return self.batch_input.add_records(topic, records)

    def add_table(self, topic: str, table: pa.Table) -> int:
        """Buffer a ``Log.read_table`` result of a (physical) source topic."""
        return self.batch_input.add_table(topic, table)

    def committed_offset(self, topic: str) -> int | None:
        """Next offset of ``topic`` to process (None: nothing processed yet)."""
        return self._offsets.get(offset_key(topic, self.partition))

    def mark_consumed(self, topic: str, end: int) -> None:
        """Record that ``topic``'s input before offset ``end`` is processed (the end of a
        range read, whatever its last records were)."""
        self._offsets[offset_key(topic, self.partition)] = end

    def source_name(self, topic: str) -> str:
        """The name of the source node reading ``topic``."""
        return self._sources[topic].name

    @property
    def buffered(self) -> int:
        return len(self.batch_input)

    # ---- processing ----------------------------------------------------------------------

    def process(self) -> int:
        """Process everything buffered (see the module docstring); return how many input
        records went through without failing."""
        if not self._initialized:
            self.initialize()
        taken, order = self.batch_input.take()
        if not taken:
            return 0
        inputs = []
        stamped = False
        for topic, columns in taken:
            source = self._sources[topic]
            keys, values, errors = self._deserialize(source, topic, columns)
            stamper = self._stampers.get(topic)
            if stamper is not None:
                stamper.stamp_columns(columns, keys, values, errors)
                stamped = True
            inputs.append(SourceInput(topic, source, columns, keys, values, errors))
        if stamped:  # ordered by the extracted timestamps
            order = processing_order(taken)
        done = 0
        if order is None:
            done = self._pieces.run(inputs[0], None)
        else:
            for index, run in groupby(order, key=itemgetter(0)):
                done += self._pieces.run(inputs[index], [row for _, row in run])
        for topic, columns in taken:
            last = next((o for o in reversed(columns.offsets) if o is not None), None)
            if last is not None:
                self._offsets[offset_key(topic, self.partition)] = last + 1
        self.metrics.increment("processed-records", done)
        return done

    def _deserialize(
        self, source: SourceNode, topic: str, columns: InputColumns
    ) -> tuple[list[Any], list[Any], dict[int, SerdeError]]:
        """A topic's keys and values deserialized; a serde that raises something other than
        a ``SerdeError`` (one written without ``Serde``'s wrapping) stops the task."""
        try:
            return source.deserialize_columns(columns.keys, columns.values)
        except Exception as error:
            if from_infrastructure(error):
                raise
            raise UserCodeError(
                f"a serde of source {source.name!r} raised {type(error).__name__}: {error}",
                task_id=self.task_id,
                node=source.name,
                topic=topic,
                partition=self.partition,
            ) from error

    # ---- punctuation ---------------------------------------------------------------------

    def punctuate_stream_time(self) -> int:
        """Fire due stream-time punctuators; never before the first record."""
        if self.stream_time == UNKNOWN_TIME:
            return 0
        return self.stream_queue.may_punctuate(self.stream_time, self._run_punctuator)

    def punctuate_wall_clock(self) -> int:
        """Fire due wall-clock punctuators (call it also when the task runs without input)."""
        if not self._initialized:
            self.initialize()
        return self.wall_queue.may_punctuate(self.clock.now_ms(), self._run_punctuator)

    def _run_punctuator(self, schedule: PunctuationSchedule, now: int) -> None:
        node = self._nodes[schedule.node]
        node.call(lambda: self._punctuate(node, schedule, now))
        self.metrics.increment("punctuations")
        self.metrics.increment(f"punctuations.{schedule.punctuation_type.value}")

    def _punctuate(self, node: Node, schedule: PunctuationSchedule, now: int) -> None:
        """Call the punctuator; what it raises goes to the processing exception handler, as
        in Kafka Streams (KIP-1033): CONTINUE drops it (what the punctuator forwarded before
        raising goes on), otherwise the task stops without retries. Failures below it (of
        records it forwarded) and of the infrastructure are not the punctuator's."""
        try:
            schedule.punctuator(now)
        except Exception as error:
            if error is self.failures.fatal or from_infrastructure(error):
                raise
            response = self.failures.handle_without_input(error, node.name, None, now)
            if response is ProcessingHandlerResponse.CONTINUE:
                return
            raise self.failures.stop(
                error, node.name, None, user_code=True, final=response is not None
            ) from error

    def schedules(self) -> list[PunctuationSchedule]:
        return [s for q in self._queues.values() for s in q.schedules()]

    # ---- commit and close ----------------------------------------------------------------

    def flush(self) -> None:
        """Let caches emit, then send the stores' writes to their changelogs (they reach the
        local stores once the commit is confirmed: ``stores.on_committed``)."""
        for node, listener in self._flush_listeners:
            node.call(listener)
        self.stores.commit()

    def committed_state(self) -> TaskCommittedState:
        return TaskCommittedState(
            offsets=dict(self._offsets),
            stream_time=self.stream_time,
            schedules={s.key: s.time for s in self.schedules() if s.time is not None},
            partition_times={
                offset_key(topic, self.partition): stamper.partition_time
                for topic, stamper in self._stampers.items()
                if stamper.partition_time != UNKNOWN_TIME
            },
        )

    def commit(self) -> TaskCommittedState:
        """Flush, then return the metadata to commit with this task's outputs."""
        self.flush()
        return self.committed_state()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for node in self._nodes.values():
                operator = node.operator
                if operator is not None:
                    node.call(operator.close)
        finally:
            self.stores.close()
