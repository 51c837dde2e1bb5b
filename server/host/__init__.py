"""The broker's MCP surface: the low-level server with its tools, resources and prompts."""
