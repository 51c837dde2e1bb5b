"""What a person looks at: the request-context view as an MCP App (``ui://`` resource and its
app-only tool) and the read-only web pages the HTTP transport serves under ``/ui/``."""
