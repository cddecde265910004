"""What document AI refuses, as the shared domain errors with this context's reasons."""

from __future__ import annotations

from knowledge_runtime.errors import AlreadyExists, DocumentNotFound, FailedPrecondition, InvalidField, NotFound

__all__ = [
    "DocumentHasNoText",
    "DocumentNotFound",
    "ExtractionInvalid",
    "InvalidRequest",
    "SchemaNotFound",
    "TaxonomyInvalid",
    "TypeExists",
    "TypeNotFound",
]


class TaxonomyInvalid(InvalidField):
    """A document type or an extraction schema a caller sent is not acceptable."""


class ExtractionInvalid(InvalidField):
    """A model's extraction does not satisfy the schema it was asked to fill."""

    reason = "EXTRACTION_INVALID"


class TypeExists(AlreadyExists):
    reason = "DOCUMENT_TYPE_EXISTS"

    def __init__(self, name: str) -> None:
        super().__init__(f"the tenant already has a document type named {name!r}", metadata={"type_name": name})


class TypeNotFound(NotFound):
    reason = "DOCUMENT_TYPE_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__("document type not found", metadata={"type_name": name[:64]})


class SchemaNotFound(NotFound):
    reason = "EXTRACTION_SCHEMA_NOT_FOUND"

    def __init__(self, name: str, version: int) -> None:
        what = f"version {version} of the schema" if version else "an extraction schema"
        super().__init__(f"document type {name[:64]!r} has no {what}")


class DocumentHasNoText(FailedPrecondition):
    reason = "DOCUMENT_HAS_NO_TEXT"

    def __init__(self) -> None:
        super().__init__("the document has no text to read (its ingestion failed or found none)")


class InvalidRequest(InvalidField):
    """A request field document AI refuses (INVALID_REQUEST, as in every service)."""
