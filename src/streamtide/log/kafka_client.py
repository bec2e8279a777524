"""Client settings and error translation for the Kafka log (on confluent-kafka).

Options given to ``open_log("kafka://...", **options)`` (``StreamsConfig.log_options``) go to
confluent-kafka unchanged, with three exceptions:

- keys starting with ``topic.`` are, as in Kafka Streams, configs of the topics this log
  creates (``topic.retention.ms=-1`` creates every topic with ``retention.ms=-1``);
- keys starting with ``streamtide.`` are the log's own settings (``CONNECT_TIMEOUT``);
- the settings the log's correctness rests on (``REQUIRED_*``) are added; a user value that
  contradicts one is refused with a clear error instead of being silently replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from streamtide.log.errors import (
    LogError,
    LogUnavailableError,
    OffsetOutOfRangeError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from streamtide.redaction import redact_text

LOGGER = logging.getLogger("streamtide.log.kafka")
#: Names a file of Kafka client settings (``key=value`` lines, ``#`` comments, as in Kafka's
#: ``client.properties``) that the command line uses with ``kafka://`` logs.
LOG_CONFIG_ENV = "STREAMTIDE_LOG_CONFIG"

#: Prefix of options that configure created topics rather than the client.
TOPIC_PREFIX = "topic."
#: Prefix of the log's own settings, which no client sees.
OWN_PREFIX = "streamtide."
#: How long the log waits for the cluster to answer at all before it reports it unreachable
#: (ms): Kafka clients otherwise retry a dead address until each call's own timeout.
CONNECT_TIMEOUT = "streamtide.connect.timeout.ms"
DEFAULT_CONNECT_TIMEOUT_MS = 10_000

#: Every reader sees committed records only and never commits offsets or creates topics.
REQUIRED_CONSUMER = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "allow.auto.create.topics": False,
}
#: Appends are idempotent (no duplicates or reordering on retries) and never create topics.
REQUIRED_PRODUCER = {"enable.idempotence": True, "allow.auto.create.topics": False}

#: Throughput settings of the reading consumer (a log option overrides them): a batch's range
#: of one partition (often tens of thousands of records) arrives in a few fetches instead of
#: one per megabyte. The reader assigns one partition at a time, so this bounds its buffer.
READER_DEFAULTS = {"max.partition.fetch.bytes": 16 << 20, "fetch.max.bytes": 64 << 20}
#: Throughput settings of transactional producers (a log option overrides them): records wait
#: up to ``linger.ms`` to fill a batch, and a transaction's flush and commit send what is
#: left at once, so lingering costs a transaction no time (docs/kafka.md, "Client settings").
#: No compression by default: measured on a local broker it cost more CPU than it saved.
TRANSACTIONAL_DEFAULTS = {"linger.ms": 100}

#: Group id of the reading consumer: it only ever uses assign(), so it never joins a group.
READER_GROUP_ID = "streamtide-log-reader"

#: Configs of changelog topics (Kafka Streams: compacted; the latest value per key is kept).
CHANGELOG_CONFIGS: dict[str, str] = {"cleanup.policy": "compact"}
#: Configs of repartition topics: Kafka Streams keeps them forever (records may carry old
#: event timestamps) and purges what was consumed with ``delete_records`` after each commit.
REPARTITION_CONFIGS: dict[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1"}


def parse_bootstrap(rest: str, url: str) -> str:
    """``host:port[,host:port...]`` from the part of a ``kafka://`` URL after the scheme."""
    servers = [s.strip() for s in rest.rstrip("/").split(",")]
    if not servers or not all(servers):
        raise LogError(f"the log URL {url!r} names no broker; use kafka://host:port[,host:port]")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise LogError(
                f"the log URL {url!r} has {server!r} where host:port is expected "
                "(kafka://host:port[,host:port])"
            )
    return ",".join(servers)


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Client settings and the ``topic.``-prefixed configs of created topics."""
    client: dict[str, Any] = {}
    topics: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise LogError(f"log option names must be strings, got {key!r}")
        if key.startswith(TOPIC_PREFIX):
            topics[key[len(TOPIC_PREFIX) :]] = str(value)
        elif key.startswith(OWN_PREFIX):
            if key != CONNECT_TIMEOUT:
                raise LogError(f"unknown log option {key!r}; Streamtide's own: {CONNECT_TIMEOUT}")
        else:
            client[key] = value
    if "bootstrap.servers" in client:
        raise LogError("bootstrap.servers comes from the log URL (kafka://host:port), not options")
    return client, topics


def connect_timeout_s(options: Mapping[str, Any]) -> float:
    """``CONNECT_TIMEOUT`` of ``options`` in seconds (``DEFAULT_CONNECT_TIMEOUT_MS`` if unset);
    LogError unless it is a positive number of milliseconds."""
    value = options.get(CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT_MS)
    try:
        ms = float(value)
    except (TypeError, ValueError):
        ms = -1.0
    if isinstance(value, bool) or not ms > 0:
        raise LogError(
            f"log option {CONNECT_TIMEOUT} must be a positive number of ms, got {value!r}"
        )
    return ms / 1000


def unreachable(bootstrap: str, timeout_s: float, exc: BaseException) -> LogError:
    """The error for a cluster that gave no answer within ``timeout_s``, naming the bootstrap
    servers and what to check; another error as ``translate`` classifies it."""
    if error_name(exc) not in _UNAVAILABLE:
        return translate(exc, f"connecting to Kafka at {bootstrap}")
    err: object = exc.args[0] if exc.args else exc
    describe = getattr(err, "str", None)  # a KafkaError describes itself with str()
    reason = describe() if callable(describe) else str(err)
    return LogUnavailableError(
        f"cannot reach Kafka at {bootstrap} within {timeout_s:g} s ({reason}): check that the "
        "brokers run and that this machine reaches them at those addresses (host names, ports, "
        "firewalls, the brokers' advertised.listeners), and the security settings in "
        f"log_options or the {LOG_CONFIG_ENV} file; the log option {CONNECT_TIMEOUT} sets the wait"
    )


def client_config(
    bootstrap: str,
    options: Mapping[str, Any],
    required: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The configuration of one client: the user's options over ``defaults``, plus the
    required settings."""
    config = {"bootstrap.servers": bootstrap, **(defaults or {}), **options}
    for key, value in (required or {}).items():
        if key in config and _normal(config[key]) != _normal(value):
            raise LogError(
                f"log option {key}={config[key]!r} conflicts with the Kafka log, which needs "
                f"{key}={value!r}"
            )
        config[key] = value
    config.setdefault("logger", LOGGER)
    config.setdefault("error_cb", log_client_error)
    return config


