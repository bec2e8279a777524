"""One Kafka transactional producer, with an outer deadline on every call that waits.

``KafkaTransaction`` is what both exactly-once writers build on: ``write_topic``'s
per-call writes (``kafka_once``) and the engine's per-task commits
(``runtime.kafka_task_commit``). Creating one initialises its ``transactional.id``, which
fences every earlier producer with that id: Kafka aborts a transaction it left open and
refuses its later sends and its commit (``ProducerFencedError``). Leaving the ``with`` block
(or ``close``) aborts a transaction that was not committed and abandons the producer.

Every call that waits has an outer deadline, because a client can block past its own timeout
after a broker restart (docs/kafka.md, "Broker behaviour that differs from Apache Kafka").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from streamtide.log.api import LogRecord
from streamtide.log.errors import LogError, LogUnavailableError, ProducerFencedError
from streamtide.log.kafka_client import (
    REQUIRED_PRODUCER,
    TRANSACTIONAL_DEFAULTS,
    client_config,
    error_name,
    log_client_error,
    new_client,
    split_options,
    translate,
)

#: How long the broker lets a transaction stay open (brokers that honour it abort it then).
TRANSACTION_TIMEOUT_MS = 120_000
#: How long a record may wait for its acknowledgement. Short, so that records queued while
#: the brokers are unreachable fail (and their transaction is aborted) instead of being sent
#: into a transaction that a broker restart already ended; some brokers then keep such a
#: transaction open for good (docs/kafka.md). A run whose records time out is retried.
MESSAGE_TIMEOUT_MS = 5_000
#: Added to the log's timeout for the outer deadline of a call with its own timeout.
GRACE_S = 5.0
POLL_S = 0.02
FENCED_ERRORS = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
#: Client errors after which an open transaction is given up: the brokers went away, and a
#: restart may already have aborted it (docs/kafka.md).
CONNECTION_LOST = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN"})

T = TypeVar("T")


class KafkaTransaction:
    """A transactional producer for ``transactional_id`` on the cluster of a ``KafkaLog``
    (anything with ``bootstrap``, ``options`` and ``timeout_s``); ``where`` names what it
    writes, for error messages. Initialised on creation (fencing earlier producers)."""

    def __init__(self, log: Any, transactional_id: str, where: str) -> None:
        from confluent_kafka import Producer

        self.where = where
        self.timeout_s = float(log.timeout_s)
        client, _ = split_options(log.options)
        if "transactional.id" in client:
            raise LogError(
                "the log option transactional.id is not allowed: Streamtide names its "
                "transactional producers itself"
            )
        required = {**REQUIRED_PRODUCER, "transactional.id": transactional_id}
        config = client_config(log.bootstrap, client, required, TRANSACTIONAL_DEFAULTS)
        config.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        config.setdefault("message.timeout.ms", MESSAGE_TIMEOUT_MS)
        config["error_cb"] = self._on_error
        self._fatal: Any = None
        self._lost: Any = None  # the connection error that broke the open transaction
        self._failures: list[tuple[str, int, Any]] = []
        #: (topic, partition) -> offset of the last record acknowledged there
        self.last_offsets: dict[tuple[str, int], int] = {}
        self._open = False
        self.producer = new_client(Producer, config, f"starting producer {transactional_id}")
        init = self.producer.init_transactions
        self.call(lambda: init(self.timeout_s), "initialising the transactions of")

    def __enter__(self) -> KafkaTransaction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()
        self.close()

    def begin(self) -> None:
        if self._lost is not None:
            raise LogUnavailableError(
                f"{self.where}: the connection to Kafka broke during an earlier transaction "
                f"({self._lost}); this producer is not used again"
            )
        self._failures.clear()
        self.last_offsets.clear()
        self.producer.begin_transaction()
        self._open = True

    def send(self, topic: str, partition: int, record: LogRecord) -> None:
        """Queue one record of the transaction; fails early once a send has failed."""
        self.produce(topic, partition, record.key, record.value, record.timestamp, record.headers)

    def produce(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> None:
        """``send`` without building a ``LogRecord``."""
        self.produce_many(topic, partition, [key], [value], [timestamp], [tuple(headers or ())])

    def produce_many(
        self,
        topic: str,
        partition: int,
        keys: list[bytes | None],
        values: list[bytes | None],
        timestamps: list[int],
        headers: list[Any],
    ) -> None:
        """``produce`` of whole columns to one partition. Only the last record reports its
        delivery (its offset is the partition's last): a record that fails makes the
        transaction's commit fail, so none is lost unnoticed."""
        from confluent_kafka import KafkaException

        if timestamps and min(timestamps) < 1:
            raise LogError(
                f"the Kafka log stores timestamps from 1 ms on, got {min(timestamps)} for "
                f"{topic}/{partition}"
            )
        produce, last = self.producer.produce, len(keys) - 1
        for index, (key, value, timestamp, header) in enumerate(
            zip(keys, values, timestamps, headers)
        ):
            while True:
                try:
                    produce(
                        topic,
                        value,
                        key,
                        partition,
                        on_delivery=self._delivered if index == last else None,
                        timestamp=timestamp,
                        headers=list(header) if header else None,
                    )
                    break
                except BufferError:  # the client's queue is full: let it send
                    self.producer.poll(POLL_S)
                except KafkaException as e:
                    raise self.error(e, f"writing to {topic}/{partition} in") from None
        if self._fatal is not None or self._failures or self._lost is not None:
            self._raise_failure()

    def send_offsets(self, offsets: list[Any], group_metadata: Any) -> None:
        """Add consumer-group offsets (``confluent_kafka.TopicPartition`` with metadata) to the
        transaction: they commit with its records, or not at all."""
        self.flush()  # the records first: nothing of them is sent after a broker restart
        send = self.producer.send_offsets_to_transaction
        self.call(lambda: send(offsets, group_metadata, self.timeout_s), "sending offsets in")

    def commit(self) -> None:
        """Flush what was sent and commit the transaction."""
        self.flush()
        commit = self.producer.commit_transaction
        self.call(lambda: commit(self.timeout_s), "committing")
        self._open = False

    def commit_with(self, topic: str, partition: int, marker: LogRecord) -> int:
        """Flush the records, send ``marker`` last (so its partition is in the transaction only
        briefly) and commit; the marker's offset."""
        self.flush()
        self.send(topic, partition, marker)
        self.commit()
        return self.last_offsets[(topic, partition)]

    def abort(self) -> None:
        """Abort an open transaction (best effort: a fenced or unreachable producer's
        transaction is aborted by the next ``init_transactions`` of its id)."""
        if self._open:
            self._open = False
            try:
                self.call(lambda: self.producer.abort_transaction(self.timeout_s), "aborting")
            except LogError:
                pass

    def close(self) -> None:
        """Drop what is still queued; the producer is not used again."""
        self.producer.purge(in_queue=True, in_flight=True, blocking=False)

    def flush(self) -> None:
        """Wait until every queued record is acknowledged; fail on a failed send."""
        flush = self.producer.flush
        left = self.call(lambda: flush(self.timeout_s), "flushing")
        if self._fatal is not None or self._failures or self._lost is not None:
            self._raise_failure()
        if left:
            raise LogUnavailableError(
                f"{self.where}: {left} record(s) unacknowledged after {self.timeout_s:g} s"
            )

    def call(self, call: Callable[[], T], what: str) -> T:
        """``call()`` bounded by the log's timeout plus ``GRACE_S``; Kafka errors become
        ``LogError``s (``ProducerFencedError`` when this producer was fenced)."""
        from confluent_kafka import KafkaException

        try:
            return bounded(
                call,
                self.timeout_s + GRACE_S,
                f"{what} {self.where}",
                give_up=lambda: self._lost is not None and self._open,
            )
        except (KafkaException, SystemError) as e:
            # SystemError: the client may fail a call on a fatal error without attaching it.
            raise self.error(e, what) from None

    def error(self, exc: BaseException, what: str) -> LogError:
        cause = kafka_error(exc)
        if cause is None and self._fatal is None and isinstance(exc, SystemError):
            # the client failed the call on an error it did not attach: ask it again, with
            # a call that reports a fatal error (say, this producer was fenced) as such
            cause = self._pending_error()
        if _name(cause) in FENCED_ERRORS or _name(self._fatal) in FENCED_ERRORS:
            return ProducerFencedError(f"{what} {self.where}: a newer producer fenced this one")
        if cause is None and self._fatal is not None:
            return LogError(f"{what} {self.where}: {self._fatal}")
        return translate(exc, f"{what} {self.where}")

    def _pending_error(self) -> Any:
        """The error a failed producer holds, found by aborting its transaction (None if
        that tells nothing)."""
        try:
            bounded(lambda: self.producer.abort_transaction(1.0), GRACE_S, "probing " + self.where)
        except BaseException as e:  # the probe's own error is the answer
            return kafka_error(e)
        return None

    def _raise_failure(self) -> None:
        if self._lost is not None and self._open and not self._failures:
            raise LogUnavailableError(
                f"{self.where}: the connection to Kafka broke during the transaction "
                f"({self._lost}); it is given up"
            )
        if self._failures:
            topic, partition, error = self._failures[0]
        else:
            topic, partition, error = "", -1, self._fatal
        where = f"writing to {topic}/{partition} in" if topic else "writing in"
        if _name(error) in FENCED_ERRORS or _name(self._fatal) in FENCED_ERRORS:
            raise ProducerFencedError(f"{where} {self.where}: a newer producer fenced this one")
        raise LogError(f"{where} {self.where}: {error}")

    def _delivered(self, error: Any, message: Any) -> None:
        try:
            if error is not None:
                self._failures.append((message.topic(), message.partition(), error))
            else:
                offset = message.offset()
                key = (message.topic(), message.partition())
                if offset > self.last_offsets.get(key, -1):
                    self.last_offsets[key] = offset
        except SystemError as e:  # the client calls back with its fatal error still pending
            self._fatal = self._fatal or kafka_error(e) or error

    def _on_error(self, error: Any) -> None:
        if error.fatal():
            self._fatal = error
        elif self._open and _name(error) in CONNECTION_LOST:
            self._lost = error
        log_client_error(error)


def bounded(
    call: Callable[[], T],
    timeout_s: float,
    what: str,
    give_up: Callable[[], bool] | None = None,
) -> T:
    """``call()`` with an outer deadline: some client calls can block past their own timeout.
    ``give_up()`` (asked while waiting) ends the wait early with ``LogUnavailableError``."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # handed to the caller
            outcome.append((False, e))

    thread = threading.Thread(target=run, name="streamtide-kafka-call", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(min(POLL_S * 5, max(0.0, deadline - time.monotonic())))
        if not outcome and give_up is not None and give_up():
            raise LogUnavailableError(f"{what}: the connection to Kafka broke")
    if not outcome:
        raise LogUnavailableError(f"{what}: no answer from Kafka within {timeout_s:g} s")
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def kafka_error(exc: BaseException | None) -> Any:
    """The KafkaError an exception carries, also as the cause of the ``SystemError`` the client
    raises when it calls back with an error pending; None if there is none."""
    for _ in range(8):
        if exc is None:
            return None
        if error_name(exc):
            return exc.args[0]
        exc = exc.__cause__ or exc.__context__
    return None


def _name(error: Any) -> str:
    name = getattr(error, "name", None)
    return name() if callable(name) else ""
