"""State stores: interfaces, in-memory and RocksDB implementations, builders."""

from streamtide.state.api import KeyValueBytesStore, KeyValueStore
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.state.dedup import DedupStore
from streamtide.state.memory import InMemoryKeyValueBytesStore
from streamtide.state.rocksdb import RocksDBKeyValueBytesStore  # registers kind "rocksdb"
from streamtide.state.session_store import SessionStore
from streamtide.state.stores import (
    KeyValueBytesStoreSupplier,
    KeyValueStoreBuilder,
    Stores,
    key_value_store_kinds,
)
from streamtide.state.timestamped import NO_TIMESTAMP, ValueAndTimestamp
from streamtide.state.typed import SerdeKeyValueStore, TimestampedKeyValueStore
from streamtide.state.versioned import (
    ResultOrder,
    VersionedKeyValueStore,
    VersionedKeyValueStoreBuilder,
    VersionedRecord,
)
from streamtide.state.window_store import TimestampedWindowStore, WindowStore

__all__ = [
    "NO_TIMESTAMP",
    "ChangeLoggingKeyValueBytesStore",
    "DedupStore",
    "InMemoryKeyValueBytesStore",
    "KeyValueBytesStore",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "ResultOrder",
    "RocksDBKeyValueBytesStore",
    "SerdeKeyValueStore",
    "SessionStore",
    "Stores",
    "TimestampedKeyValueStore",
    "TimestampedWindowStore",
    "ValueAndTimestamp",
    "VersionedKeyValueStore",
    "VersionedKeyValueStoreBuilder",
    "VersionedRecord",
    "WindowStore",
    "key_value_store_kinds",
]
