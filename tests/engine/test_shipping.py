"""User code that executors cannot import is shipped by value; library code is not."""

from __future__ import annotations

import sys
import types
from datetime import timedelta

from streamtide import StreamsBuilder
from streamtide.engine.shipping import ship_user_modules


def make_user_module(tmp_path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text("def event_id(key, value):\n    return value['id']\n")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    sys.modules[name] = module
    return module


def test_a_named_selector_inside_an_operator_is_shipped(tmp_path) -> None:
    module = make_user_module(tmp_path, "user_selectors_for_shipping")
    builder = StreamsBuilder()
    builder.stream("in").deduplicate_by_key_value(module.event_id, timedelta(seconds=1))
    assert "user_selectors_for_shipping" in ship_user_modules(builder.build())


def test_library_code_stays_by_reference() -> None:
    builder = StreamsBuilder()
    builder.stream("in").map_values(str.upper).filter(lambda k, v: bool(v))
    shipped = ship_user_modules(builder.build())
    assert not any(name.startswith(("streamtide", "json", "builtins")) for name in shipped)
