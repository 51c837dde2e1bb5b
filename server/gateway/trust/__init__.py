"""Trust and pins: which downstream tools a host may see and call, tool descriptions
sanitized, definitions pinned and approved, arguments checked, secrets masked."""
