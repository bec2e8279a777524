"""The README's sections and code blocks, for the tests that run them as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def section(title: str) -> str:
    """The README section headed ``title`` (``## ...`` or ``### ...``), with its
    sub-sections."""
    text = README.read_text()
    start = text.index(f"\n{title}\n")
    level = title.split(" ")[0]
    following = re.search(rf"\n#{{1,{len(level)}}} ", text[start + 1 :])
    return text[start : start + 1 + following.start()] if following else text[start:]


def blocks(title: str, language: str) -> list[str]:
    """The code blocks in ``language`` (```python, ```bash, ...) of the section ``title``."""
    return re.findall(rf"```{language}\n(.*?)```", section(title), flags=re.S)


def commands(title: str) -> list[str]:
    """The ``streamtide`` commands (also through ``./dev``) of the section's bash blocks, with
    continued lines joined and trailing comments left out."""
    found = []
    for block in blocks(title, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command.startswith(("streamtide ", "./dev streamtide ")):
                found.append(re.sub(r"\s+", " ", command))
    return found
