"""What the OpenAPI description states beyond the protos: each request field's constraints (the
limits the services enforce, from their domains) and the messages' cross-field rules."""

from __future__ import annotations

from knowledge_documents_ai.domain.limits import (
    MAX_DESCRIPTION_CHARS,
    MAX_EXAMPLE_CHARS,
    MAX_EXAMPLES,
    MAX_NAME_CHARS,
    MAX_SCHEMA_CHARS,
    TYPE_NAME_PATTERN,
    UNCLASSIFIED,
)
from knowledge_ingest.domain.passages import MAX_FRAGMENT_CHARS, MAX_PASSAGE_BYTES, MAX_PASSAGES, MAX_REFERENCE_CHARS
from knowledge_ingest.domain.passages import MAX_TITLE_CHARS as MAX_PASSAGE_TITLE_CHARS
from knowledge_ingest.domain.quotas import MAX_LLM_BUDGET
from knowledge_runtime.corpus_keys import CORPUS_KEY_PATTERN
from knowledge_runtime.filters import MAX_FILTER_CHARS
from knowledge_runtime.pagination import PAGE_TOKEN_PATTERN
from knowledge_runtime.reach import MAX_PRINCIPAL_CHARS, MAX_PRINCIPALS, PRINCIPAL_PATTERN, SCOPE_PATH_PATTERN, Band
from knowledge_runtime.tenancy import FEATURE_PATTERN, MAX_FEATURES, PERIOD_PATTERN
from knowledge_search.domain.conversation import MAX_TURN_CHARS, MAX_TURNS

