"""POSTing an event to a webhook's endpoint, fenced (``clients.fenced``): the host is resolved when
a session first sends, the address checked against the fence (DNS rebinding gets nowhere: the
connection goes to the address checked), and the session's requests reuse that one connection.
Each attempt has a time limit, reads at most ``max_response_bytes`` of the answer, follows no
redirect and takes no proxy from the environment. A session is one webhook's: a connection is
never shared between two hosts, so a TLS connection is only ever used for the name it verified."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from knowledge_ingest.clients.fenced import request_to, resolve
from knowledge_ingest.domain.errors import FetchFailed, UrlRefused
from knowledge_ingest.domain.fetching import Target
from knowledge_ingest.domain.webhooks import Attempt, answer_error, webhook_target

USER_AGENT = "knowledge-ingest/0.1 (+webhooks)"
MAX_RESPONSE_BYTES = 64 * 1024


class Session:
    def __init__(self, client: httpx.AsyncClient, url: str, allowed: frozenset[str], timeout_s: float, cap: int):
        self._client = client
        self._url = url
        self._allowed = allowed
        self._timeout_s = timeout_s
        self._cap = cap
        self._to: tuple[Target, str] | None = None

    async def post(self, body: bytes, headers: dict[str, str]) -> Attempt:
        started = time.monotonic()

        def elapsed_ms() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            where, address = await self._address()
        except (UrlRefused, FetchFailed) as error:
            return Attempt(0, elapsed_ms(), str(error))
        request = request_to(
            self._client, "POST", self._url, where, address, {"User-Agent": USER_AGENT, **headers}, body
        )
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.send(request, stream=True)
                latency = elapsed_ms()
                try:
                    await self._drain(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            self._to = None
            return Attempt(0, elapsed_ms(), f"no answer within {self._timeout_s:g} s")
        except httpx.HTTPError as error:
            self._to = None
            return Attempt(0, elapsed_ms(), f"the connection failed ({type(error).__name__})")
        return Attempt(response.status_code, latency, answer_error(response.status_code))

    async def _address(self) -> tuple[Target, str]:
        if self._to is None:
            where = webhook_target(self._url, self._allowed)
            self._to = where, await resolve(where, self._allowed)
        return self._to

    async def _drain(self, response: httpx.Response) -> None:
        """Reads the answer up to the cap (so the connection can carry the next request); past
        it, stops reading: the connection is closed instead of read to its end."""
        read = 0
        async for chunk in response.aiter_raw():
            read += len(chunk)
            if read > self._cap:
                return


class WebhookSender:
    def __init__(self, allowed: frozenset[str], *, timeout_s: float, max_response_bytes: int = MAX_RESPONSE_BYTES):
        self._allowed = allowed
        self._timeout_s = timeout_s
        self._cap = max_response_bytes

    async def check(self, url: str) -> None:
        """At registration: the URL's form and where its host resolves now (UrlRefused /
        FetchFailed); every session checks the address again."""
        await resolve(webhook_target(url, self._allowed), self._allowed)

    @asynccontextmanager
    async def session(self, url: str) -> AsyncIterator[Session]:
        async with httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            verify=True,
            timeout=httpx.Timeout(self._timeout_s),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        ) as client:
            yield Session(client, url, self._allowed, self._timeout_s, self._cap)
