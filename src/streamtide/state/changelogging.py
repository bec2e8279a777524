"""Changelogged bytes stores: writes wait in a buffer until the task commits.

"Local state never holds uncommitted writes" (docs/engine.md, "One batch"). A logged store keeps
two buffers over its local store: ``writes`` (this batch) and ``sent`` (handed to the changelog,
not yet known to be committed). Reads consult ``writes``, then ``sent``, then the local store.
The task's ``runtime.task_stores.TaskStores`` drives the commit:

1. ``take_changelog()`` returns the batch's changelog records and moves ``writes`` to ``sent``;
2. once the records are committed, ``apply_sent()`` writes them to the local store; or, if the
   attempt is abandoned, ``discard_sent()`` drops them (the store is then brought up to date
   from the committed changelog, which is the restore path).

A changelog record is ``(key, value, headers)``: a put, a tombstone (value None), or a range
delete (value None, key = first key, a ``RANGE_END_HEADER`` header naming the end).

A store may keep a family of keys it derives from its other keys (the deduplication store's
time index, derived from its entries: ``DerivedKeys``). Those keys are written locally but not
to the changelog; applying the changelog (restore, standbys) derives them again. A changelog
written before a family was derived still holds its keys: they are applied like any other
(the same ones the derivation writes).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from streamtide.errors import StoreError
from streamtide.processor.api import StateStoreContext
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.layout import BytesLayoutStore
from streamtide.state.transaction import WriteBuffer

#: Header marking a range delete; value ``b"\x01" + end_key`` or ``b"\x00"`` (no end).
RANGE_END_HEADER = "streamtide.delete-range-end"

Headers = tuple[tuple[str, bytes], ...]
ChangelogRecord = tuple[bytes, "bytes | None", Headers]


def range_delete_record(from_key: bytes, to_key: bytes | None) -> ChangelogRecord:
    end = b"\x00" if to_key is None else b"\x01" + to_key
    return from_key, None, ((RANGE_END_HEADER, end),)


def range_end(headers: Any) -> tuple[bool, bytes | None]:
    """``(True, end)`` if ``headers`` mark a range delete (end None: unbounded)."""
    for name, value in headers or ():
        if name == RANGE_END_HEADER:
            return True, (bytes(value[1:]) if value[:1] == b"\x01" else None)
    return False, None


#: Changelog records as three columns: keys, values, headers.
ChangelogColumns = tuple[list[bytes], list["bytes | None"], list[Headers]]


def buffer_columns(buffer: WriteBuffer) -> ChangelogColumns:
    """The changelog records that replay ``buffer`` (range deletes first, then keys), as
    columns: no tuple per record on the commit path."""
    deletes = [range_delete_record(begin, end) for begin, end in buffer.range_deletes]
    keys, values = buffer.columns()
    headers: list[Headers] = [()] * len(keys)
    if deletes:
        keys[:0] = [key for key, _, _ in deletes]
        values[:0] = [None] * len(deletes)
        headers[:0] = [h for _, _, h in deletes]
    return keys, values, headers


@dataclass(frozen=True)
class DerivedKeys:
    """Keys starting with ``prefix`` are derived: ``derive(key, value)`` gives, for a logged
    put or tombstone, the derived key's put or tombstone (None: the key derives none)."""

    prefix: bytes
    derive: Callable[[bytes, bytes | None], tuple[bytes, bytes | None] | None]

    def unlogged(self, records: ChangelogColumns, range_deletes: int) -> ChangelogColumns:
        """``records`` (range deletes first, then puts in key order) without the derived
        keys' puts: they are one run of the sorted keys."""
        keys, values, headers = records
        prefix = self.prefix
        start = bisect_left(keys, prefix, range_deletes)
        stop = start
        while stop < len(keys) and keys[stop].startswith(prefix):
            stop += 1  # (a derived family is a prefix: find its end without a bound key)
        if start == stop:
            return records
        return (
            keys[:start] + keys[stop:],
            values[:start] + values[stop:],
            headers[:start] + headers[stop:],
        )


def apply_changelog(
    store: KeyValueBytesStore,
    records: Iterable[ChangelogRecord],
    derived: DerivedKeys | None = None,
) -> int:
    """Apply changelog records to a local store in order, batching puts, with the keys
    ``derived`` derives from them; returns the count of changelog records."""
    count = 0
    puts: list[tuple[bytes, bytes | None]] = []
    derive = derived.derive if derived is not None else None
    for key, value, headers in records:
        count += 1
        if headers and value is None:
            is_range, end = range_end(headers)
            if is_range:
                if puts:
                    store.put_all(puts)
                    puts = []
                store.delete_range(key, end)
                continue
        puts.append((key, value))
        if derive is not None:
            pair = derive(key, value)
            if pair is not None:
                puts.append(pair)
    if puts:
        store.put_all(puts)
    return count


def apply_buffer(store: KeyValueBytesStore, buffer: WriteBuffer) -> None:
    """Write ``buffer`` to ``store``: range deletes first, then every key in key order."""
    for begin, end in buffer.range_deletes:
        store.delete_range(begin, end)
    keys, values = buffer.columns()
    if keys:
        store.put_all(zip(keys, values))


