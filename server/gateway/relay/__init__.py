"""The relay: what a downstream server says or asks during a call goes to the host that made
it; a 2026-07-28 host gets its questions as exchanges; resource subscriptions."""
