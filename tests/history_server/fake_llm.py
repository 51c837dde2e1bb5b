"""A fake LLM API on 127.0.0.1 speaking the Anthropic Messages and OpenAI chat-completions
protocols, with scripted failures (timeout, 429, 500, malformed body)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Behaviour = Literal["ok", "429", "500", "malformed", "hang"]

SUMMARY = "LLM SUMMARY: fixed bug in app/main.py (error 42)"


class FakeLLM:
    """``behaviour`` picks the answer; ``requests`` records (path, headers, body)."""

    def __init__(self) -> None:
        self.behaviour: Behaviour = "ok"
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self._release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                # Header names are case-insensitive; recorded lower-cased.
                headers = {name.lower(): value for name, value in self.headers.items()}
                fake.requests.append((self.path, headers, body))
                fake._answer(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        behaviour = self.behaviour
        if behaviour == "hang":
            # Answers only when the test ends: the client must give up on its own.
            self._release.wait(30)
            return
        if behaviour in ("429", "500"):
            self._send(handler, int(behaviour), b'{"error": {"type": "overloaded"}}')
            return
        if behaviour == "malformed":
            self._send(handler, 200, b'{"choices": "nope", "content": 7')
            return
        if handler.path.endswith("/v1/messages"):
            data: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": SUMMARY}],
            }
        elif handler.path.endswith("/chat/completions"):
            data = {"choices": [{"message": {"role": "assistant", "content": SUMMARY}}]}
        else:
            self._send(handler, 404, b"{}")
            return
        self._send(handler, 200, json.dumps(data).encode())

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
