"""Web pages by URL: the request checks the URL and queues a job; the job's first stage fetches
the page (fenced, by the ``PageFetcher`` port, ``Pipeline._fetch``) and admits its bytes as an
upload's, its final URL kept as ``source_url``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.documents import Job, parse_id, safe_filename
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.fetching import page_filename, target
from knowledge_ingest.guards import require_writable
from knowledge_ingest.jobs.uploads import UploadUseCases


class FetchedPage(Protocol):
    @property
    def final_url(self) -> str: ...
    @property
    def content_type(self) -> str: ...
    @property
    def chunks(self) -> AsyncIterator[bytes]: ...


class PageFetcher(Protocol):
    async def check(self, url: str) -> None:
        """``UrlRefused`` or ``FetchFailed`` for a URL that cannot be fetched as it stands now."""

    def open(self, url: str) -> contextlib.AbstractAsyncContextManager[FetchedPage]:
        """The page at ``url`` after redirects; ``UrlRefused`` or ``FetchFailed`` when it cannot be had."""


@dataclass
class WebPageUseCases:
    uploads: UploadUseCases
    fetcher: PageFetcher

    async def ingest_url(self, scope: Scope, corpus_id: str, url: str) -> Job:
        """The job, answered at once: its first stage fetches the page (durable, like every
        stage); the URL's form and its host's address are checked here first, so a refused URL
        is refused now (``UrlRefused``), and again by the fetch and after each redirect."""
        url = url.strip()
        if not url:
            raise InvalidRequest("url must not be empty", field="url")
        if not corpus_id.strip():
            raise InvalidRequest("corpus_id must not be empty", field="corpus_id")
        target(url)  # a malformed or non-http URL is refused before anything else
        corpus = parse_id(corpus_id, "corpus_id")
        reach = await self.uploads.reach.reach_of(scope)
        await require_writable(self.uploads.documents, scope, reach, corpus, corpus_id)
        await self.fetcher.check(url)
        name = safe_filename(page_filename(url, ""))
        return await self.uploads.jobs.enqueue_fetch(scope.tenant, corpus, url, name)
