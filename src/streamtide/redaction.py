"""Client secrets are never shown: which log options are secret, and how they are masked.

Log options (``StreamsConfig.log_options``, a ``STREAMTIDE_LOG_CONFIG`` file, ``--log-option``)
carry the Kafka clients' credentials: ``sasl.password``, ``ssl.key.password``,
``ssl.keystore.password``, ``sasl.oauthbearer.client.secret``, a ``sasl.jaas.config``, PEM key
material. Whatever shows options (a ``repr``, an error message, a log line) shows
``redacted_options``; free text that may quote a value (a client library's error) goes through
``redact_text`` with the options it may quote. The values themselves go only where they are
used: to the clients, and with the application to the executors (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: What a secret value is shown as (librdkafka's own word for it in its config dumps).
MASK = "[redacted]"

_SECRET_WORDS = ("password", "passwd", "secret", "token", "credential", "jaas", "private")
_SECRET_NAMES = ("sasl.oauthbearer.config",)
_PARTS = re.compile(r"[._-]")
#: A ``key`` option naming where key material lies, not the material itself.
_PLACES = ("location", "path", "file", "dir", "directory")


def is_secret_option(name: str) -> bool:
    """Whether a client setting's value is a secret: a password, secret, token, credential,
    JAAS or OAuth configuration, or key material (``ssl.key.pem``; not ``ssl.key.location``,
    which is a path)."""
    lowered = str(name).lower()
    if any(word in lowered for word in _SECRET_WORDS) or lowered in _SECRET_NAMES:
        return True
    parts = _PARTS.split(lowered)
    return any(p in ("key", "apikey") for p in parts) and parts[-1] not in _PLACES


def redacted_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with every secret value replaced by ``MASK`` (for showing them)."""
    return {key: MASK if is_secret_option(key) else value for key, value in options.items()}


def redact_text(text: str, options: Mapping[str, Any]) -> str:
    """``text`` with every secret value of ``options`` that it quotes replaced by ``MASK``."""
    values = {str(v) for k, v in options.items() if is_secret_option(k) and str(v)}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
