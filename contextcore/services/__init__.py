"""The services that orchestrate the domain: the broker, conversation history, usage
analytics and evaluation.

They hold the pure modules beside them (catalog, search, sessions, history) together and keep
the rules that span several of them; the server reaches the domain through them.
"""

from __future__ import annotations

__all__: list[str] = []
