"""The transports: the host's stdio lines (with the pass-through of plain forwarded calls),
Streamable HTTP and SSE behind the HTTP guard, and what they share with the MCP SDK."""
