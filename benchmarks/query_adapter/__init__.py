"""The query adapter's pairs, training and measurement (see SOURCES.md)."""

import os

# Before numpy loads: the broker runs BLAS single-threaded (see server/cli.py), and on a
# shared machine a thread pool per process only makes them wait on each other.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
