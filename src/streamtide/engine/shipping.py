"""Ship the user's code to executors: modules that workers cannot import are pickled by value.

Spark pickles functions and classes by reference (module + name), which fails on executors
when the defining module is not installed there (a script's helper module, a test module).
Library code (site-packages, the standard library, Streamtide itself) stays by reference.
"""

from __future__ import annotations

import inspect
import sys
import sysconfig
from collections.abc import Callable
from types import ModuleType
from typing import Any

from streamtide.processor.nodes import ProcessorNodeDef, SinkNodeDef
from streamtide.processor.topology import Topology

_LIBRARY_ROOTS = tuple(
    p
    for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    if p
)


def _is_user_module(module: ModuleType | None) -> bool:
    if module is None or module.__name__ in ("__main__", "builtins"):
        return False
    if module.__name__.split(".")[0] == "streamtide":
        return False
    path: str | None = getattr(module, "__file__", None)  # built-in modules have none
    if not path:
        return False
    return not path.startswith(_LIBRARY_ROOTS)


def _referenced(obj: Any, depth: int = 3) -> list[Any]:
    """``obj`` and the functions/classes it refers to through closures, globals and (for
    plain objects such as an operator's settings) their attributes."""
    found = [obj]
    if depth == 0:
        return found
    code = getattr(obj, "__code__", None)
    closure = getattr(obj, "__closure__", None) or ()
    values = [cell.cell_contents for cell in closure if _has_contents(cell)]
    if code is not None:
        module_globals = getattr(obj, "__globals__", {})
        values += [module_globals[n] for n in code.co_names if n in module_globals]
    if code is None and not inspect.isclass(obj):  # an object: look at what it holds
        values += list(getattr(obj, "__dict__", {}).values())
        values += [getattr(obj, n) for n in getattr(type(obj), "__slots__", ()) if hasattr(obj, n)]
    for value in values:
        holds_code = callable(value) or hasattr(value, "__dict__")
        if holds_code and not inspect.ismodule(value):
            found += _referenced(value, depth - 1)
    return found


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False


def ship_user_modules(topology: Topology) -> list[str]:
    """Register the user modules a topology's code comes from to be pickled by value."""
    from pyspark import cloudpickle

    # cloudpickle has no annotations
    register_by_value: Callable[[ModuleType], None] = cloudpickle.register_pickle_by_value
    names: set[str] = set()
    for node in topology.nodes.values():
        targets: list[Any] = []
        if isinstance(node, ProcessorNodeDef) and node.supplier is not None:
            targets = _referenced(node.supplier)
        elif isinstance(node, SinkNodeDef):
            targets = [
                target
                for function in (node.partitioner, node.topic_extractor)
                if function is not None
                for target in _referenced(function)
            ]
        for target in targets:
            module_name = getattr(target, "__module__", None)
            if not isinstance(module_name, str):
                module_name = type(target).__module__
            module = sys.modules.get(module_name)
            if module is not None and _is_user_module(module) and module.__name__ not in names:
                register_by_value(module)
                names.add(module.__name__)
    return sorted(names)
