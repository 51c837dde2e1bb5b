"""A stand-in browser for the OAuth tests (``BROWSER="python open_url.py %s"``): it GETs the
authorization URL and follows redirects, as a person's browser would, up to the broker's
loopback redirect."""

from __future__ import annotations

import sys

import httpx


def main() -> int:
    # The servers under test are local: no proxy from the environment may stand between.
    response = httpx.get(sys.argv[1], follow_redirects=True, timeout=30, trust_env=False)
    return 0 if response.is_success else 1


if __name__ == "__main__":
    raise SystemExit(main())
