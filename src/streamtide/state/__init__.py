"""State stores: interfaces, in-memory and RocksDB implementations, builders."""

from streamtide.state.api import KeyValueBytesStore, KeyValueStore
from streamtide.state.memory import InMemoryKeyValueBytesStore
from streamtide.state.stores import KeyValueStoreBuilder, Stores
from streamtide.state.typed import SerdeKeyValueStore

__all__ = [
    "InMemoryKeyValueBytesStore",
    "KeyValueBytesStore",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "SerdeKeyValueStore",
    "Stores",
]
