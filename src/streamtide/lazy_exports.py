"""Lazy package exports: a package names what it exports and imports each name's module only
when the name is first asked for.

A work unit imports ``streamtide.engine.worker``, which imports the ``streamtide`` package
first; were that package to import its whole public API (the DSL, every store, both logs),
every Python worker would pay for modules its work never uses. With ``lazy_exports`` the
package's ``__init__`` stays cheap and ``from streamtide import StreamsBuilder`` still works
(as does ``from streamtide import *``: it looks up each name of ``__all__``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, namespace: dict[str, object], exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are ``namespace``):
    ``exports`` maps each exported name to the module that defines it. A name, once imported,
    is kept in ``namespace`` (later lookups do not come here)."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
