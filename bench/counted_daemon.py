"""Spark's Python worker daemon with the benchmark's write counters installed first, so every
worker forked from it counts (``bench/io_counts.py``; named by ``spark.python.daemon.module``).
"""

from bench.io_counts import install_from_env

install_from_env()

if __name__ == "__main__":
    from pyspark.daemon import manager

    manager()
