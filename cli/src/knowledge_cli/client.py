"""A small client of the public REST API (through the gateway), with errors a script can rely on.

Every failure is an :class:`ApiError` carrying the exit code the ``knowledge`` command ends
with (see :data:`EXIT_CODES`) and a one-line message naming the HTTP status and the error's
``reason`` when the server gave one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
from knowledge_runtime.refusals import REFUSALS, refusal_of

DEFAULT_URL = "http://127.0.0.1:8080/api/v1/knowledge"

OK = 0
FAILED = 1  # the server failed (5xx), or an operation did (an ingestion job FAILED or was CANCELLED)
USAGE = 2  # bad arguments or configuration, or a request the server refused as invalid (400)
NOT_FOUND = 3  # 404: no such corpus, document or job in the caller's tenant
AUTH = 4  # 401 / 403: no valid token, or the token lacks the capability
CONFLICT = 5  # 409: e.g. the tenant already has a corpus with that name
TOO_LARGE = 6  # 413: the file is over the upload cap
RATE_LIMITED = 7  # 429 still after honouring Retry-After a few times
UNREACHABLE = 8  # the gateway could not be reached, or did not answer in time
INTERRUPTED = 130  # Ctrl-C

EXIT_CODES = {
    OK: "success",
    FAILED: "server error, or the operation failed (e.g. an ingestion job failed)",
    USAGE: "usage or configuration error, or a request the server rejected as invalid (HTTP 400)",
    NOT_FOUND: "not found (HTTP 404); another tenant's resource is not found too",
    AUTH: "not authenticated or not allowed (HTTP 401/403)",
    CONFLICT: "conflict (HTTP 409), e.g. a duplicate corpus name",
    TOO_LARGE: "the file is larger than the upload cap (HTTP 413)",
    RATE_LIMITED: "rate limited (HTTP 429) after retrying",
    UNREACHABLE: "the gateway cannot be reached",
    INTERRUPTED: "interrupted (Ctrl-C)",
}
_BY_STATUS = {400: USAGE, 401: AUTH, 403: AUTH, 404: NOT_FOUND, 409: CONFLICT, 413: TOO_LARGE, 429: RATE_LIMITED}
_MAX_RATE_LIMIT_RETRIES = 3
_CHUNK = 1024 * 1024
BATCH_TEXTS = 1000  # items per POST /texts:batch (the server's limit)


class ApiError(Exception):
    """A failed call: ``exit_code`` for the process, ``str()`` for a person."""

    def __init__(self, message: str, exit_code: int, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status
        self.reason = reason

    @property
    def refusal_words(self) -> str:
        """What a refusal of the closed set means, in plain words (REFUSALS[..].plain); empty
        for any other error."""
        refusal = refusal_of(self.reason)
        return REFUSALS[refusal].plain if refusal is not None else ""


def error_from_response(response: httpx.Response) -> ApiError:
    status = response.status_code
    message, reason = response.reason_phrase or "error", ""
    try:
        body = response.json()
        message = str(body.get("message") or message)
        details = body.get("details") or []
        if details and isinstance(details[0], dict):
            reason = str(details[0].get("reason") or "")
    except (ValueError, AttributeError):
        pass
    code = _BY_STATUS.get(status, FAILED)
    label = f"HTTP {status}" + (f" {reason}" if reason else "")
    return ApiError(f"{message} ({label})", code, status=status, reason=reason)


class Client:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._base = base_url.rstrip("/")
        self.base_url, self.token = (
            self._base,
            token,
        )  # ``models swap --eval`` runs ``knowledge eval``'s client with them
        self._http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s, transport=transport)
        self._sleep = sleep

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """The one map of httpx's timeouts and transport failures (refused, reset, a stream cut
        mid-body) to an UNREACHABLE ApiError."""
        try:
            yield
        except httpx.TimeoutException:
            raise ApiError(f"{self._base} did not answer in time", UNREACHABLE) from None
        except httpx.TransportError as error:
            raise ApiError(f"cannot reach {self._base}: {error}", UNREACHABLE) from None

    def _call(self, method: str, path: str, **kwargs) -> dict:
        url = f"{self._base}{path}"
        for attempt in range(_MAX_RATE_LIMIT_RETRIES + 1):
            with self._reaching():
                response = self._http.request(method, url, **kwargs)
            if response.status_code == 429 and attempt < _MAX_RATE_LIMIT_RETRIES and "content" not in kwargs:
                self._sleep(_retry_after(response))
                continue
            if response.is_success:
                try:
                    return response.json()
                except ValueError:
                    raise ApiError(f"the server answered HTTP {response.status_code} without JSON", FAILED) from None
            raise error_from_response(response)
        raise AssertionError("unreachable")

    def _pages(self, path: str, key: str, params: Mapping[str, str] | None = None, *, page_size: int) -> Iterator[dict]:
        """Every item under ``key`` of a paginated list, following ``next_page_token`` to the end."""
        token = ""
        while True:
            page = self._call(
                "GET",
                path,
                params={"page_size": page_size, **(params or {}), **({"page_token": token} if token else {})},
            )
            yield from page.get(key, [])
            token = page.get("next_page_token", "")
            if not token:
                return

    # -- corpora -----------------------------------------------------------------------------
    def create_corpus(self, name: str, description: str = "", *, platform_wide: bool = False) -> dict:
        """``platform_wide``: a GENERAL corpus every tenant reads (a ``platform.admin`` token of the
        platform tenant only)."""
        body: dict = {"name": name, "description": description}
        if platform_wide:
            body["platformWide"] = True
        return self._call("POST", "/corpora", json=body)

    def list_corpora(self) -> Iterator[dict]:
        return self._pages("/corpora", "corpora", page_size=1000)

    # -- documents and jobs ------------------------------------------------------------------
    def upload(self, path: Path, corpus_id: str, *, on_bytes: Callable[[int], None] | None = None) -> dict:
        """Streams the file (never whole in memory) with its Content-Length; the job handle."""
        size = path.stat().st_size

        def chunks() -> Iterator[bytes]:
            with path.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    if on_bytes:
                        on_bytes(len(chunk))
                    yield chunk

        return self._call(
            "POST",
            "/upload",
            params={"corpus_id": corpus_id, "filename": path.name},
            content=chunks(),
            headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
        )

    def ingest_texts(self, items: Sequence[Mapping[str, str]]) -> Iterator[dict]:
        """Texts the caller has (``corpus_id``, ``text``, optional ``title``, ``source_url``,
        ``document_id``), each its own job, sent BATCH_TEXTS at a time (``POST /texts:batch``):
        one answer per item in order, ``{"index", "job": {...}}`` or ``{"index", "error_reason",
        "error", "error_code"}``, ``index`` counting over every item given."""
        for start in range(0, len(items), BATCH_TEXTS):
            reply = self._call(
                "POST", "/texts:batch", json={"items": [dict(i) for i in items[start : start + BATCH_TEXTS]]}
            )
            for answer in reply.get("items", []):
                yield {**answer, "index": start + int(answer.get("index", 0))}

    def ingest_url(self, url: str, corpus_id: str) -> dict:
        """The service fetches the page (POST /urls); the job handle, with the final URL."""
        return self._call("POST", "/urls", json={"url": url, "corpus_id": corpus_id})

    def job(self, job_id: str) -> dict:
        return self._call("GET", f"/ingest/{quote(job_id, safe='')}")

    def cancel_job(self, job_id: str) -> dict:
        return self._call("POST", f"/ingest/{quote(job_id, safe='')}:cancel", json={})

    def document(self, document_id: str) -> dict:
        return self._call("GET", f"/documents/{quote(document_id, safe='')}")

    def set_document_access(self, document_id: str, principals: Sequence[str]) -> dict:
        """``{"document": ..., "previous_principals": [...]}``; no document when the list leaves the caller out."""
        return self._call(
            "POST", f"/documents/{quote(document_id, safe='')}:setAccess", json={"principals": list(principals)}
        )

    def set_corpus_default_access(self, corpus_id: str, principals: Sequence[str]) -> dict:
        """The corpus, with its new ``default_principals``."""
        answer = self._call(
            "POST",
            f"/corpora/{quote(corpus_id, safe='')}:setDefaultAccess",
            json={"default_principals": list(principals)},
        )
        return answer["corpus"]

    def list_documents(self, corpus_id: str) -> Iterator[dict]:
        return self._pages(f"/corpora/{quote(corpus_id, safe='')}/documents", "documents", page_size=1000)

    def batch_get_documents(self, document_ids: Sequence[str]) -> dict:
        """``{"documents": [...], "not_found_ids": [...]}`` for up to 100 ids."""
        return self._call("GET", "/documents:batchGet", params=[("document_ids", d) for d in document_ids])

    def watch_documents(self, corpus_id: str) -> Iterator[dict]:
        """The corpus's documents, then each change, as the server sends them (one JSON
        ``DocumentChange`` per line; see WatchDocuments). Ends when the server ends the stream."""
        url = f"{self._base}/corpora/{quote(corpus_id, safe='')}/documents:watch"
        timeout = httpx.Timeout(self._http.timeout.connect, read=None)  # a quiet corpus sends nothing for a while
        with self._reaching(), self._http.stream("GET", url, timeout=timeout) as response:
            if not response.is_success:
                response.read()
                raise error_from_response(response)
            for line in response.iter_lines():
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError:
                        raise ApiError("the server sent a line that is not JSON", FAILED) from None

    def document_text(self, document_id: str, page: int = 0) -> dict:
        params = {"page": page} if page else {}
        return self._call("GET", f"/documents/{quote(document_id, safe='')}/text", params=params)

    def delete_document(self, document_id: str, reason: str = "") -> dict:
        params = {"reason": reason} if reason else None
        return self._call("DELETE", f"/documents/{quote(document_id, safe='')}", params=params)

    # -- tombstones, corpus deletion -------------------------------------------------
    def delete_corpus(self, corpus_id: str, *, delete_documents: bool = False) -> dict:
        params = {"delete_documents": "true"} if delete_documents else None
        return self._call("DELETE", f"/corpora/{quote(corpus_id, safe='')}", params=params)

    def tombstones(self, corpus_id: str = "") -> Iterator[dict]:
        params = {"corpus_id": corpus_id} if corpus_id else {}
        return self._pages("/tombstones", "tombstones", params, page_size=1000)

    # -- retrieval ---------------------------------------------------------------------------
    def search(self, query: str, *, corpus_id: str = "", document_id: str = "", top_k: int = 0, mode: str = "") -> dict:
        body: dict = {"query": query, "corpus_id": corpus_id, "document_id": document_id, "top_k": top_k}
        if mode:
            body["mode"] = f"SEARCH_MODE_{mode.upper()}"
        return self._call("POST", "/search", json=body)

    def query(self, question: str, *, corpus_id: str = "", document_id: str = "", top_k: int = 0) -> dict:
        return self._call(
            "POST",
            "/query",
            json={"query": question, "corpus_id": corpus_id, "document_id": document_id, "top_k": top_k},
        )

    # -- agent-facing reads ---------------------------------------------------------
    def context(self, query: str, *, top_k: int = 0) -> dict:
        return self._call("POST", "/context", json={"query": query, "top_k": top_k})

    def prefetch(self, user_message: str) -> dict:
        return self._call("POST", "/prefetch", json={"user_message": user_message})

    # -- fenced imports, change findings, auto-index ---------------------------------
    # -- passages by reference ---------------------------------------------------------------
    def index_passages(self, body: Mapping[str, object]) -> dict:
        """``POST /passages:index``: a version of a file's passages; its job handle (or unchanged)."""
        return self._call("POST", "/passages:index", json=dict(body))

    def remove_by_reference(self, corpus: Mapping[str, str], document_ref: str) -> dict:
        """``corpus``: ``{"corpus_id": ...}`` or ``{"corpus_key": ...}``."""
        return self._call("POST", "/passages:remove", json={**corpus, "document_ref": document_ref})

    def check_indexing(self, corpus: Mapping[str, str], size_bytes: int, passages: int, document_ref: str = "") -> dict:
        body = {**corpus, "bytes": str(size_bytes), "passages": passages}
        return self._call(
            "POST", "/passages:check", json={**body, **({"document_ref": document_ref} if document_ref else {})}
        )

    def import_paths(self, paths: Sequence[str], corpus_id: str) -> list[dict]:
        """Files under the operator's import roots (POST /imports): one item per path, with the
        resolved path and the job handle."""
        return self._call("POST", "/imports", json={"corpus_id": corpus_id, "paths": list(paths)}).get("items", [])

    def import_roots(self) -> list[dict]:
        return self._call("GET", "/imports/roots").get("roots", [])

    def set_import_binding(self, corpus_id: str, root: str, mode: str) -> dict:
        return self._call(
            "PUT", f"/corpora/{quote(corpus_id, safe='')}/imports/{quote(root, safe='')}", json={"mode": mode}
        )

    def import_bindings(self, corpus_id: str) -> list[dict]:
        return self._call("GET", f"/corpora/{quote(corpus_id, safe='')}/imports").get("bindings", [])

    def scan_imports(self, corpus_id: str) -> dict:
        return self._call("POST", f"/corpora/{quote(corpus_id, safe='')}/imports:scan", json={})

    def findings(self, corpus_id: str, state: str = "") -> Iterator[dict]:
        params = {"state": state} if state else {}
        return self._pages(f"/corpora/{quote(corpus_id, safe='')}/findings", "findings", params, page_size=1000)

    def accept_finding(self, finding_id: str) -> dict:
        return self._call("POST", f"/findings/{quote(finding_id, safe='')}:accept", json={})

    def dismiss_finding(self, finding_id: str) -> dict:
        return self._call("POST", f"/findings/{quote(finding_id, safe='')}:dismiss", json={})

    # -- tenants and usage --------------------------------------------------------
    def usage(self, period: str = "") -> dict:
        return self._call("GET", "/usage", params={"period": period} if period else {})

    def tenant_settings(self, tenant: str) -> dict:
        return self._call("GET", f"/tenants/{quote(tenant, safe='')}/settings")

    def put_tenant_settings(self, tenant: str, enabled: bool, quotas: Mapping[str, object]) -> dict:
        body = {"enabled": enabled, "quotas": dict(quotas)}
        return self._call("PUT", f"/tenants/{quote(tenant, safe='')}/settings", json=body)

    # -- model changes ------------------------------------------------------------
    def start_model_change(self, to_model: str) -> dict:
        return self._call("POST", "/modelChanges", json={"to_model": to_model})

    def model_change(self) -> dict:
        return self._call("GET", "/modelChanges/current")

    def swap_model(self, body: Mapping[str, object]) -> dict:
        """``{current, candidate, force, margin}``: the gate decides; the change as it is now."""
        return self._call("POST", "/modelChanges/current:swap", json=dict(body))

    def end_model_change(self, verb: str) -> dict:
        """``rollback`` or ``cancel``."""
        return self._call("POST", f"/modelChanges/current:{verb}", json={})

    def put_evaluation_set(self, name: str, corpus_id: str, queries: Sequence[Mapping[str, object]]) -> dict:
        """The stored set (``queries``: ``{query_id, text, relevant: {document id: grade}}``)."""
        body = {"corpus_id": corpus_id, "queries": [dict(q) for q in queries]}
        return self._call("PUT", f"/evaluationSets/{quote(name, safe='')}", json=body)

    def delete_evaluation_set(self, name: str) -> dict:
        return self._call("DELETE", f"/evaluationSets/{quote(name, safe='')}")

    # -- webhooks -----------------------------------------------------------------
    def create_webhook(self, url: str, event_types: Sequence[str], description: str = "") -> dict:
        """The webhook and its signing secret (the only answer that carries it)."""
        body = {"url": url, "event_types": list(event_types), "description": description}
        return self._call("POST", "/webhooks", json=body)

    def webhooks(self) -> Iterator[dict]:
        return self._pages("/webhooks", "webhooks", page_size=1000)

    def webhook(self, webhook_id: str) -> dict:
        return self._call("GET", f"/webhooks/{quote(webhook_id, safe='')}")

    def update_webhook(self, webhook_id: str, fields: Mapping[str, object]) -> dict:
        """Changes the fields given (the service reads the set ones as the update mask)."""
        return self._call("PATCH", f"/webhooks/{quote(webhook_id, safe='')}", json={"webhook": dict(fields)})["webhook"]

    def delete_webhook(self, webhook_id: str) -> dict:
        return self._call("DELETE", f"/webhooks/{quote(webhook_id, safe='')}")

    def rotate_webhook_secret(self, webhook_id: str, grace_seconds: int = 0) -> dict:
        body = {"grace_seconds": grace_seconds} if grace_seconds else {}
        return self._call("POST", f"/webhooks/{quote(webhook_id, safe='')}:rotateSecret", json=body)

    def replay_webhook(self, webhook_id: str, after: str = "") -> dict:
        return self._call("POST", f"/webhooks/{quote(webhook_id, safe='')}:replay", json={"after": after})["webhook"]

    def webhook_deliveries(self, webhook_id: str, limit: int) -> list[dict]:
        """The newest ``limit`` attempts, newest first."""
        path = f"/webhooks/{quote(webhook_id, safe='')}/deliveries"
        return self._call("GET", path, params={"page_size": limit}).get("deliveries", [])

    # -- document AI --------------------------------------------------------------
    def create_document_type(self, name: str, description: str, examples: Sequence[str], reason: str) -> dict:
        body = {"name": name, "description": description, "examples": list(examples), "reason": reason}
        return self._call("POST", "/document_types", json=body)["document_type"]

    def document_types(self, include_retired: bool = False) -> Iterator[dict]:
        params = {"include_retired": "true"} if include_retired else {}
        return self._pages("/document_types", "document_types", params, page_size=200)

    def set_document_type_retired(self, name: str, retired: bool) -> dict:
        verb = "retire" if retired else "restore"
        return self._call("POST", f"/document_types/{quote(name, safe='')}:{verb}", json={})["document_type"]

    def create_extraction_schema(self, type_name: str, json_schema: str) -> dict:
        path = f"/document_types/{quote(type_name, safe='')}/schemas"
        return self._call("POST", path, json={"json_schema": json_schema})["schema"]

    def extraction_schemas(self, type_name: str) -> list[dict]:
        return self._call("GET", f"/document_types/{quote(type_name, safe='')}/schemas").get("schemas", [])

    def classify_document(self, document_id: str) -> dict:
        return self._call("POST", f"/documents/{quote(document_id, safe='')}:classify", json={})

    def extract_document(self, document_id: str, schema_name: str = "", schema_version: int = 0) -> dict:
        body: dict = {"schema_name": schema_name, **({"schema_version": schema_version} if schema_version else {})}
        return self._call("POST", f"/documents/{quote(document_id, safe='')}:extract", json=body)

    def process_document(self, document_id: str) -> dict:
        return self._call("POST", f"/documents/{quote(document_id, safe='')}:process", json={})

    def processing_results(self, document_id: str) -> list[dict]:
        path = f"/documents/{quote(document_id, safe='')}/processing_results"
        return list(self._pages(path, "results", page_size=100))


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("retry-after", "1")), 0.0), 30.0)
    except ValueError:
        return 1.0
