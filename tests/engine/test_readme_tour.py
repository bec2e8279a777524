"""The README's tour runs as written: the Python snippets of a section are executed in order, in
one namespace, and every ``print(...)  # expected`` line must print exactly its comment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
PRINTED = re.compile(r"^\s*print\(.*\)\s+# (.+)$")

pytestmark = pytest.mark.spark


def section_snippets(title: str) -> list[str]:
    """The ```python blocks of the README section headed ``title``."""
    text = README.read_text()
    start = text.index(f"\n{title}\n")
    following = re.search(r"\n#{1,3} ", text[start + 1 :])
    section = text[start : start + 1 + following.start()] if following else text[start:]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def run_snippets(snippets: list[str]) -> None:
    printed: list[str] = []
    namespace: dict[str, Any] = {
        "__name__": "readme",
        "print": lambda *args: printed.append(" ".join(map(str, args))),
    }
    for index, snippet in enumerate(snippets):
        before = len(printed)
        exec(compile(snippet, f"README snippet {index + 1}", "exec"), namespace)
        expected = [m.group(1).strip() for m in map(PRINTED.match, snippet.splitlines()) if m]
        assert printed[before:] == expected, f"README snippet {index + 1}"


def test_the_tables_and_joins_tour_runs_as_written(spark: Any) -> None:
    snippets = section_snippets("### Tables and joins")
    assert len(snippets) == 2
    run_snippets(snippets)


def test_the_checker_notices_a_wrong_comment() -> None:
    with pytest.raises(AssertionError, match="README snippet 1"):
        run_snippets(["print(1 + 1)  # 3\n"])
