"""What serves hosts: the low-level MCP server with the broker's tools, resources and prompts,
and the gateway's tools beside them."""
