"""Versioned stores opened as a task opens them, in every variant the store must behave the
same in: each bytes store kind, without a changelog, changelogged with the batch's writes
still buffered, and changelogged with every write committed at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamtide.processor.drops import DROPPED
from streamtide.runtime.metrics import TaskMetrics
from streamtide.serde import Serde, Serdes
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore, apply_changelog
from streamtide.state.stores import Stores, key_value_store_kinds
from streamtide.state.versioned import VersionedKeyValueStore

#: (bytes store kind, how writes reach the local store)
VARIANTS = [
    (kind, mode) for kind in key_value_store_kinds() for mode in ("plain", "buffered", "committed")
]
VARIANT_IDS = [f"{kind}-{mode}" for kind, mode in VARIANTS]


class StoreContext:
    """The part of a task a store sees."""

    application_id = "versioned-test"
    task_id = "0_0"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.default_key_serde = Serdes.string()
        self.default_value_serde = Serdes.string()
        self.metrics = TaskMetrics()

    def current_stream_time_ms(self) -> int:
        return -1

    def register(self, store: Any) -> None:
        pass


class Versioned:
    """A versioned store of one variant; ``commit`` moves the writes to the local store and
    keeps the changelog records, which ``restored`` replays into a new store."""

    def __init__(
        self,
        variant: tuple[str, str],
        directory: Path,
        history_retention: int,
        segment_interval: int,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> None:
        self.kind, self.mode = variant
        self.directory = directory
        self.history_retention = history_retention
        self.segment_interval = segment_interval
        self.changelog: list[tuple[bytes, bytes | None, Any]] = []
        self.store = self._open(directory / "store", key_serde, value_serde)

    def _open(
        self, state_dir: Path, key_serde: Serde | None, value_serde: Serde | None
    ) -> VersionedKeyValueStore:
        supplier = (
            Stores.persistent_versioned_key_value_store
            if self.kind == "rocksdb"
            else Stores.in_memory_versioned_key_value_store
        )("versioned", self.history_retention, self.segment_interval)
        builder = Stores.versioned_key_value_store_builder(supplier, key_serde, value_serde)
        if self.mode == "plain":
            builder.with_logging_disabled()
        store = builder.build()
        state_dir.mkdir(parents=True, exist_ok=True)
        self.context = StoreContext(state_dir)
        store.init(self.context)
        return store

    @property
    def logged(self) -> ChangeLoggingKeyValueBytesStore | None:
        inner = self.store.inner
        return inner if isinstance(inner, ChangeLoggingKeyValueBytesStore) else None

    def commit(self) -> None:
        logged = self.logged
        if logged is not None:
            self.changelog.extend(logged.take_changelog())
            logged.apply_sent()

    def after_write(self) -> None:
        if self.mode == "committed":
            self.commit()

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        result = self.store.put(key, value, timestamp)
        self.after_write()
        return result

    def delete(self, key: Any, timestamp: int) -> Any:
        result = self.store.delete(key, timestamp)
        self.after_write()
        return result

    def dropped(self) -> int:
        return self.context.metrics.get(DROPPED)

    def restored(self) -> VersionedKeyValueStore:
        """A new store of the same kind, rebuilt from this one's committed changelog."""
        self.commit()
        fresh = Versioned(
            (self.kind, "committed"),
            self.directory / f"restored-{len(list(self.directory.iterdir()))}",
            self.history_retention,
            self.segment_interval,
        )
        local = fresh.logged.inner  # type: ignore[union-attr]
        apply_changelog(local, self.changelog)
        return fresh.store

    def close(self) -> None:
        if self.store.is_open:
            self.store.close()
