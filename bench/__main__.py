"""``python -m bench``: see ``bench/run.py``; ``python -m bench latency``: ``bench/latency.py``."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["latency"]:
        from bench.latency import main as latency

        latency(sys.argv[2:])
    else:
        from bench.run import main

        main()
