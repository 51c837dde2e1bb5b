#!/usr/bin/env bash
# Sets up everything the broker and its tests need, idempotently:
#   .venv/ with the project and its test tools, and the embedding model prepared offline.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test,dev]" 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import contextcore, server, tools" # fails loudly if the install did not work
.venv/bin/context-broker setup-model
# Node-based test peers (MCP Inspector CLI, the conformance suite) and a Node new enough for them.
if [ -x scripts/setup-node.sh ]; then
    scripts/setup-node.sh
fi
# Downstream MCP servers the gateway tests run against (PyPI and npm, pinned).
if [ -x scripts/setup-downstream.sh ]; then
    scripts/setup-downstream.sh
fi
