"""The README's tour runs as written: its Python snippets are executed in order, in one
namespace (a snippet may rely on the ones before it), in a fresh working directory, and every
``print(...)  # expected`` line must print exactly its comment (``# e.g. ...`` shows an example
of output that varies, and is not compared)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.readme import blocks

PRINTED = re.compile(r"^\s*print\(.*\)\s+# (.+)$")

pytestmark = pytest.mark.spark


def run_snippets(snippets: list[str]) -> None:
    """Run ``snippets`` in order in one namespace; check what each commented print printed."""
    namespace: dict[str, Any] = {"__name__": "readme"}
    for index, snippet in enumerate(snippets):
        name = f"README snippet {index + 1}"
        printed: dict[int, list[str]] = {}

        def printing(*args: Any, name: str = name, printed: dict = printed, **_: Any) -> None:
            frame = sys._getframe(1)
            if frame.f_code.co_filename == name:
                printed.setdefault(frame.f_lineno, []).append(" ".join(map(str, args)))

        namespace["print"] = printing
        exec(compile(snippet, name, "exec"), namespace)
        for number, line in enumerate(snippet.splitlines(), start=1):
            match = PRINTED.match(line)
            if match and not match.group(1).startswith("e.g. "):
                assert printed.get(number) == [match.group(1).strip()], f"{name}: {line}"


def test_every_python_snippet_of_the_tour_runs_in_order(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths (./streamtide-data) land here
    snippets = blocks("## A tour", "python")
    assert len(snippets) == 11
    run_snippets(snippets)


def test_the_checker_notices_a_wrong_comment() -> None:
    with pytest.raises(AssertionError, match="README snippet 1"):
        run_snippets(["print(1 + 1)  # 3\n"])
