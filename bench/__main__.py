"""``python -m bench``: see ``bench/run.py``; ``python -m bench latency``: ``bench/latency.py``;
``python -m bench partitions``: ``bench/partitions.py``; ``python -m bench control_channel``:
``bench/control_channel.py``; ``python -m bench startup``: ``bench/startup.py``."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["latency"]:
        from bench.latency import main as latency

        latency(sys.argv[2:])
    elif sys.argv[1:2] == ["partitions"]:
        from bench.partitions import main as partitions

        partitions(sys.argv[2:])
    elif sys.argv[1:2] == ["startup"]:
        from bench.startup import main as startup

        startup(sys.argv[2:])
    elif sys.argv[1:2] == ["control_channel"]:
        from bench.control_channel import main as control_channel

        control_channel(sys.argv[2:])
    else:
        from bench.run import main

        main()
