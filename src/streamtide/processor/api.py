"""The Processor API that users implement and call: processors, their context, stores."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from streamtide.time import Duration

if TYPE_CHECKING:
    from streamtide.processor.operator import ColumnOperator
    from streamtide.record import Record, RecordMetadata
    from streamtide.serde import Serde


class PunctuationType(enum.Enum):
    """What time a punctuator follows: record timestamps, or the wall clock."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Cancellable(Protocol):
    """Handle returned by ``ProcessorContext.schedule``."""

    def cancel(self) -> None: ...


class Metrics(Protocol):
    """Counters of one task (``dropped-records``, ``dropped-duplicates``, ...)."""

    def increment(self, name: str, amount: int = 1) -> None: ...

    def get(self, name: str) -> int: ...


class ProcessorContext(ABC):
    """What a processor can see and do while it runs inside a task."""

    @property
    @abstractmethod
    def task_id(self) -> str:
        """The task, written ``"<subtopology>_<partition>"``."""

    @property
    @abstractmethod
    def application_id(self) -> str: ...

    @property
    @abstractmethod
    def metrics(self) -> Metrics: ...

    @abstractmethod
    def forward(self, record: Record, child: str | None = None) -> None:
        """Send a record to every child node, or only to the child named ``child``."""

    @abstractmethod
    def schedule(
        self,
        interval: Duration,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], None],
        align: str = "epoch",
    ) -> Cancellable:
        """Call ``punctuator(timestamp_ms)`` every ``interval`` of stream or wall-clock time."""

    @abstractmethod
    def get_state_store(self, name: str) -> Any:
        """The store ``name``; it must be connected to the calling processor."""

    @abstractmethod
    def current_stream_time_ms(self) -> int:
        """Largest timestamp this task has processed, or -1 before the first record."""

    @abstractmethod
    def current_system_time_ms(self) -> int:
        """The task's wall clock."""

    @abstractmethod
    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the record being processed; None in punctuators."""

    @abstractmethod
    def register_flush_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the task commits, before its state is saved (caches)."""


class Processor(ABC):
    """A node of the topology: receives records, may forward, may use stores."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        """Called once before the first record; keep the context, open stores, schedule."""
        self.context = context

    @abstractmethod
    def process(self, record: Record) -> None:
        """Handle one record."""

    def close(self) -> None:
        """Called when the task closes; release what ``init`` acquired."""


#: A processor supplier: the class itself or any callable returning a new Processor.
ProcessorSupplier = Callable[[], Processor]

#: What a topology's processor node is made by: a user's processor supplier, or the supplier
#: of one of the DSL's built-in column operators.
NodeSupplier = Callable[[], "Processor | ColumnOperator"]


@runtime_checkable
class DefaultSerdes(Protocol):
    """A context that knows its task's default serdes, as every context a task gives its
    operators and stores does."""

    @property
    def default_key_serde(self) -> Serde: ...

    @property
    def default_value_serde(self) -> Serde: ...


class StateStoreContext(Protocol):
    """What a store needs from its task when it is opened."""

    @property
    def application_id(self) -> str: ...

    @property
    def task_id(self) -> str: ...

    @property
    def state_dir(self) -> Path:
        """Directory owned by this task, for stores that keep files."""
        ...

    @property
    def default_key_serde(self) -> Serde: ...

    @property
    def default_value_serde(self) -> Serde: ...

    @property
    def metrics(self) -> Metrics: ...

    def current_stream_time_ms(self) -> int: ...

    def register(self, store: StateStore) -> None:
        """Tell the task about an opened store so it can changelog and restore it."""
        ...


class StateStore(ABC):
    """Base of every state store: a name, a lifecycle, and whether it keeps files."""

    name: str
    persistent: bool = False
    #: what kind of store this is ("key_value", "window", "session", ...), for typed lookups
    kind: str = "generic"

    @abstractmethod
    def init(self, context: StateStoreContext) -> None:
        """Open the store for one task."""

    def flush(self) -> None:
        """Make buffered writes durable."""

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def is_open(self) -> bool: ...


class StoreBuilder(Protocol):
    """Builds one instance of a named store per task."""

    @property
    def name(self) -> str: ...

    @property
    def logging_enabled(self) -> bool: ...

    def build(self) -> StateStore: ...