# Request constraints the protos state in words (their comments), as JSON Schema; a test checks
# that every entry names a real field. Responses are described as the transcoder prints them.
# The characters Python's str.strip() removes (str.isspace), which the services strip before
# checking that a value is not blank: JSON Schema's \s differs (e.g. \x1c-\x1f).
_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
# Every text field of a request refuses NUL (the services' request check, NUL_CHARACTER).
NO_NUL = "^[^\\x00]*$"
_NON_BLANK = {"minLength": 1, "pattern": f"^[^\\x00]*[^{_SPACE}\\x00][^\\x00]*$"}
_CONTROL = "\\x00-\\x1f\\x7f-\\x9f"  # what the services refuse in a name (Unicode category Cc)
_PAGE_TOKEN = {
    "pattern": PAGE_TOKEN_PATTERN,
    "description": "Opaque token from a previous response's "
    "next_page_token; empty for the first page. Any other value is 400 PAGE_TOKEN_INVALID.",
}
# Search's query: not blank, no NUL, at most 100,000 characters (knowledge_search.domain.model).
_QUERY = {**_NON_BLANK, "maxLength": 100_000}
_TENANT = {"minLength": 1, "maxLength": 200, "pattern": f"^[^{_CONTROL}]*[^{_SPACE}{_CONTROL}][^{_CONTROL}]*$"}
_COUNT = {"pattern": "^[0-9]+$", "maxLength": 18}  # an int64 travels as a string; a quota is never negative
_NO_CONTROL = f"^[^{_CONTROL}]*$"
_CORPUS_KEY = {"pattern": f"^$|{CORPUS_KEY_PATTERN}"}  # empty: named by id instead
_REFERENCE = {"minLength": 1, "maxLength": MAX_REFERENCE_CHARS, "pattern": _NO_CONTROL}
# The requests that take a filter and may name their corpus by key; those of PassageService.
_FILTERED = ("SearchRequest", "QueryRequest", "SearchDocumentsRequest", "GetContextRequest", "ListDocumentsRequest")
_PASSAGE_CALLS = ("IndexPassagesRequest", "RemoveByReferenceRequest", "CheckIndexingRequest")
_FEATURES = {"maxItems": MAX_FEATURES, "items": {"type": "string", "pattern": FEATURE_PATTERN}}
# An access list: "user:<sub>" or "group:<name>" entries (knowledge_runtime.reach.access_list).
_PRINCIPALS = {
    "maxItems": MAX_PRINCIPALS,
    "items": {"type": "string", "pattern": PRINCIPAL_PATTERN, "maxLength": MAX_PRINCIPAL_CHARS},
}
# A conversation's earlier turn (knowledge_search.domain.conversation).
_TURN_TEXT = {**_NON_BLANK, "maxLength": MAX_TURN_CHARS}
REQUEST_CONSTRAINTS: dict[str, dict] = {
    "knowledge.v1.Turn.role": {"enum": ["TURN_ROLE_USER", "TURN_ROLE_ASSISTANT"]},
    "knowledge.v1.Turn.text": _TURN_TEXT,
    "knowledge.v1.QueryRequest.history": {"maxItems": MAX_TURNS},
    "knowledge.v1.SearchDocumentsRequest.history": {"maxItems": MAX_TURNS},
    "knowledge.v1.CreateCorpusRequest.default_principals": _PRINCIPALS,
    "knowledge.v1.SetCorpusDefaultAccessRequest.default_principals": _PRINCIPALS,
    "knowledge.v1.SetDocumentAccessRequest.principals": _PRINCIPALS,
    "knowledge.v1.CreateCorpusRequest.name": {
        "minLength": 1,
        "maxLength": 200,
        "pattern": f"^[^{_CONTROL}]*[^{_SPACE}{_CONTROL}][^{_CONTROL}]*$",
    },
    "knowledge.v1.CreateCorpusRequest.description": {"maxLength": 2000},
    "knowledge.v1.ListCorporaRequest.page_size": {"minimum": 0},
    "knowledge.v1.ListCorporaRequest.page_token": _PAGE_TOKEN,
    "knowledge.v1.ListDocumentsRequest.page_size": {"minimum": 0},
    "knowledge.v1.ListDocumentsRequest.page_token": _PAGE_TOKEN,
    "knowledge.v1.MoveDocumentsRequest.target_corpus_id": {"minLength": 1},
    "knowledge.v1.GetDocumentTextRequest.page": {"minimum": 0},
    "knowledge.v1.MoveDocumentsRequest.document_ids": {"maxItems": 1000},
    "knowledge.v1.BatchGetDocumentsRequest.document_ids": {"minItems": 1, "maxItems": 100},
    "knowledge.v1.IngestTextRequest.text": _NON_BLANK,
    "knowledge.v1.BatchIngestTextsRequest.items": {"minItems": 1, "maxItems": 1000},
    "knowledge.v1.IngestTextRequest.title": {"maxLength": 1000},
    "knowledge.v1.IngestUrlRequest.url": {**_NON_BLANK, "maxLength": 2048},
    "knowledge.v1.IngestUrlRequest.corpus_id": _NON_BLANK,
    "knowledge.v1.SearchRequest.query": _QUERY,
    "knowledge.v1.SearchRequest.top_k": {"minimum": 0},
    "knowledge.v1.QueryRequest.query": _QUERY,
    "knowledge.v1.QueryRequest.top_k": {"minimum": 0},
    "knowledge.v1.SearchDocumentsRequest.query": _QUERY,
    "knowledge.v1.SearchDocumentsRequest.top_k": {"minimum": 0},
    "knowledge.v1.GetContextRequest.query": _QUERY,
    "knowledge.v1.GetContextRequest.top_k": {"minimum": 0},
    "knowledge.v1.PrefetchContextRequest.user_message": _QUERY,
    "knowledge.v1.ChannelWeights.vector": {"minimum": 0},
    "knowledge.v1.ChannelWeights.lexical": {"minimum": 0},
    # a band by its exact name (empty: TENANT); a scope node path (runtime/reach.py)
    "knowledge.v1.CreateCorpusRequest.confidentiality": {"enum": ["", *(band.value for band in Band)]},
    "knowledge.v1.BindCorpusRequest.scope": {"pattern": SCOPE_PATH_PATTERN},
    # tenant settings and usage (knowledge_ingest.domain.quotas, knowledge_runtime.tenancy)
    "knowledge.v1.GetTenantSettingsRequest.tenant": _TENANT,
    "knowledge.v1.UpdateTenantSettingsRequest.tenant": _TENANT,
    "knowledge.v1.TenantQuotas.max_documents": _COUNT,
    "knowledge.v1.TenantQuotas.max_bytes": _COUNT,
    "knowledge.v1.TenantQuotas.max_chunks": _COUNT,
    "knowledge.v1.TenantQuotas.max_embedding_tokens_per_month": _COUNT,
    "knowledge.v1.TenantQuotas.max_llm_cost_per_month": {"minimum": 0, "maximum": MAX_LLM_BUDGET},
    "knowledge.v1.GetUsageRequest.period": {"pattern": PERIOD_PATTERN},
    # the taxonomy (knowledge_documents_ai.domain.limits) and the document-AI calls
    "knowledge.v1.CreateDocumentTypeRequest.name": {
        "pattern": TYPE_NAME_PATTERN,
        "maxLength": MAX_NAME_CHARS,
        "not": {"enum": [UNCLASSIFIED]},
    },
    "knowledge.v1.CreateDocumentTypeRequest.description": {**_NON_BLANK, "maxLength": MAX_DESCRIPTION_CHARS},
    "knowledge.v1.CreateDocumentTypeRequest.examples": {
        "maxItems": MAX_EXAMPLES,
        "items": {"type": "string", "pattern": NO_NUL, "maxLength": MAX_EXAMPLE_CHARS},
    },
    "knowledge.v1.CreateDocumentTypeRequest.reason": {"maxLength": MAX_DESCRIPTION_CHARS},
    "knowledge.v1.CreateExtractionSchemaRequest.json_schema": {**_NON_BLANK, "maxLength": MAX_SCHEMA_CHARS},
    "knowledge.v1.ListDocumentTypesRequest.page_size": {"minimum": 0},
    "knowledge.v1.ListDocumentTypesRequest.page_token": _PAGE_TOKEN,
    "knowledge.v1.ListProcessingResultsRequest.page_size": {"minimum": 0},
    "knowledge.v1.ListProcessingResultsRequest.page_token": _PAGE_TOKEN,
    # Over REST the path names the document; a text is classified over gRPC only.
    "knowledge.v1.ClassifyDocumentRequest.text": {"maxLength": 0},
    "knowledge.v1.ExtractDocumentRequest.schema_version": {"minimum": 0},
    # filters (knowledge_runtime.filters: a language, its grammar in words), keys, passages
    **{f"knowledge.v1.{m}.filter": {"maxLength": MAX_FILTER_CHARS} for m in _FILTERED},
    **{f"knowledge.v1.{m}.corpus_key": _CORPUS_KEY for m in (*_FILTERED, *_PASSAGE_CALLS)},
    "knowledge.v1.CreateCorpusRequest.key": _CORPUS_KEY,
    "knowledge.v1.IndexPassagesRequest.content_sha256": {"pattern": "^[0-9a-fA-F]{64}$"},
    "knowledge.v1.IndexPassagesRequest.document_ref": _REFERENCE,
    "knowledge.v1.RemoveByReferenceRequest.document_ref": _REFERENCE,
    "knowledge.v1.CheckIndexingRequest.document_ref": {"maxLength": MAX_REFERENCE_CHARS, "pattern": _NO_CONTROL},
    "knowledge.v1.IndexPassagesRequest.title": {"maxLength": MAX_PASSAGE_TITLE_CHARS},
    "knowledge.v1.IndexPassagesRequest.passages": {"minItems": 1, "maxItems": MAX_PASSAGES},
    "knowledge.v1.IndexPassagesRequest.confidentiality": {"enum": ["", *(band.value for band in Band)]},
    "knowledge.v1.Passage.fragment": {"minLength": 1, "maxLength": MAX_FRAGMENT_CHARS, "pattern": NO_NUL},
    "knowledge.v1.Passage.text": {**_NON_BLANK, "maxLength": MAX_PASSAGE_BYTES},  # bytes of UTF-8: in words
    "knowledge.v1.CheckIndexingRequest.bytes": _COUNT,
    "knowledge.v1.CheckIndexingRequest.passages": {"minimum": 0, "maximum": MAX_PASSAGES},
    "knowledge.v1.UpdateTenantSettingsRequest.features": _FEATURES,
}
# A corpus named by id or by key, not both (an empty string is "not given").
_NAMED = {"corpus_id": {"minLength": 1}, "corpus_key": {"minLength": 1}}
_ONE_CORPUS = {"not": {"type": "object", "required": ["corpus_id", "corpus_key"], "properties": _NAMED}}
# An index names its corpus one way or the other (an unknown key creates it).
_ONE_WAY = {**_ONE_CORPUS, "anyOf": [{"required": [n], "properties": {n: _NAMED[n]}} for n in _NAMED]}
# An ordinary text names no housekeeping corpus and no subject (system_corpus and
# about_subject go alone, need system.write, and never in a batch; described in words only).
_NOT_HOUSEKEEPING = {"system_corpus": {"maxLength": 0}, "about_subject": {"maxLength": 0}}
# Rules across a request message's fields, as JSON Schema merged into its input schema.
MESSAGE_CONSTRAINTS: dict[str, dict] = {
    # A new document's corpus, or the document whose content the text becomes (IngestText refuses
    # neither; in a batch, such an item refuses the whole batch).
    "knowledge.v1.IngestTextRequest": {
        "anyOf": [
            {"required": ["corpus_id"], "properties": {"corpus_id": _NON_BLANK, **_NOT_HOUSEKEEPING}},
            {"required": ["document_id"], "properties": {"document_id": _NON_BLANK, **_NOT_HOUSEKEEPING}},
        ]
    },
    **{f"knowledge.v1.{m}": _ONE_CORPUS for m in (*_FILTERED[:4], *_PASSAGE_CALLS[1:])},
    "knowledge.v1.IndexPassagesRequest": _ONE_WAY,
    # Either weight may be 0, not both (search refuses that with INVALID_REQUEST).
    "knowledge.v1.ChannelWeights": {
        "not": {
            "type": "object",
            "required": ["vector", "lexical"],
            "properties": {"vector": {"enum": [0]}, "lexical": {"enum": [0]}},
        }
    },
}
REQUIRED_INPUT = {
    "knowledge.v1.CreateCorpusRequest": ["name"],
    "knowledge.v1.SearchRequest": ["query"],
    "knowledge.v1.QueryRequest": ["query"],
    "knowledge.v1.Turn": ["role", "text"],
    "knowledge.v1.SearchDocumentsRequest": ["query"],
    "knowledge.v1.GetContextRequest": ["query"],
    "knowledge.v1.PrefetchContextRequest": ["user_message"],
    "knowledge.v1.IngestTextRequest": ["text"],
    "knowledge.v1.BatchIngestTextsRequest": ["items"],
    "knowledge.v1.IngestUrlRequest": ["url", "corpus_id"],
    "knowledge.v1.MoveDocumentsRequest": ["target_corpus_id"],
    "knowledge.v1.BindCorpusRequest": ["scope"],
    # A PUT is the whole of a tenant's settings: whether it is enabled must be said.
    "knowledge.v1.UpdateTenantSettingsRequest": ["enabled"],
    "knowledge.v1.BatchGetDocumentsRequest": ["document_ids"],  # a query parameter
    "knowledge.v1.CreateDocumentTypeRequest": ["name", "description"],
    "knowledge.v1.CreateExtractionSchemaRequest": ["json_schema"],
    "knowledge.v1.IndexPassagesRequest": ["document_ref", "content_sha256", "passages"],
    "knowledge.v1.RemoveByReferenceRequest": ["document_ref"],
    "knowledge.v1.Passage": ["fragment", "text"],
}
