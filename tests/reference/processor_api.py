"""The Processor API in the interpreter: a user's ``Processor`` runs unchanged against a
plain context (forward, schedule, stores as dicts) with the exact per-record view of
SEMANTICS sections 1 and 2."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamtide import ProcessorContext, PunctuationType, Record, RecordMetadata
from tests.reference.node import Node
from tests.reference.records import Rec
from tests.reference.serdes import key_bytes, round_trip

if TYPE_CHECKING:
    from tests.reference.task import Task


class DictKeyValueStore:
    """A key-value store as a dict; iteration in serialized-key order (as RocksDB orders
    keys); values read back as their serde writes them."""

    kind = "key_value"

    def __init__(self, name: str, key_serde: str, value_serde: str) -> None:
        self.name, self.key_serde, self.value_serde = name, key_serde, value_serde
        self.data: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = round_trip(value, self.value_serde)

    def delete(self, key: Any) -> Any:
        return self.data.pop(key, None)

    def all(self) -> Iterator[tuple[Any, Any]]:
        return iter(sorted(self.data.items(), key=lambda kv: key_bytes(kv[0], self.key_serde)))

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        low = None if from_key is None else key_bytes(from_key, self.key_serde)
        high = None if to_key is None else key_bytes(to_key, self.key_serde)
        return iter(
            (k, v)
            for k, v in self.all()
            if (low is None or key_bytes(k, self.key_serde) >= low)
            and (high is None or key_bytes(k, self.key_serde) <= high)
        )

    def approximate_num_entries(self) -> int:
        return len(self.data)


class _Metrics:
    def __init__(self, task: Task) -> None:
        self.task = task

    def increment(self, name: str, amount: int = 1) -> None:
        self.task.metrics[name] = self.task.metrics.get(name, 0) + amount

    def get(self, name: str) -> int:
        return self.task.metrics.get(name, 0)


class ReferenceContext(ProcessorContext):
    """What a user processor sees in the interpreter."""

    def __init__(self, node: ProcessorNode, task: Task) -> None:
        self.node, self.task = node, task

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def application_id(self) -> str:
        return "reference"

    @property
    def metrics(self) -> Any:
        return _Metrics(self.task)

    def forward(self, record: Record, child: str | None = None) -> None:
        if child is not None:
            raise ValueError("the interpreter forwards to every child only")
        source = self.task.current
        rec = Rec(record.key, record.value, record.timestamp, tuple(record.headers))
        if source is not None:  # keeps where the record being processed came from
            rec = rec.but(topic=source.topic, partition=source.partition, offset=source.offset)
        self.node.forward(rec, self.task)

    def schedule(
        self,
        interval: Any,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], None],
        align: str = "epoch",
    ) -> Any:
        ms = interval if isinstance(interval, int) else int(interval.total_seconds() * 1000)
        wall = punctuation_type is PunctuationType.WALL_CLOCK_TIME
        return self.task.schedule(ms, wall, punctuator, align)

    def get_state_store(self, name: str) -> Any:
        return self.task.stores[name]

    def current_stream_time_ms(self) -> int:
        return self.task.stream_time

    def current_system_time_ms(self) -> int:
        return self.task.wall_clock()

    def record_metadata(self) -> RecordMetadata | None:
        rec = self.task.current
        if rec is None or rec.offset is None:
            return None
        return RecordMetadata(rec.topic, rec.partition, rec.offset)

    def register_flush_listener(self, listener: Callable[[], None]) -> None:
        pass


class ProcessorNode(Node):
    """``stream.process(supplier, *stores)``: the user's processor, created and initialized
    with the task."""

    def init(self, task: Task) -> None:
        self.processor = self.args["supplier"]()
        self.processor.init(ReferenceContext(self, task))

    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.processor.process(Record(rec.key, rec.value, rec.ts, rec.headers))


class FixedKeyContext(ReferenceContext):
    """``process_values``: forwarding another key than the input record's is an error."""

    def __init__(self, node: FixedKeyProcessorNode, task: Task) -> None:
        super().__init__(node, task)
        self.fixed = node

    def forward(self, record: Record, child: str | None = None) -> None:
        expected = self.fixed.input_key
        if expected is not NO_INPUT and record.key != expected:
            raise ValueError(f"process_values changed key {expected!r} to {record.key!r}")
        super().forward(record, child)


NO_INPUT = object()


class FixedKeyProcessorNode(ProcessorNode):
    """``stream.process_values(supplier, *stores)`` (KIP-820)."""

    input_key: Any = NO_INPUT

    def init(self, task: Task) -> None:
        self.processor = self.args["supplier"]()
        self.processor.init(FixedKeyContext(self, task))

    def process(self, rec: Rec, task: Task, port: int) -> None:
        self.input_key = rec.key
        try:
            super().process(rec, task, port)
        finally:
            self.input_key = NO_INPUT
