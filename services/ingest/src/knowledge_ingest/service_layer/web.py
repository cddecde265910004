"""Web pages by URL: the page is fetched (fenced, by the ``PageFetcher`` port) and its body
streams into the upload path as any upload's would, its final URL kept as ``source_url``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.documents import Job
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.fetching import page_filename, target
from knowledge_ingest.service_layer.uploads import UploadSource, UploadUseCases


class FetchedPage(Protocol):
    @property
    def final_url(self) -> str: ...
    @property
    def content_type(self) -> str: ...
    @property
    def chunks(self) -> AsyncIterator[bytes]: ...


class PageFetcher(Protocol):
    def open(self, url: str) -> contextlib.AbstractAsyncContextManager[FetchedPage]:
        """The page at ``url`` after redirects; ``UrlRefused`` or ``FetchFailed`` when it cannot be had."""


@dataclass
class WebPageUseCases:
    uploads: UploadUseCases
    fetcher: PageFetcher

    async def ingest_url(self, scope: Scope, corpus_id: str, url: str) -> tuple[Job, str]:
        """The job, and the URL the page came from after redirects."""
        url = url.strip()
        if not url:
            raise InvalidRequest("url must not be empty", field="url")
        if not corpus_id.strip():
            raise InvalidRequest("corpus_id must not be empty", field="corpus_id")
        target(url)  # a malformed or non-http URL is refused before anything else
        async with self.fetcher.open(url) as page:
            source = UploadSource(
                corpus_id,
                page_filename(page.final_url, page.content_type),
                page.content_type,
                page.chunks,
                page.final_url,
            )
            return await self.uploads.upload_page(scope, source), page.final_url
