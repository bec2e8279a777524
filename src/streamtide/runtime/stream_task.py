"""``StreamTask``: one partition of one sub-topology, processed record by record.

The same class runs under the test driver and inside Spark work units: the caller feeds it
raw records (``add_records``), lets it ``process``, calls ``punctuate_wall_clock`` when it
runs without input, and takes ``commit()`` — the task's committed metadata — at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from itertools import accumulate, repeat
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamtide.config import StreamsConfig
from streamtide.errors import (
    BufferFullError,
    HandlerFailedError,
    InvalidTimestampError,
    SerdeError,
    StoreDamagedError,
    StreamsProcessingError,
)
from streamtide.handlers import Handler, ProcessingHandlerResponse
from streamtide.log.segments import records_of
from streamtide.processor import drops
from streamtide.processor.api import PunctuationType, StateStore
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.nodes import ProcessorNodeDef, SinkNodeDef, SourceNodeDef
from streamtide.processor.punctuation import PunctuationQueue, PunctuationSchedule
from streamtide.processor.topology import Topology
from streamtide.processor.variants import batch_variant
from streamtide.record import Record
from streamtide.runtime.collector import RecordCollector
from streamtide.runtime.columns import BatchInput, processing_order
from streamtide.runtime.committed import TaskCommittedState, offset_key
from streamtide.runtime.context import TaskContext
from streamtide.runtime.metrics import TaskMetrics
from streamtide.runtime.nodes import ProcessorNode, SinkNode, SourceNode
from streamtide.runtime.partition_group import PartitionGroup, RawRecord
from streamtide.runtime.record_errors import RecordErrors
from streamtide.runtime.stamping import SourceStamper, StampedRecord
from streamtide.runtime.task_stores import TaskStores
from streamtide.serde import Serde, Serdes, resolve_serde
from streamtide.time import UNKNOWN_TIME, Clock, SystemClock
from streamtide.timestamp_extractor import TimestampExtractor

log = logging.getLogger(__name__)


class _RowView:
    """One row of ``InputColumns`` seen as a raw record (for the error paths)."""

    def __init__(self, columns: Any, row: int) -> None:
        self.key = columns.keys[row]
        self.value = columns.values[row]
        self.timestamp = columns.timestamps[row]
        self.headers = columns.headers[row]
        self.offset = columns.offsets[row]


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
        "batch_processing": config.batch_processing,
    }


def task_name(subtopology_id: int, partition: int) -> str:
    return f"{subtopology_id}_{partition}"


class StreamTask:
    """Processes one partition of one sub-topology; owns stream time, schedules and stores."""

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
        default_key_serde: Serde | None = None,
        default_value_serde: Serde | None = None,
        committed: TaskCommittedState | None = None,
        deserialization_handler: str | Handler = "fail",
        processing_handler: str | Handler = "fail",
        dead_letter_topic: str | None = None,
        invalid_timestamp_handler: str = "fail",
        cache_enabled: bool = False,
        stores: TaskStores | None = None,
        batch_processing: bool = False,
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
        self.batch_processing = batch_processing
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
        self._stream_queue = self._queues[PunctuationType.STREAM_TIME]
        self._wall_queue = self._queues[PunctuationType.WALL_CLOCK_TIME]
        self._stream_due: int | None = None  # next stream-time fire time (None: none)
        self._has_wall_schedules = False
        self.context = TaskContext(self)
        self.stores = stores or TaskStores(topology, self.subtopology.stores)
        self._nodes: dict[str, Any] = {}
        self._sources: dict[str, SourceNode] = {}
        self._failed_node: str | None = None
        self._failed_record: Record | None = None  # what the failed node was given
        self._build_nodes()
        source_topics = [self.resolve(t) for t in self.subtopology.source_topics]
        stampers = {topic: stamper.stamp for topic, stamper in self._stampers.items()}
        self.partition_group = PartitionGroup(source_topics, stampers)
        self.batch_input = BatchInput(source_topics)
        self._column_lanes: set[str] = set()  # source topics whose records take the lane
        self._lane_failures = 0
        self._initialized = False
        self._closed = False

    # ---- setup ---------------------------------------------------------------------------

    def resolve(self, topic: str) -> str:
        return self.topology.resolve_topic(topic, self.application_id)

    def _build_nodes(self) -> None:
        for definition in self.subtopology.nodes:
            if isinstance(definition, SourceNodeDef):
                node: Any = SourceNode(
                    definition.name,
                    resolve_serde(definition.key_serde, self.default_key_serde),
                    resolve_serde(definition.value_serde, self.default_value_serde),
                )
                extractor = definition.timestamp_extractor or self.default_timestamp_extractor
                for topic in definition.topics:
                    self._sources[self.resolve(topic)] = node
                    if extractor is not None:
                        self._add_stamper(extractor, node, self.resolve(topic))
            elif isinstance(definition, ProcessorNodeDef):
                processor = definition.supplier()  # type: ignore[misc]
                if not callable(getattr(processor, "process", None)):
                    raise StreamsProcessingError(
                        f"the supplier of processor {definition.name!r} returned "
                        f"{processor!r}, which has no process(record) method",
                        task_id=self.task_id,
                        node=definition.name,
                    )
                if self.batch_processing and self._owns_its_stores(definition):
                    processor = batch_variant(processor) or processor
                node = ProcessorNode(definition.name, processor, definition.stores)
            elif isinstance(definition, SinkNodeDef):
                node = SinkNode(
                    definition,
                    self.resolve(definition.topic),
                    resolve_serde(definition.key_serde, self.default_key_serde),
                    resolve_serde(definition.value_serde, self.default_value_serde),
                    self.collector,
                    uses_default_serdes=definition.key_serde is None
                    or definition.value_serde is None,
                )
            self._nodes[definition.name] = node
        for definition in self.subtopology.nodes:
            for child in definition.children:
                self._nodes[definition.name].add_child(self._nodes[child])

    def _add_stamper(self, extractor: TimestampExtractor, node: SourceNode, topic: str) -> None:
        key = offset_key(topic, self.partition)
        self._stampers[topic] = SourceStamper(
            extractor,
            node,
            topic,
            self.partition,
            self.task_id,
            self._partition_times.get(key, UNKNOWN_TIME),
        )

    def _owns_its_stores(self, definition: ProcessorNodeDef) -> bool:
        """Whether no other node of the sub-topology uses ``definition``'s stores (a batch
        variant keeps store state in memory between commits, which only its owner sees)."""
        mine = set(definition.stores)
        return not any(
            mine & set(getattr(other, "stores", ()))
            for other in self.subtopology.nodes
            if other is not definition
        )

    def initialize(self) -> StreamTask:
        """Open the stores and call ``init`` on every processor (in topology order)."""
        if self._initialized:
            return self
        self.stores.open(self.context, self.collector, self.partition, self._offsets)
        for _name, node in self._nodes.items():
            if isinstance(node, ProcessorNode) and hasattr(node.processor, "init"):
                self._in_node(node, lambda n=node: n.processor.init(self.context), "init")
        if self.batch_processing:
            self._column_lanes = {
                topic
                for topic, source in self._sources.items()
                if topic not in self._stampers and self._column_lane_ok(source)
            }
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
        self._stream_due = UNKNOWN_TIME if self._stream_queue else None  # check at next record
        self._has_wall_schedules = bool(self._wall_queue)

    # ---- input ---------------------------------------------------------------------------

    def add_records(self, topic: str, records: Iterable[RawRecord]) -> int:
        """Buffer raw records of a (physical) source topic, in offset order."""
        if self.batch_processing:
            return self.batch_input.add_records(topic, records)
        return self.partition_group.add(topic, records)

    def add_table(self, topic: str, table: pa.Table) -> int:
        """Buffer a ``Log.read_table`` result of a (physical) source topic."""
        if self.batch_processing:
            return self.batch_input.add_table(topic, table)
        return self.partition_group.add(topic, records_of(table))

    def committed_offset(self, topic: str) -> int | None:
        """Next offset of ``topic`` to process (None: nothing processed yet)."""
        return self._offsets.get(offset_key(topic, self.partition))

    def mark_consumed(self, topic: str, end: int) -> None:
        """Record that ``topic``'s input before offset ``end`` is processed (the end of a
        range read, whatever its last records were)."""
        self._offsets[offset_key(topic, self.partition)] = end

    @property
    def buffered(self) -> int:
        return len(self.partition_group) + len(self.batch_input)

    # ---- processing ----------------------------------------------------------------------

    def process(self, max_records: int | None = None) -> int:
        """Process buffered records (all, or at most ``max_records``); return the count."""
        if not self._initialized:
            self.initialize()
        if self.batch_processing and max_records is None:
            return self._process_batch()
        done = 0
        next_record = self.partition_group.next_record
        while max_records is None or done < max_records:
            item = next_record()
            if item is None:
                break
            self._process_one(item[0], item[1])
            done += 1
        return done

    def _process_one(self, topic: str, raw: RawRecord) -> None:
        offset = raw.offset
        if offset is not None:
            self._offsets[offset_key(topic, self.partition)] = offset + 1
        if raw.timestamp < 0:
            self._drop_negative(topic, raw)
            return
        source = self._sources[topic]
        if raw.__class__ is StampedRecord:  # a source with a timestamp extractor
            if raw.error is not None:  # type: ignore[attr-defined]
                self._on_deserialization_error(topic, raw, raw.error)  # type: ignore[attr-defined]
                return
            record = raw.record  # type: ignore[attr-defined]
        else:
            try:
                record = source.deserialize(raw)
            except SerdeError as exc:
                self._on_deserialization_error(topic, raw, exc)
                return
        if record.timestamp > self.stream_time:
            self.stream_time = record.timestamp
        context = self.context
        context.set_source(topic, self.partition, offset)
        self._failed_node = None
        try:
            for child in source.children:
                self.dispatch(child, record)
        except Exception as exc:
            self._on_processing_error(exc, topic, raw)
        else:
            self.metrics.increment("processed-records")
        finally:
            context.clear_source()
            context.current_node = None
        if self._stream_queue:
            self.punctuate_stream_time()
        if self._wall_queue:
            self.punctuate_wall_clock()

    def _process_batch(self) -> int:
        """Process everything buffered as one batch: columns deserialized in bulk, then each
        record in the partition group's order with the record path's exact semantics."""
        taken, order = self.batch_input.take()
        if not taken:
            return 0
        partition = self.partition
        context = self.context
        inputs = []
        stamped = False
        for topic, columns in taken:
            source = self._sources[topic]
            keys, values, errors = source.deserialize_columns(columns.keys, columns.values)
            inputs.append((topic, source.children, columns, keys, values, errors))
            if self._stampers and topic in self._stampers:
                self._stampers[topic].stamp_columns(columns, keys, values, errors)
                stamped = True
        if stamped:  # order by the extracted timestamps
            order = processing_order(taken)
        elif order is None and not inputs[0][5] and inputs[0][0] in self._column_lanes:
            done_in_lane = self._process_column_lane(*inputs[0][:5])
            if done_in_lane is not None:
                return done_in_lane
        rows: Iterable[tuple[int, int]] = (
            order if order is not None else zip(repeat(0), range(len(taken[0][1])))
        )
        self._next_stream_due()
        done = 0
        last_offsets: dict[str, int] = {}
        try:
            for index, row in rows:
                topic, children, columns, keys, values, errors = inputs[index]
                offset = columns.offsets[row]
                if offset is not None:
                    last_offsets[topic] = offset
                timestamp = columns.timestamps[row]
                if timestamp < 0 or (errors and row in errors):
                    self._skip(topic, columns, row, errors)
                    continue
                if timestamp > self.stream_time:
                    self.stream_time = timestamp
                record = Record(keys[row], values[row], timestamp, columns.headers[row])
                context._source = (topic, partition, offset)
                self._failed_node = None
                try:
                    for child in children:  # ``dispatch``, inlined
                        context.current_node = child
                        child.processor.process(record)
                except Exception as exc:
                    # the child that raised, unless a node below it was noted already
                    self.note_failure(context.current_node, record)
                    self._on_processing_error(exc, topic, _RowView(columns, row))
                else:
                    done += 1
                context._source = None
                context.current_node = None
                due = self._stream_due
                if due is not None and self.stream_time >= due:
                    self.punctuate_stream_time()
                    self._next_stream_due()
                if self._has_wall_schedules:
                    self.punctuate_wall_clock()
        finally:
            context.clear_source()
            context.current_node = None
            for name, last in last_offsets.items():
                self._offsets[offset_key(name, partition)] = last + 1
        self.metrics.increment("processed-records", done)
        return done

    def _process_column_lane(
        self, topic: str, children: list[Any], columns: Any, keys: list[Any], values: list[Any]
    ) -> int | None:
        """Process one topic's batch as a ``ColumnBatch`` down the source's column chain;
        None (nothing done) when something could happen between two of its records: a
        negative timestamp, a wall-clock schedule, or a stream-time punctuation falling due."""
        timestamps = columns.timestamps
        if self._has_wall_schedules or min(timestamps) < 0:
            return None
        stream_times = list(accumulate(timestamps, max, initial=self.stream_time))
        del stream_times[0]
        due = self._next_stream_due()
        if due is not None and stream_times[-1] >= due:
            return None
        rows = list(range(len(timestamps)))
        batch = ColumnBatch(
            topic,
            self.partition,
            columns,
            rows,
            keys,
            values,
            timestamps,
            columns.headers,
            columns.offsets,
            stream_times,
        )
        self._lane_failures = 0
        self.process_columns(children[0], batch)  # a failure here fails the whole run
        self.stream_time = stream_times[-1]
        last = next((o for o in reversed(columns.offsets) if o is not None), None)
        if last is not None:
            self._offsets[offset_key(topic, self.partition)] = last + 1
        done = len(rows) - self._lane_failures
        self.metrics.increment("processed-records", done)
        return done

    def process_columns(self, node: Any, batch: ColumnBatch) -> None:
        """Hand ``batch`` to ``node`` in the column lane. A sink that cannot take it whole
        sends it row by row, each failure going to the processing handler as the record path
        would; any other failure in the lane fails the task."""
        context = self.context
        if node.__class__ is SinkNode:
            if not node.send_columns(batch):
                self._send_rows(node, batch)
            return
        previous = context.current_node
        context.current_node = node
        try:
            node.processor.process_columns(batch)
        except StreamsProcessingError:
            raise
        except Exception as exc:
            self._failed_node = node.name
            raise self._wrap(exc, batch.topic, None) from exc
        finally:
            context.current_node = previous

    def _send_rows(self, sink: SinkNode, batch: ColumnBatch) -> None:
        """The record path's sends of a lane batch, one record at a time."""
        context = self.context
        for i, row in enumerate(batch.rows):
            record = Record(batch.keys[i], batch.values[i], batch.timestamps[i], batch.headers[i])
            context._source = (batch.topic, batch.partition, batch.offsets[i])
            context.current_node = sink
            self._failed_node = None
            try:
                sink.send(record)
            except Exception as exc:
                self.note_failure(sink, record)
                self._lane_failures += 1
                self._on_processing_error(exc, batch.topic, _RowView(batch.source, row))
            finally:
                context._source = None
                context.current_node = None

    def _column_lane_ok(self, source: SourceNode) -> bool:
        """Whether ``source`` heads a chain of nodes that take column batches: one child
        each (so rows reach every node in the record path's order), batch twins that say
        ``columnar``, a sink at the end."""
        node: Any = source
        while True:
            if len(node.children) != 1:
                return False
            node = node.children[0]
            if node.__class__ is SinkNode:
                return not node.children
            if not getattr(node.processor, "columnar", False):
                return False

    def _next_stream_due(self) -> int | None:
        """When the stream-time queue next needs a check (None: never)."""
        queue = self._stream_queue
        if not queue:
            self._stream_due = None
            return None
        due = self._stream_due = queue.next_check_time()
        return due

    def _skip(
        self, topic: str, columns: Any, row: int, errors: dict[int, SerdeError] | None
    ) -> None:
        """A record the batch cannot process: a negative timestamp or a serde failure."""
        raw = _RowView(columns, row)
        if raw.timestamp < 0:
            self._drop_negative(topic, raw)
        else:
            self._on_deserialization_error(topic, raw, errors[row])  # type: ignore[index]

    def _drop_negative(self, topic: str, raw: RawRecord) -> None:
        if self.invalid_timestamp_handler == "fail":
            raise InvalidTimestampError(
                f"the record has a negative timestamp {raw.timestamp} (set "
                "invalid_timestamp_handler='log_and_skip' to skip such records)",
                task_id=self.task_id,
                topic=topic,
                partition=self.partition,
                offset=raw.offset,
            )
        drops.record_drop(self.metrics, drops.INVALID_TIMESTAMP)
        log.warning(
            "task %s: dropped a record with negative timestamp %d (topic %s, partition %d, "
            "offset %s)",
            self.task_id,
            raw.timestamp,
            topic,
            self.partition,
            raw.offset,
        )

    def dispatch(self, node: Any, record: Record) -> None:
        """Run ``node`` on ``record`` with the context pointing at it."""
        context = self.context
        previous = context.current_node
        context.current_node = node
        try:
            node.processor.process(record)
        except Exception:
            self.note_failure(node, record)
            raise
        finally:
            context.current_node = previous

    def note_failure(self, node: Any, record: Record) -> None:
        """Remember the innermost node that raised and what it was given (for the error)."""
        if self._failed_node is None:
            self._failed_node = node.name
            self._failed_record = record

    def _on_processing_error(self, exc: Exception, topic: str, raw: RawRecord) -> None:
        """Skip the record if the processing handler says so; else raise the wrapped error
        (final at once when a handler function answered FAIL). A full suppression buffer
        is never skipped: it stops the application."""
        if isinstance(exc, (BufferFullError, StoreDamagedError)):  # never the record's fault
            raise self._wrap(exc, topic, raw.offset) from exc
        response = self.record_errors.on_processing_error(
            exc, self._failed_node, self._failed_record, topic, raw
        )
        if response is ProcessingHandlerResponse.CONTINUE:
            return
        error = self._wrap(exc, topic, raw.offset, final=response is not None)
        raise error from exc

    def _wrap(
        self, exc: Exception, topic: str | None, offset: int | None, *, final: bool = False
    ) -> Exception:
        node = self._failed_node
        message = (
            str(exc)
            if isinstance(exc, StreamsProcessingError)
            else (f"{type(exc).__name__}: {exc}")
        )
        if isinstance(exc, StreamsProcessingError):
            message = message.split(" (", 1)[0]
        error_type: type[StreamsProcessingError] = (
            BufferFullError
            if isinstance(exc, BufferFullError)
            else HandlerFailedError
            if final
            else StreamsProcessingError
        )
        return error_type(
            f"processing failed: {message}",
            task_id=self.task_id,
            node=node,
            topic=topic,
            partition=self.partition if topic is not None else None,
            offset=offset,
        )

    def _on_deserialization_error(self, topic: str, raw: RawRecord, exc: SerdeError) -> None:
        where = f"topic {topic!r}, partition {self.partition}, offset {raw.offset}"
        source = self._sources[topic].name
        response = self.record_errors.on_deserialization_error(exc, source, topic, raw)
        if response is not ProcessingHandlerResponse.CONTINUE:
            error_type = StreamsProcessingError if response is None else HandlerFailedError
            raise error_type(
                f"cannot deserialize the record at {where}: {exc}",
                task_id=self.task_id,
                topic=topic,
                partition=self.partition,
                offset=raw.offset,
            ) from exc

    # ---- punctuation ---------------------------------------------------------------------

    def punctuate_stream_time(self) -> int:
        """Fire due stream-time punctuators; never before the first record."""
        if self.stream_time == UNKNOWN_TIME:
            return 0
        return self._queues[PunctuationType.STREAM_TIME].may_punctuate(
            self.stream_time, self._run_punctuator
        )

    def punctuate_wall_clock(self) -> int:
        """Fire due wall-clock punctuators (call it also when the task runs without input)."""
        if not self._initialized:
            self.initialize()
        return self._queues[PunctuationType.WALL_CLOCK_TIME].may_punctuate(
            self.clock.now_ms(), self._run_punctuator
        )

    def _run_punctuator(self, schedule: PunctuationSchedule, now: int) -> None:
        node = self._nodes.get(schedule.node)
        self._in_node(node, lambda: schedule.punctuator(now), "punctuator")
        self.metrics.increment("punctuations")
        self.metrics.increment(f"punctuations.{schedule.punctuation_type.value}")

    def _in_node(self, node: Any, action: Any, what: str) -> None:
        context = self.context
        context.current_node = node
        context.clear_source()
        self._failed_node = None
        try:
            action()
        except Exception as exc:
            if self._failed_node is None and node is not None:
                self._failed_node = node.name
            raise self._wrap(exc, None, None) from exc
        finally:
            context.current_node = None

    def schedules(self) -> list[PunctuationSchedule]:
        return [s for q in self._queues.values() for s in q.schedules()]

    # ---- commit and close ----------------------------------------------------------------

    def flush(self) -> None:
        """Let caches emit, then send the stores' writes to their changelogs (they reach the
        local stores once the commit is confirmed: ``stores.on_committed``)."""
        for node, listener in self.context.flush_listeners():
            self._in_node(node, listener, "flush")
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
                if isinstance(node, ProcessorNode) and hasattr(node.processor, "close"):
                    self._in_node(node, node.processor.close, "close")
        finally:
            self.stores.close()
