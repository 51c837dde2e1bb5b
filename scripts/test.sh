#!/usr/bin/env bash
# Runs the test suite after making sure the serving setup (scripts/setup.sh) and the test setup
# (scripts/setup-test.sh) are complete; pytest arguments pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup-test.sh
exec .venv/bin/python -m pytest "$@"
