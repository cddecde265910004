"""A real local HTTP server speaking the chat-completions protocol, for the LLM synthesiser's tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """An OpenAI-compatible /v1/chat/completions endpoint on 127.0.0.1 that records what it got."""

    def __init__(
        self,
        answer: str = "An answer [1].",
        status: int = 200,
        raw: bytes | None = None,
        answers: list[str] | None = None,
    ) -> None:
        """``answers``: one per request in order (then ``answer`` for every later one)."""
        self.answer, self.status, self.raw = answer, status, raw
        self.answers = list(answers or [])
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append({"path": self.path, **body})
                server.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    payload, status = b'{"error": "not found"}', 404
                elif server.raw is not None:
                    payload, status = server.raw, server.status
                else:
                    status = server.status
                    payload = json.dumps(
                        {
                            "id": "chatcmpl-1",
                            "object": "chat.completion",
                            "model": body["model"],
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": server.next_answer()},
                                }
                            ],
                            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
                        }
                    ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def next_answer(self) -> str:
        return self.answers.pop(0) if self.answers else self.answer

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
