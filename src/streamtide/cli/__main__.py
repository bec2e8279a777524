"""``python -m streamtide.cli``."""

from streamtide.cli import main

main()
