"""``python -m server.cli``: the same command line as the ``context-broker`` script."""

from .main import main

raise SystemExit(main())
