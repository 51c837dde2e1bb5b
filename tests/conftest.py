"""Settings every test shares: the Hypothesis profile.

Property tests stay random where developers run them (each run tries new cases), and run
derandomized under CI (``HYPOTHESIS_PROFILE=ci``, which ``.ci/run`` sets): the same cases on
every run and no example database, so whether a change lands never depends on luck.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
