"""State stores: interfaces, in-memory and RocksDB implementations, builders."""

from streamtide.state.api import KeyValueBytesStore, KeyValueStore
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.state.memory import InMemoryKeyValueBytesStore
from streamtide.state.rocksdb import RocksDBKeyValueBytesStore  # registers kind "rocksdb"
from streamtide.state.stores import (
    KeyValueBytesStoreSupplier,
    KeyValueStoreBuilder,
    Stores,
    key_value_store_kinds,
)
from streamtide.state.typed import SerdeKeyValueStore

__all__ = [
    "ChangeLoggingKeyValueBytesStore",
    "InMemoryKeyValueBytesStore",
    "KeyValueBytesStore",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "RocksDBKeyValueBytesStore",
    "SerdeKeyValueStore",
    "Stores",
    "key_value_store_kinds",
]
