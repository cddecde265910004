"""The one catalogue of ``ErrorInfo`` reasons: every reason a service or the gateway can send.

Each reason fixes its gRPC code, the HTTP status a REST caller gets for it, the metadata keys its
``ErrorInfo`` may carry and one sentence of meaning. The proto enum ``knowledge.v1.ErrorReason``
lists the same names (a test keeps the two equal, name for name, and another fails on a reason
raised anywhere in the code that is not here); docs/api.md's error table is generated from this
one (``scripts/gen_refusals.py``, run by ``make protos``).

The refusals (``knowledge_runtime.refusals``) are part of the catalogue: a closed subset, with
whether waiting helps; they are added from their own table below, so each is declared once.

Rules the entries follow, so a client can act on a reason without reading the code:

- A field's value that is simply wrong is ``INVALID_REQUEST``, with ``field`` naming it, in every
  service. A reason of its own only where the client has something else to do about it
  (``PAGE_TOKEN_INVALID``: start the listing again; ``UNKNOWN_FIELD``: the client's schema is newer
  or misspelt; ``URL_REFUSED``: the address will never be fetched).
- A metadata key means the same and holds the same kind of value under every reason
  (``METADATA_KEYS``); a resource's identifier is carried under its field's name
  (``document_id``, ``corpus_id``) wherever it is not found.
- The gateway's own answers (a token it refuses, a body over the cap, the rate limit, a path the
  API does not have) use the same reasons as the services, so the same failure reads the same
  over gRPC, REST and gRPC through the gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from knowledge_runtime.refusals import REFUSALS

# The HTTP status the gateway (Envoy's gRPC-JSON transcoder) answers for each gRPC code.
HTTP_OF_CODE: Mapping[str, int] = {
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}

KeyType = Literal["string", "integer", "id"]


@dataclass(frozen=True, slots=True)
class KeySpec:
    type: KeyType  # what the (always string) value holds: text, decimal digits, or an opaque id
    meaning: str


# Every ErrorInfo metadata key, once: the same key means the same thing under every reason.
METADATA_KEYS: Mapping[str, KeySpec] = {
    "field": KeySpec(
        "string", "the request field at fault, as a path of proto names (`filters.corpus_id`, `document_ids[2]`)"
    ),
    "capability": KeySpec("string", "the capability the call needs"),
    "max_bytes": KeySpec("integer", "the upload cap in bytes (`KNOWLEDGE_MAX_UPLOAD_BYTES`)"),
    "corpus_id": KeySpec("id", "the corpus concerned"),
    "document_id": KeySpec("id", "the document concerned (several: comma-separated, at most 20)"),
    "job_id": KeySpec("id", "the ingestion job concerned"),
    "finding_id": KeySpec("id", "the import finding concerned"),
    "type_name": KeySpec("string", "the document type concerned"),
    "name": KeySpec("string", "the name that is taken"),
    "root": KeySpec("string", "the import root's name"),
    "rpc": KeySpec("string", "the RPC to call instead, as its full gRPC name"),
    "state": KeySpec("string", "the state the resource is in"),
    "page": KeySpec("integer", "the page asked for"),
    "page_count": KeySpec("integer", "how many pages there are"),
    "cursor": KeySpec("integer", "the event cursor sent"),
    "first_retained_cursor": KeySpec("integer", "the oldest event cursor still kept"),
    "document_count": KeySpec("integer", "how many documents the corpus holds"),
    "scope": KeySpec("string", "the caller's scope node"),
    "corpus_scope": KeySpec("string", "the scope node the corpus is bound to"),
    "quota": KeySpec("string", "the quota used up (`max_documents`, `max_bytes`, ...)"),
    "used": KeySpec("string", "how much of the quota or budget is used (a count, or an amount)"),
    "limit": KeySpec("string", "the quota's, budget's or queue's limit (a count, or an amount)"),
    "waiting": KeySpec("integer", "the inputs waiting in the embedder's queue"),
    "runtime": KeySpec("string", "the model runtime that is unavailable: `embedder`, `reranker` or `llm`"),
    "service": KeySpec("string", "the dependency that is starting or restarting"),
    "format": KeySpec("string", "the file format the file was read as (`pdf`, `docx`, ...)"),
    "entity_type": KeySpec("string", "the anchor's entity type"),
    "entity_id": KeySpec("string", "the anchor's entity id"),
    "column": KeySpec("integer", "where in the filter the fault is (1-based; 0: the whole filter)"),
    "corpus_key": KeySpec("string", "the corpus key concerned"),
    "document_ref": KeySpec("string", "the document reference concerned (the caller's own id for it)"),
    "principal": KeySpec("string", "the access-list entry at fault (its first 80 characters)"),
    "webhook_id": KeySpec("id", "the webhook concerned"),
    "fragment": KeySpec("string", "the passage concerned, by its fragment"),
    "feature": KeySpec("string", "the plan feature the call needs (`platform_index`, ...)"),
    "tokenizer_sha256": KeySpec("string", "the embedder's tokenizer now (internal)"),
    "model": KeySpec("string", "the embedding model concerned (its model id)"),
    "change_id": KeySpec("id", "the model change concerned"),
    "sent_tokenizer_sha256": KeySpec("string", "the tokenizer the texts were counted in (internal)"),
}


@dataclass(frozen=True, slots=True)
class ReasonSpec:
    code: str  # the gRPC status code's name
    http_status: int  # what a REST caller gets through the gateway
    meaning: str  # one sentence, for docs/api.md
    metadata: tuple[str, ...] = ()  # the keys its ErrorInfo may carry (METADATA_KEYS)
    refusal: bool = False  # one of the closed set of refusals (knowledge_runtime.refusals)


def _reason(code: str, meaning: str, *keys: str, http: int | None = None) -> ReasonSpec:
    return ReasonSpec(code, HTTP_OF_CODE[code] if http is None else http, meaning, keys)


# In groups by code; a new reason goes into its group here and into knowledge.v1.ErrorReason.
_ERRORS: dict[str, ReasonSpec] = {
    # -- the request is malformed or invalid (INVALID_ARGUMENT, 400)
    "INVALID_REQUEST": _reason(
        "INVALID_ARGUMENT",
        "a request field holds a value the service refuses (empty, too long, out of range, malformed), "
        "or a REST body is not valid JSON",
        "field",
        "document_id",
        "corpus_id",
    ),
    "UNKNOWN_FIELD": _reason(
        "INVALID_ARGUMENT",
        "the request carries a field the service does not know (REST: a JSON key; gRPC: `path#number`)",
        "field",
    ),
    "NUL_CHARACTER": _reason("INVALID_ARGUMENT", "a text field holds a NUL (0x00) character", "field"),
    "MULTIPART_MALFORMED": _reason("INVALID_ARGUMENT", "a multipart/form-data upload body is malformed", "field"),
    "PAGE_TOKEN_INVALID": _reason(
        "INVALID_ARGUMENT", "the page_token was not issued by this service: list again from the start", "field"
    ),
    "SYSTEM_CORPUS_NAME_TAKEN": _reason(
        "INVALID_ARGUMENT", "a corpus of the tenant's own has the housekeeping corpus's name", "field"
    ),
    "SCOPE_OUT_OF_REACH": _reason(
        "INVALID_ARGUMENT", "a corpus can be bound only at the caller's scope node or below it", "field"
    ),
    "DOCUMENT_NOT_IN_CORPUS": _reason(
        "INVALID_ARGUMENT", "the document is not in the corpus named with it", "field", "document_id", "corpus_id"
    ),
    "DOCUMENT_NOT_IN_SOURCE": _reason(
        "INVALID_ARGUMENT", "a document to move is not in the source corpus named", "field", "document_id"
    ),
    "NOTHING_TO_MOVE": _reason("INVALID_ARGUMENT", "a move names no document", "field"),
    "FILTER_INVALID": _reason(
        "INVALID_ARGUMENT",
        "the filter does not parse, or names a field or operator it cannot use: fix it at `column`",
        "field",
        "column",
    ),
    "METADATA_INVALID": _reason(
        "INVALID_ARGUMENT",
        "a document's metadata breaks a rule (keys, types, sizes): the key is named in `field`",
        "field",
    ),
    "ACCESS_LIST_INVALID": _reason(
        "INVALID_ARGUMENT",
        "an access-list entry is not `user:<name>` or `group:<name>` (empty name, control character, "
        "over 200 characters), or the list has over 100 entries: the entry is named in `principal`",
        "field",
        "principal",
    ),
    "PASSAGE_TOO_LARGE": _reason(
        "INVALID_ARGUMENT", "a passage is over 64 KiB of UTF-8: split it", "field", "fragment"
    ),
    "URL_REFUSED": _reason(
        "INVALID_ARGUMENT",
        "the URL will not be fetched or called (scheme, host, a private or loopback address; a webhook's: not https)",
    ),
    "URL_FETCH_FAILED": _reason("INVALID_ARGUMENT", "the page could not be fetched (no answer, an error, too slow)"),
    "PATH_REFUSED": _reason(
        "INVALID_ARGUMENT", "an import path is outside every import root, or not a regular file", "field"
    ),
    "EXTRACTION_INVALID": _reason(
        "INVALID_ARGUMENT", "the language model's extraction did not satisfy the schema", "field"
    ),
    "CHUNK_INDEXING_MOVED": _reason(
        "INVALID_ARGUMENT", "chunks are written by ingest only (internal: the embedder's Index)", "field", "rpc"
    ),
    "WRITE_STREAM_INVALID": _reason(
        "INVALID_ARGUMENT", "a WriteBlob stream is not one header followed by chunks (internal)"
    ),
    "CONTENT_HASH_MISMATCH": _reason(
        "INVALID_ARGUMENT", "a file's content does not match its content_hash and size (internal)"
    ),
    "FILE_CORRUPT": _reason("INVALID_ARGUMENT", "the file is damaged and cannot be read", "format"),
    "FILE_ENCRYPTED": _reason("INVALID_ARGUMENT", "the file is password-protected", "format"),
    "PDF_ENCRYPTED": _reason("INVALID_ARGUMENT", "the PDF is password-protected", "format"),
    "UNSUPPORTED_FORMAT": _reason("INVALID_ARGUMENT", "the file's format is not one ingest reads", "format"),
    "ARCHIVE_TOO_LARGE": _reason("INVALID_ARGUMENT", "an Office file unpacks to more than ingest will read", "format"),
    "EXTRACTION_TIMEOUT": _reason("INVALID_ARGUMENT", "reading the file took longer than allowed", "format"),
    "FILE_TOO_COMPLEX": _reason("INVALID_ARGUMENT", "reading the file needed more memory than allowed", "format"),
    "INVALID_ARGUMENT": _reason("INVALID_ARGUMENT", "the request is invalid; nothing more specific is known"),
    # -- no such resource in the caller's tenant and reach (NOT_FOUND, 404); never 403
    "CORPUS_NOT_FOUND": _reason("NOT_FOUND", "no such corpus in the caller's reach", "corpus_id"),
    "DOCUMENT_NOT_FOUND": _reason(
        "NOT_FOUND",
        "no such document in the caller's reach (its access list included)",
        "document_id",
        "document_ref",
    ),
    "INGEST_JOB_NOT_FOUND": _reason("NOT_FOUND", "no such ingestion job of the tenant's", "job_id"),
    "DOCUMENT_TYPE_NOT_FOUND": _reason("NOT_FOUND", "no such document type of the tenant's", "type_name"),
    "EXTRACTION_SCHEMA_NOT_FOUND": _reason("NOT_FOUND", "the document type has no such schema version"),
    "FINDING_NOT_FOUND": _reason("NOT_FOUND", "no such import finding", "finding_id"),
    "MODEL_CHANGE_NOT_FOUND": _reason("NOT_FOUND", "no embedding-model change (open, for this call)"),
    "EVALUATION_SET_NOT_FOUND": _reason("NOT_FOUND", "the tenant has no evaluation set of that name", "name"),
    "WEBHOOK_NOT_FOUND": _reason(
        "NOT_FOUND", "no such webhook at the caller's scope node within its clearance", "webhook_id"
    ),
    "IMPORT_ROOT_NOT_FOUND": _reason("NOT_FOUND", "no import root of that name for the tenant", "root"),
    "PATH_NOT_FOUND": _reason("NOT_FOUND", "no file at the path under the import roots"),
    "BLOB_NOT_FOUND": _reason("NOT_FOUND", "no such blob (internal)"),
    "ANCHOR_NOT_FOUND": _reason("NOT_FOUND", "no such anchor (internal)", "entity_type", "entity_id"),
    "NOT_FOUND": _reason("NOT_FOUND", "not found; nothing more specific is known"),
    # -- a duplicate (ALREADY_EXISTS, 409)
    "CORPUS_ALREADY_EXISTS": _reason("ALREADY_EXISTS", "a corpus the caller reads at its node has the name", "name"),
    "DOCUMENT_TYPE_EXISTS": _reason("ALREADY_EXISTS", "the tenant has a document type of that name", "type_name"),
    "ALREADY_EXISTS": _reason("ALREADY_EXISTS", "already exists; nothing more specific is known"),
    # -- the resource is not in a state for this (FAILED_PRECONDITION, 400)
    "CORPUS_NOT_EMPTY": _reason(
        "FAILED_PRECONDITION",
        "the corpus holds documents and delete_documents is not set",
        "corpus_id",
        "document_count",
    ),
    "INGEST_JOB_FINISHED": _reason("FAILED_PRECONDITION", "the job has already ended", "state"),
    "MODEL_CHANGE_OPEN": _reason(
        "FAILED_PRECONDITION",
        "another embedding-model change is open: finish, roll back or cancel it first",
        "change_id",
    ),
    "MODEL_CHANGE_STATE": _reason(
        "FAILED_PRECONDITION", "the model change is not in a state that allows this", "change_id", "state"
    ),
    "MODEL_NOT_LOADED": _reason(
        "FAILED_PRECONDITION",
        "the embedder does not hold that model (configure it as KNOWLEDGE_EMBEDDING_NEXT_MODEL), or its "
        "dimension does not fit the store it would fill",
        "model",
    ),
    "INGEST_JOB_SEARCHABLE": _reason("FAILED_PRECONDITION", "the job ended SEARCHABLE: there is nothing to retry"),
    "TOKENIZER_CHANGED": _reason(
        "FAILED_PRECONDITION",
        "texts were counted in another tokenizer than the embedder's now (internal: ingest cuts them again)",
        "tokenizer_sha256",
        "sent_tokenizer_sha256",
    ),
    "FINDING_DECIDED": _reason("FAILED_PRECONDITION", "the finding was already accepted or dismissed", "finding_id"),
    "DOCUMENT_HAS_NO_TEXT": _reason("FAILED_PRECONDITION", "the document has no text (its ingestion found none)"),
    "BLOB_FILE_MISSING": _reason("FAILED_PRECONDITION", "no file at the blob's storage_uri (internal)"),
    "BLOB_IN_USE": _reason("FAILED_PRECONDITION", "the blob is still referenced (internal)"),
    "FAILED_PRECONDITION": _reason("FAILED_PRECONDITION", "not possible in the current state"),
    # -- past the end of something that exists (OUT_OF_RANGE, 400)
    "PAGE_OUT_OF_RANGE": _reason("OUT_OF_RANGE", "the page is past the document's last", "page", "page_count"),
    "EVENT_CURSOR_EXPIRED": _reason(
        "OUT_OF_RANGE",
        "the cursor is older than the events kept: list again, then watch from an empty cursor",
        "cursor",
        "first_retained_cursor",
    ),
    "OUT_OF_RANGE": _reason("OUT_OF_RANGE", "past the end; nothing more specific is known"),
    # -- who is calling (UNAUTHENTICATED, 401); the gateway answers these too, with the same reasons
    "TOKEN_MISSING": _reason("UNAUTHENTICATED", "no bearer token in the `authorization` header"),
    "TOKEN_EXPIRED": _reason(
        "UNAUTHENTICATED", "the token's `exp` has passed (a stream ends with it then): call again with a fresh one"
    ),
    "TOKEN_INVALID": _reason(
        "UNAUTHENTICATED",
        "the token is malformed, badly signed, not yet valid, for another issuer or audience, "
        "or a claim has the wrong shape",
    ),
    "TENANT_UNRESOLVED": _reason("UNAUTHENTICATED", "the token names no tenant"),
    "UNAUTHENTICATED": _reason("UNAUTHENTICATED", "not authenticated; nothing more specific is known"),
    # -- not allowed (PERMISSION_DENIED, 403)
    "CORPUS_READ_ONLY": _reason(
        "PERMISSION_DENIED",
        "a write into a corpus bound above the caller's node, which it only reads",
        "corpus_id",
        "corpus_scope",
        "scope",
    ),
    "PERMISSION_DENIED": _reason("PERMISSION_DENIED", "not allowed; nothing more specific is known"),
    # -- too much (RESOURCE_EXHAUSTED)
    "UPLOAD_TOO_LARGE": _reason(
        "RESOURCE_EXHAUSTED",
        "an upload, text or request body is over the cap; nothing of it is kept",
        "max_bytes",
        http=413,
    ),
    "RATE_LIMITED": _reason(
        "RESOURCE_EXHAUSTED", "the tenant is over its request rate at the gateway: retry after `retry-after` seconds"
    ),
    "EMBEDDER_OVERLOADED": _reason("RESOURCE_EXHAUSTED", "the embedder's queue is full: back off", "waiting", "limit"),
    "CONTENT_INDEX_OVERLOADED": _reason("RESOURCE_EXHAUSTED", "the content index is overloaded: back off"),
    "SEARCH_OVERLOADED": _reason("RESOURCE_EXHAUSTED", "search is overloaded: back off (internal)"),
    "RESOURCE_EXHAUSTED": _reason("RESOURCE_EXHAUSTED", "exhausted; nothing more specific is known"),
    # -- a dependency cannot answer now (UNAVAILABLE, 503): retry with backoff
    "DEPENDENCY_UNAVAILABLE": _reason("UNAVAILABLE", "a dependency is down or restarting"),
    "EMBEDDER_UNAVAILABLE": _reason("UNAVAILABLE", "the embedder is down, unreachable or did not answer in time"),
    "CONTENT_INDEX_UNAVAILABLE": _reason(
        "UNAVAILABLE", "the content index is down, unreachable or did not answer in time"
    ),
    "SEARCH_UNAVAILABLE": _reason(
        "UNAVAILABLE", "search is down, unreachable or did not answer in time (internal: a model change's evaluation)"
    ),
    "DEPENDENCY_NOT_READY": _reason("UNAVAILABLE", "a dependency is starting or restarting", "service"),
    "EMBEDDER_STOPPING": _reason("UNAVAILABLE", "the embedder is shutting down: retry on another replica"),
    "BLOB_STORE_UNAVAILABLE": _reason("UNAVAILABLE", "content-index's object store does not answer now (internal)"),
    "UPSTREAM_UNAVAILABLE": _reason("UNAVAILABLE", "the gateway cannot reach the service (502 or 503)"),
    # -- time (DEADLINE_EXCEEDED)
    "UPSTREAM_TIMEOUT": _reason("DEADLINE_EXCEEDED", "the service did not answer within the gateway's route timeout"),
    "REQUEST_TIMEOUT": _reason(
        "DEADLINE_EXCEEDED", "the whole request (body included) did not reach the gateway in time", http=408
    ),
    # -- the API has no such call (UNIMPLEMENTED)
    "METHOD_NOT_FOUND": _reason("UNIMPLEMENTED", "no such RPC, or no such REST path", http=404),
    "METHOD_NOT_ALLOWED": _reason(
        "UNIMPLEMENTED", "a REST path asked with a method it does not have (`Allow` lists them)", http=405
    ),
    "UNIMPLEMENTED": _reason("UNIMPLEMENTED", "the RPC is in the contract but not served yet"),
    # -- the gateway refuses the request's shape before reading it
    "HEADERS_TOO_LARGE": _reason(
        "INVALID_ARGUMENT", "the request's headers together are over 8 KiB (the gateway's limit)", http=431
    ),
    # -- failures
    "CANCELLED": _reason("CANCELLED", "the call was cancelled"),
    "BLOB_CONTENT_MISSING": _reason("DATA_LOSS", "a blob's bytes are gone from storage (internal)"),
    "DATA_LOSS": _reason("DATA_LOSS", "data was lost; nothing more specific is known"),
    "INTERNAL": _reason("INTERNAL", "a bug; the message says nothing about internals"),
    "UNKNOWN": _reason("UNKNOWN", "a dependency failed without saying why"),
}

REASONS: Mapping[str, ReasonSpec] = {
    **_ERRORS,
    **{
        refusal.value: ReasonSpec(spec.code, spec.http_status, spec.meaning, spec.metadata, refusal=True)
        for refusal, spec in REFUSALS.items()
    },
}


def spec_of(reason: str) -> ReasonSpec | None:
    """The catalogue's entry of an ``ErrorInfo.reason``; None for a reason it does not have."""
    return REASONS.get(reason)


def reasons_markdown() -> str:
    """The catalogue as a Markdown table by HTTP status, then code, each code's generic reason
    last (docs/api.md's, generated)."""
    lines = ["| reason | gRPC code | HTTP | metadata | meaning |", "|---|---|---|---|---|"]

    def order(item: tuple[str, ReasonSpec]) -> tuple[int, str, bool, str]:
        reason, spec = item
        return spec.http_status, spec.code, reason == spec.code, reason

    for reason, spec in sorted(REASONS.items(), key=order):
        keys = ", ".join(f"`{key}`" for key in spec.metadata)
        meaning = spec.meaning + (" (a refusal)" if spec.refusal else "")
        lines.append(f"| `{reason}` | {spec.code} | {spec.http_status} | {keys} | {meaning} |")
    return "\n".join(lines) + "\n"


def metadata_keys_markdown() -> str:
    """The metadata keys as a Markdown table (docs/api.md's, generated)."""
    lines = ["| key | holds | meaning |", "|---|---|---|"]
    for key, spec in METADATA_KEYS.items():
        lines.append(f"| `{key}` | {spec.type} | {spec.meaning} |")
    return "\n".join(lines) + "\n"