def new_client(factory: Callable[[dict[str, Any]], Any], config: dict[str, Any], what: str) -> Any:
    """A confluent-kafka client made by ``factory``; a ``LogError`` naming ``what`` when the
    client refuses its settings, with every secret value it might quote masked (and the
    original exception, which would show it again in a trace, dropped)."""
    from confluent_kafka import KafkaException

    try:
        return factory(config)
    except (KafkaException, ValueError, TypeError) as exc:
        message = redact_text(str(exc.args[0] if exc.args else exc), config)
        raise LogError(f"{what}: the Kafka client refused its settings: {message}") from None


def _normal(value: Any) -> str:
    return str(value).lower()


def log_client_error(error: Any) -> None:
    """The clients' error callback: errors the client reports outside any call."""
    LOGGER.warning("Kafka client error: %s", error)


# -- errors ------------------------------------------------------------------------------------

_UNAVAILABLE = {
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_TIMED_OUT",
    "_RESOLVE",
    "_SSL",
    "_AUTHENTICATION",
    "REQUEST_TIMED_OUT",
    "SASL_AUTHENTICATION_FAILED",
    "NETWORK_EXCEPTION",
}


def error_name(exc: BaseException) -> str:
    """The Kafka error name (``UNKNOWN_TOPIC_OR_PART``, ``_TRANSPORT``, ...) or ``""``."""
    args = getattr(exc, "args", ())
    err = args[0] if args else None
    name = getattr(err, "name", None)
    return name() if callable(name) else ""


def translate(exc: BaseException, what: str) -> LogError:
    """A ``LogError`` subclass for a confluent-kafka exception, classified by error code."""
    name = error_name(exc)
    message = f"{what}: {exc.args[0] if exc.args else exc}"
    if name in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID"):
        return UnknownTopicError(f"{what}: the topic does not exist")
    if name == "_UNKNOWN_PARTITION":
        return UnknownPartitionError(message)
    if name == "TOPIC_ALREADY_EXISTS":
        return TopicExistsError(message)
    if name == "OFFSET_OUT_OF_RANGE":
        return OffsetOutOfRangeError(message)
    if name in _UNAVAILABLE:
        return LogUnavailableError(message)
    return LogError(message)
