"""OAuth for HTTP and SSE downstream servers: the client flow, the loopback redirect and the
token store."""
