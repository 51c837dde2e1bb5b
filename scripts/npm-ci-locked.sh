#!/usr/bin/env bash
# Installs the npm packages of one folder from its lock file with the machine's npm, once per
# lock file version: `scripts/npm-ci-locked.sh FOLDER WHAT-FOR`.
set -euo pipefail
folder="$1"
purpose="$2"
if ! command -v npm >/dev/null 2>&1; then
    echo "npm not found; install Node.js (with npm) to $purpose" >&2
    exit 1
fi
cd "$folder"
stamp=node_modules/.installed-lock
if [ -f package-lock.json ] && [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
    exit 0  # already installed from this exact lock file
fi
if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
else
    npm install --no-audit --no-fund --loglevel=error
fi
cp package-lock.json "$stamp"
