"""Benchmarks. ``python -m bench`` runs Streamtide, Spark's native streaming operators and a
plain-Python ceiling side by side on one generated workload (see ``bench/run.py``)."""
