"""Fetching a web page for ``IngestUrl``, fenced: each URL (the first and every redirect's) is
checked by ``domain.fetching`` and connected to through ``clients.fenced`` (its host resolved
once, the address checked, the connection made to that address). At most ``max_redirects``
redirects, a total time limit, and no proxies from the environment; the body streams out as it
arrives (the caller caps its size)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from knowledge_ingest.clients.fenced import request_to, resolve
from knowledge_ingest.domain.errors import FetchFailed
from knowledge_ingest.domain.fetching import target

_REDIRECTS = {301, 302, 303, 307, 308}
USER_AGENT = "knowledge-ingest/0.1 (+IngestUrl)"


@dataclass(frozen=True)
class FetchedPage:
    final_url: str
    content_type: str
    chunks: AsyncIterator[bytes]


class WebFetcher:
    def __init__(self, allowed: frozenset[str], *, timeout_s: float = 30.0, max_redirects: int = 5) -> None:
        self._allowed = allowed
        self._timeout_s = timeout_s
        self._max_redirects = max_redirects

    async def check(self, url: str) -> None:
        """Before a job is queued: the URL's form and the address its host resolves to now
        (``UrlRefused`` / ``FetchFailed``); the fetch checks again, and after each redirect."""
        await resolve(target(url), self._allowed)

    @contextlib.asynccontextmanager
    async def open(self, url: str) -> AsyncIterator[FetchedPage]:
        deadline = time.monotonic() + self._timeout_s
        async with httpx.AsyncClient(
            trust_env=False, follow_redirects=False, verify=True, timeout=httpx.Timeout(self._timeout_s)
        ) as client:
            for _ in range(self._max_redirects + 1):
                where = target(url)
                address = await resolve(where, self._allowed)
                request = request_to(
                    client,
                    "GET",
                    url,
                    where,
                    address,
                    {
                        "User-Agent": USER_AGENT,
                        "Accept": "text/html, application/xhtml+xml, application/pdf, text/plain;q=0.9, */*;q=0.5",
                    },
                )
                try:
                    async with asyncio.timeout(max(deadline - time.monotonic(), 0.001)):
                        response = await client.send(request, stream=True)
                except TimeoutError:
                    raise FetchFailed(f"no answer within {self._timeout_s:g} s") from None
                except httpx.HTTPError as error:
                    raise FetchFailed(f"the connection failed ({type(error).__name__})") from None
                try:
                    if response.status_code in _REDIRECTS and response.headers.get("location"):
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise FetchFailed(f"the site answered {response.status_code}")
                    content_type = response.headers.get("content-type", "application/octet-stream")
                    yield FetchedPage(
                        url, content_type.split(";", 1)[0].strip().lower(), _body(response, deadline, self._timeout_s)
                    )
                    return
                finally:
                    await response.aclose()
            raise FetchFailed(f"more than {self._max_redirects} redirects")


async def _body(response: httpx.Response, deadline: float, timeout_s: float) -> AsyncIterator[bytes]:
    try:
        async with asyncio.timeout(max(deadline - time.monotonic(), 0.001)):
            async for chunk in response.aiter_bytes(256 * 1024):
                yield chunk
    except TimeoutError:
        raise FetchFailed(f"the page did not arrive within {timeout_s:g} s") from None
    except httpx.HTTPError as error:
        raise FetchFailed(f"the connection failed ({type(error).__name__})") from None
