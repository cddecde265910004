"""A webhook receiver for the tests: an HTTP server on 127.0.0.1 that verifies every request with
the Standard Webhooks reference library (``standardwebhooks.Webhook.verify``), records what it
got, and can answer an error, never answer, or go away and come back on the same port."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from dataclasses import dataclass, field

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.support.net import free_port


@dataclass
class Received:
    webhook_id: str
    event: dict
    verified_by: list[int]  # the indexes of the receiver's secrets that verify it
    arrived: float  # time.time()
    answered: int  # the status it was answered (0: none)


@dataclass
class Receiver:
    """``secrets``: what the receiver verifies with (set once CreateWebhook answered one)."""

    secrets: list[str] = field(default_factory=list)
    status: int = 200
    hang: bool = False  # never answer (until closed)
    delay: float = 0.0  # seconds before each answer (a slow endpoint)
    port: int = field(default_factory=free_port)
    path: str = "/hook"

    def __post_init__(self) -> None:
        self.received: list[Received] = []
        self.unverified: list[str] = []  # why each unverified request failed
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: http.server.ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    @property
    def allow(self) -> str:
        """Its KNOWLEDGE_WEBHOOK_ALLOW_HOSTS entry."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real endpoint would

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver._take(dict(self.headers.items()), body, 0 if receiver.hang else receiver.status)
                with receiver._lock:
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                try:
                    if receiver.hang:
                        receiver._closing.wait()
                        return
                    if receiver.delay:
                        time.sleep(receiver.delay)
                    self.send_response(receiver.status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                finally:
                    with receiver._lock:
                        receiver.in_flight -= 1

            def log_message(self, *args) -> None:
                pass

        self._closing.clear()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Goes away: nothing listens on its port until ``start``."""
        if self._server is not None:
            self._closing.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _take(self, headers: dict[str, str], body: bytes, answered: int) -> None:
        verified = []
        for index, secret in enumerate(self.secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified.append(index)
            except WebhookVerificationError:
                pass
        lowered = {k.lower(): v for k, v in headers.items()}
        with self._lock:
            if not verified:
                self.unverified.append(lowered.get("webhook-id", "?"))
            self.received.append(
                Received(lowered.get("webhook-id", ""), json.loads(body), verified, time.time(), answered)
            )

    def ids(self) -> list[str]:
        with self._lock:
            return [r.webhook_id for r in self.received]

    def acknowledged(self) -> list[Received]:
        """The requests it answered 2xx, in arrival order."""
        with self._lock:
            return [r for r in self.received if 200 <= r.answered < 300]

    def first_arrivals(self, *, acknowledged: bool = False) -> list[str]:
        """Each webhook id once, in the order it first arrived (``acknowledged``: was answered 2xx)."""
        seen: dict[str, None] = {}
        for webhook_id in [r.webhook_id for r in self.acknowledged()] if acknowledged else self.ids():
            seen.setdefault(webhook_id, None)
        return list(seen)

    async def wait_requests(self, count: int, timeout: float = 30.0) -> None:
        """Until ``count`` requests arrived, repeats included."""
        deadline = time.monotonic() + timeout
        while len(self.ids()) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.ids())} of {count} requests arrived at {self.url}")
            await asyncio.sleep(0.05)

    async def wait_for(self, count: int, timeout: float = 60.0, *, acknowledged: bool = False) -> list[str]:
        """Until ``count`` different events arrived (``acknowledged``: were answered 2xx); their
        ids in first-arrival order."""
        deadline = time.monotonic() + timeout
        while True:
            firsts = self.first_arrivals(acknowledged=acknowledged)
            if len(firsts) >= count:
                return firsts
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(firsts)} of {count} events arrived at {self.url}")
            await asyncio.sleep(0.05)
