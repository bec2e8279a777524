"""``open_log``: a log from a URL.

- ``file:///abs/path`` or ``file://relative/path`` (also ``file://./dir``): the file log;
- a bare path (absolute or relative): the file log;
- ``None`` or ``""``: the file log at ``./streamtide-data``;
- ``kafka://host:port``: not available in this release (a clear LogError says so).

Options (``fsync``, ``checkpoint_every``) are passed on to ``FileLog``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

from streamtide.log.api import Log
from streamtide.log.errors import LogError
from streamtide.log.file_log import FileLog

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
            f"cannot open {url!r}: Kafka support is not available in this release of "
            "Streamtide; use the embedded log (a file:// URL or a directory path)"
        )
    if scheme != "file":
        raise LogError(
            f"cannot open {url!r}: unsupported log URL scheme {scheme!r}; use file:///path"
        )
    if rest.startswith("localhost/"):
        rest = rest[len("localhost") :]
    path = unquote(rest)
    if not path:
        raise LogError(f"the log URL {url!r} names no directory")
    return os.path.expanduser(path)


def open_log(url: str | None = None, **options: Any) -> Log:
    """Open the log that ``url`` names (see the module docstring for the accepted forms)."""
    return FileLog(log_path(url), **options)
