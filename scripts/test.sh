#!/usr/bin/env bash
# Runs the test suite after making sure the serving setup (scripts/setup.sh) and the test setup
# (scripts/setup-test.sh) are complete; pytest arguments pass through.
# The tests run in parallel, one pytest-xdist worker per core (TEST_WORKERS sets how many;
# `-n 0` among the arguments runs them in this one process). Every worker has its own
# temporary folders, ports, databases and downstream processes. A test module runs whole on
# one worker, so what its module-scoped fixtures start (a browser, the model's embeddings, a
# built wheel) starts once; modules go out in the order collected, the long ones first
# (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup-test.sh
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-auto}" --dist loadfile --no-loadscope-reorder "$@"
