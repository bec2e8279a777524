"""``open_log``: a log from a URL.

- ``file:///abs/path`` or ``file://relative/path`` (also ``file://./dir``): the file log;
- a bare path (absolute or relative): the file log;
- ``None`` or ``""``: the file log at ``./streamtide-data``;
- ``kafka://host:port[,host:port...]``: the Kafka log on that cluster.

Options are passed on: to ``FileLog`` (``fsync``, ``checkpoint_every``), or to ``KafkaLog``
as confluent-kafka settings (``StreamsConfig.log_options``; see ``kafka_client``).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

from streamtide.log.api import Log
from streamtide.log.errors import LogError

DEFAULT_LOG_PATH = "./streamtide-data"
DEFAULT_LOG_URL = f"file://{DEFAULT_LOG_PATH}"


def log_path(url: str | None) -> str:
    """The local directory a ``file://`` URL or bare path names (not yet made absolute)."""
    if not url:
        return DEFAULT_LOG_PATH
    scheme, sep, rest = url.partition("://")
    if not sep:
        return os.path.expanduser(url)
    scheme = scheme.lower()
    if scheme == "kafka":
        raise LogError(
            f"{url!r} is a Kafka log, which has no local directory; this needs the file log "
            "(a file:// URL or a directory path)"
        )
    if scheme != "file":
        raise LogError(
            f"cannot open {url!r}: unsupported log URL scheme {scheme!r}; use file:///path "
            "or kafka://host:port"
        )
    if rest.startswith("localhost/"):
        rest = rest[len("localhost") :]
    path = unquote(rest)
    if not path:
        raise LogError(f"the log URL {url!r} names no directory")
    return os.path.expanduser(path)


def is_kafka_url(url: str | None) -> bool:
    """Whether ``url`` names a Kafka log (``kafka://...``)."""
    return bool(url) and str(url).partition("://")[0].lower() == "kafka" and "://" in str(url)


def open_log(url: str | None = None, **options: Any) -> Log:
    """Open the log that ``url`` names (see the module docstring for the accepted forms)."""
    if is_kafka_url(url):
        from streamtide.log.kafka_client import parse_bootstrap
        from streamtide.log.kafka_log import KafkaLog

        text = str(url)
        return KafkaLog(parse_bootstrap(text.partition("://")[2], text), options)
    from streamtide.log.file_log import FileLog  # a Kafka application never imports it

    return FileLog(log_path(url), **options)
