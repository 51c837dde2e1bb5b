"""Connections and lanes: one live session per downstream server (stdio, Streamable HTTP or
SSE), its fast stdio lane, the handshake, per-host handshake lanes and the supervisor that
keeps it connected."""
