"""Appending records to one Kafka partition and waiting for every acknowledgement.

The producer is idempotent, so the client's own retries never duplicate or reorder records.
A *fatal* producer error (the idempotence state is broken, for example because the partition
was deleted and re-created under the producer's sequence numbers) makes the producer unusable:
``produce_all`` then purges it and reports ``fatal``, and the caller starts a new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamtide.log.api import LogRecord

#: Errors after which the broker has nothing of the batch: it rejected the producer's
#: sequence numbers or does not know the producer (its state for the partition is gone).
SEQUENCE_ERRORS = frozenset({"OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID"})


@dataclass
class Delivery:
    """What became of one ``produce_all`` call."""

    offsets: list[int] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    fatal: Any = None

    def untouched_by_sequence_error(self) -> bool:
        """Nothing was written and the producer failed on its sequence state: a fresh
        producer may safely send the same records again."""
        names = {_name(self.fatal), *(_name(e) for e in self.errors)} - {"", "_FATAL"}
        names -= {"_PURGE_QUEUE", "_PURGE_INFLIGHT"}
        return not self.offsets and bool(names) and names <= SEQUENCE_ERRORS


def produce_all(
    producer: Any,
    topic: str,
    partition: int,
    rows: list[LogRecord],
    timeout_s: float,
    fatal_error: Callable[[], Any],
) -> Delivery:
    """Send ``rows`` in order and wait (at most ``timeout_s``) for their acknowledgements.
    ``fatal_error`` returns the producer's fatal error as its error callback saw it (the
    client does not always raise it with the error attached)."""
    from confluent_kafka import KafkaException

    result = Delivery()

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            result.offsets.append(message.offset())
        else:
            result.errors.append(error)

    try:
        for r in rows:
            while True:
                try:
                    producer.produce(
                        topic,
                        value=r.value,
                        key=r.key,
                        partition=partition,
                        timestamp=r.timestamp,
                        headers=list(r.headers) or None,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:  # the client's queue is full: let it send
                    producer.poll(0.05)
        producer.flush(timeout_s)
        result.fatal = fatal_error()  # reported through the callback only, if at all
    except (KafkaException, SystemError) as e:
        # SystemError: some client versions fail flush() without the exception attached.
        raised = e.args[0] if isinstance(e, KafkaException) and e.args else None
        result.fatal = fatal_error() or raised or e
        producer.purge(in_queue=True, in_flight=True)
        deadline = time.monotonic() + timeout_s
        while len(result.offsets) + len(result.errors) < len(rows):
            if time.monotonic() > deadline:
                break
            try:
                producer.poll(0.05)
            except (KafkaException, SystemError):
                pass
    return result


def _name(error: Any) -> str:
    name = getattr(error, "name", None)
    return name() if callable(name) else ""