class _InnerContext:
    """The task's context for the wrapped store: everything but ``register``, since the
    logged store registers itself in its place."""

    def __init__(self, context: StateStoreContext) -> None:
        self._context = context

    def register(self, store: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class ChangeLoggingKeyValueBytesStore(BytesLayoutStore, KeyValueBytesStore):
    """A logged store: ``inner`` holds committed data only; see the module docstring.

    Opened by a task, it buffers. Opened standalone it writes through to ``inner`` unless
    ``buffered=True`` (there is no changelog to commit to).
    """

    def __init__(self, inner: KeyValueBytesStore) -> None:
        super().__init__(inner)
        self._writes = WriteBuffer()
        self._sent = WriteBuffer()
        #: keys kept out of the changelog and derived again when it is applied
        self.derived: DerivedKeys | None = None
        self._buffering = True
        self._clean = True  # both buffers empty: reads go straight to the local store

    # ---- lifecycle -----------------------------------------------------------------------

    def init(self, context: StateStoreContext) -> None:
        self._buffering = True
        self.inner.init(_InnerContext(context))
        context.register(self)

    def open_standalone(
        self, *args: Any, buffered: bool = False
    ) -> ChangeLoggingKeyValueBytesStore:
        self._buffering = buffered
        self._open_inner_standalone(*args)
        return self

    def close(self) -> None:
        self._writes.clear()
        self._sent.clear()
        self._clean = True
        super().close()

    def _recheck(self) -> None:
        self._clean = not self._writes and not self._sent

    # ---- commit protocol -----------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Buffered writes of the current batch (its changelog records, and the derived
        keys among them, which are not logged)."""
        return len(self._writes)

    @property
    def unapplied(self) -> int:
        """Records taken for the changelog and not yet applied or discarded."""
        return len(self._sent)

    def take_changelog(self) -> list[ChangelogRecord]:
        """The batch's changelog records; its writes move to the sent buffer."""
        return list(zip(*self.take_changelog_columns()))

    def take_changelog_columns(self) -> ChangelogColumns:
        """``take_changelog`` as columns (keys, values, headers)."""
        writes = self._writes
        if not writes:
            return [], [], []
        records = buffer_columns(writes)
        if self.derived is not None:
            records = self.derived.unlogged(records, len(writes.range_deletes))
        if self._sent:
            self._sent.absorb(writes)
            writes.clear()
        else:
            self._sent, self._writes = writes, self._sent
        self._recheck()
        return records

    def apply_sent(self) -> int:
        """Write the sent records to the local store (they are committed); returns how many
        records the sent buffer held."""
        sent = self._sent
        count = len(sent)
        if count:
            apply_buffer(self.inner, sent)
            sent.clear()
            self._recheck()
        return count

    def discard_sent(self) -> int:
        count = len(self._sent)
        self._sent.clear()
        self._recheck()
        return count

    def discard_writes(self) -> int:
        count = len(self._writes)
        self._writes.clear()
        self._recheck()
        return count

    # ---- reads ---------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        if self._clean:
            return self.inner.get(key)
        written = self._writes.latest
        if key in written:  # a key the batch wrote: no call on a task's hottest read
            return written[key]
        found, value = self._writes.lookup(key)  # (an empty buffer answers at once)
        if found:
            return value
        found, value = self._sent.lookup(key)
        if found:
            return value
        return self.inner.get(key)

    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        entries = self.inner.range(from_key, to_key, reverse)
        if self._clean:
            return entries
        if self._sent:
            entries = self._sent.overlay(entries, from_key, to_key, reverse)
        if self._writes:
            entries = self._writes.overlay(entries, from_key, to_key, reverse)
        return entries

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        if self._clean:
            return self.inner.prefix_scan(prefix)
        return super().prefix_scan(prefix)

    def approximate_num_entries(self) -> int:
        if self._clean:
            return self.inner.approximate_num_entries()
        if self._writes.range_deletes or self._sent.range_deletes:
            return sum(1 for _ in self.all())
        count = self.inner.approximate_num_entries()
        overrides: dict[bytes, bytes | None] = dict(self._sent.items())
        overrides.update(self._writes.items())
        for key, value in overrides.items():
            present = self.inner.get(key) is not None
            count += (value is not None) - present
        return max(count, 0)

    # ---- writes --------------------------------------------------------------------------

    def _check_writable(self, key: bytes) -> None:
        if key is None:
            raise self._none_key_error()
        if not self.inner.is_open:
            raise StoreError(f"store {self.name!r} is not open")

    def put(self, key: bytes, value: bytes | None) -> None:
        if self._buffering:
            if key is None:  # (``_check_writable`` inlined: a put is on every record's path)
                raise self._none_key_error()
            if not self.inner.is_open:
                raise StoreError(f"store {self.name!r} is not open")
            self._writes.put(key, value)
            self._clean = False
        else:
            self.inner.put(key, value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        if not self._buffering:
            self.inner.put_all(entries)
            return
        self._check_writable(b"")
        entries = list(entries)
        if None not in [key for key, _ in entries]:
            if entries:
                self._writes.put_many(entries)
                self._clean = False
            return
        put = self._writes.put
        for key, value in entries:
            if key is None:
                raise self._none_key_error()
            put(key, value)
            self._clean = False

    def delete_range(self, from_key: bytes | None, to_key: bytes | None) -> None:
        if self._buffering:
            self._check_writable(from_key or b"")
            self._writes.delete_range(from_key, to_key)
            self._clean = False
        else:
            self.inner.delete_range(from_key, to_key)

    def clear(self) -> None:
        """Delete every entry, logged like any other write."""
        self.delete_range(None, None)
