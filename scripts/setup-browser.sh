#!/usr/bin/env bash
# Makes sure Debian's headless-capable Chromium is at /usr/bin/chromium for the UI tests
# (driven by Playwright with that executable; no browser is ever downloaded by Playwright).
# Idempotent: does nothing when the browser is already there.
set -euo pipefail

BROWSER=/usr/bin/chromium
if [ -x "$BROWSER" ]; then
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "setup-browser: $BROWSER is missing and this script is not running as root;" \
        "install it with 'sudo apt-get install -y chromium' and run the tests again" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-browser: $BROWSER is missing and apt-get is not available;" \
        "install Chromium so that $BROWSER exists and run the tests again" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium >/dev/null 2>&1; then
    apt-get update -q
fi
apt-get install -y -q --no-install-recommends chromium >/dev/null
if [ ! -x "$BROWSER" ]; then
    echo "setup-browser: apt-get installed chromium but $BROWSER is still missing" >&2
    exit 1
fi
