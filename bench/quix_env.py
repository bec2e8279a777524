"""Quix Streams, the peer of ``bench.kafka``, in a virtual environment of its own
(``bench/.quix-venv``, created on first use with ``python -m venv`` and ``pip install
quixstreams``): never a dependency of Streamtide, never imported by it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".quix-venv"
RUNNER = Path(__file__).resolve().parent / "quix_runner.py"
#: What is installed when the environment is created (``--quix-version`` pins another).
REQUIREMENT = "quixstreams"


def quix_python(requirement: str = REQUIREMENT) -> Path:
    """The interpreter of the Quix environment, created (and Quix installed) if missing."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    if not marker.exists():
        print(f"creating {VENV} and installing {requirement} (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True
        )
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", requirement], check=True)
        marker.write_text(requirement + "\n")
    return python


def quix_version(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import quixstreams; print(quixstreams.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()
