"""``python -m context_broker.server.cli``: the command line of the ``context-broker`` script."""

from .main import main

raise SystemExit(main())
