#!/usr/bin/env bash
# Runs the whole test suite (after making sure the setup is complete).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
