"""``python -m context_broker.server.cli``: the command line of the ``context-broker`` script."""

from . import main

raise SystemExit(main())
