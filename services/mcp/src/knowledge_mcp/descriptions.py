"""Every description a model reads: the server's instructions, each tool's, each argument's and
the prompt's, in one file so that they are reviewed together.

Written for small local models: short sentences, when to use the tool and when not, what to do
with the answer. Each tool's result is plain text beside its structured content; a result marked
as an error starts with "Hint:" (fix the call as it says) or "Error" (tell the user).
"""

from __future__ import annotations

SERVER = "knowledge"
INSTRUCTIONS = (
    "Tools over the user's organisation's documents. Start with search_documents. "
    "Cite sources by their document_id. When a result says Relevance: LOW, the documents do not "
    "hold the answer: say so and do not search again with other words. A result starting with "
    "'Hint:' tells you which call to make instead; one starting with 'Error' is for the user."
)

TOOLS = {
    "search_documents": (
        "Search the user's documents and get the best passages in full, with a relevance banner "
        "and a short synthesis. Use it first for any question about the documents. If the banner "
        "says LOW, the answer is not in the documents: stop and say so, do not search again with "
        "other words. Cite each fact by its document_id."
    ),
    "get_document_text": (
        "Read one document's full text, one page of about 25,000 characters at a time. Use it when "
        "a search result is not enough and you need the whole document. The result says which call "
        "reads the next page. Do not use it to find documents: search_documents does that."
    ),
    "list_corpora": (
        "List the document collections (corpora) you can read, with their corpus_id and size. Use "
        "it to find a corpus_id. Do not use it to answer questions about document content."
    ),
    "create_corpus": (
        "Create a new, empty document collection (corpus). Use it only when the user asks for a "
        "new collection. If one with that name exists, the answer gives its corpus_id instead."
    ),
    "move_documents": (
        "Move documents into another corpus: listed document_ids, or all documents of a source "
        "corpus. Use it only when the user asks to move or reorganise documents."
    ),
    "classify_document": (
        "Tell which type a document is (an invoice, a contract...) from the organisation's "
        "document types, with a confidence. Use it when asked what kind of document something is."
    ),
    "extract_document": (
        "Pull structured values out of a document, each with the quote it was read from; with "
        "schema_name, the fields of that document type, without it the document's tables. Use it "
        "when asked for specific fields or tables of one document."
    ),
    "process_document": (
        "Classify a document and extract its fields in one step, and keep the result. Use it when "
        "asked to process or file a document; for one type or one field, the other tools are cheaper."
    ),
    "index_content": (
        "Add text so that it can be found. kind=chunks: the text becomes a document of a corpus "
        "(corpus_id), or the new content of a document (document_id); the answer says when it is "
        "searchable. kind=anchor: one description vector of an entity (entity_type, entity_id), "
        "written only for a platform service's token. Do not use it to search."
    ),
    "refresh_anchor": (
        "Replace the description of an existing anchor (entity_type, entity_id). Only a platform "
        "service's token may. Use index_content with kind=anchor to create one."
    ),
    "get_context": (
        "Get grounded context for a question: facts, each with its support level and the evidence "
        "it rests on, and one rendered block to give a model. Use it to prepare an answer with "
        "provenance; for passages to read, search_documents is better."
    ),
    "prefetch_context": (
        "Suggested background for a chat turn from the organisation's notes (operational patterns, "
        "the user's habits, the data catalogue), within a short deadline. Use it once per user "
        "message, before answering; it may be empty. Not a search of the documents."
    ),
}

ARGUMENTS = {
    "query": "What to look for, in the user's words; one question or topic.",
    "corpus_id": "Only this corpus (an id from list_corpora); leave empty for every corpus you can read.",
    "document_id": 'The document\'s id, as a search result or a listing gives it (digits, e.g. "12").',
    "search_document_id": "Only this document; leave empty for every document.",
    "top_k": "How many passages to return.",
    "mode": "hybrid (default: meaning and words), vector (meaning only) or lexical (exact words only).",
    "filter": (
        'Only documents whose metadata match, e.g. metadata.year >= 2024 AND metadata.team = "ops". '
        "Leave empty for no filter."
    ),
    "page": "Which page, from 1. The result says how many pages there are.",
    "name": "The new corpus's name, 1 to 200 characters.",
    "description": "What the corpus holds, for people; may be empty.",
    "target_corpus_id": "The corpus that receives the documents.",
    "document_ids": "The documents to move; leave empty when all_documents is true.",
    "source_corpus_id": "With all_documents: the corpus whose documents all move.",
    "all_documents": "Move every document of source_corpus_id.",
    "schema_name": "The document type whose fields to extract; empty for the document's tables.",
    "schema_version": "That type's schema version; 0 for the newest.",
    "kind": "chunks (a document's text) or anchor (an entity's description vector).",
    "content": "The text to index.",
    "title": "kind=chunks, a new document: its title.",
    "index_corpus_id": "kind=chunks: the corpus a new document goes into.",
    "index_document_id": "kind=chunks: an existing document whose content this text replaces.",
    "entity_type": "kind=anchor: the entity's type, lowercase (e.g. tool, kit).",
    "entity_id": "kind=anchor: the entity's id within its type.",
    "context_top_k": "How many passages to use as evidence.",
    "user_message": "The user's message for this chat turn, as written.",
}

PROMPT_CONTEXT = (
    "One paragraph about the organisation's knowledge (documents and corpora) for a system "
    "prompt, so that the model knows to call search_documents."
)
