"""The wire: JSON-RPC lines and every private name of the MCP SDK the broker relies on, below
the gateway and the transports that use them."""
