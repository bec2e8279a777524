"""Objects named in configuration by a dotted name (``module.name`` or ``module:name``)."""

from __future__ import annotations

import importlib
from typing import Any

from streamtide.errors import ConfigError


def resolve_name(name: Any, where: str, kind: str, usage: str) -> Any:
    """The object ``name`` names; a ``ConfigError`` that says ``where`` otherwise: ``usage``
    when ``name`` is not a dotted name, "cannot find <kind>" when nothing answers to it."""
    if not isinstance(name, str) or "." not in name.replace(":", "."):
        raise ConfigError(f"{where}: {usage}, got {name!r}")
    module, _, attribute = name.replace(":", ".").rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: cannot find {kind} {name!r} ({exc})") from None
