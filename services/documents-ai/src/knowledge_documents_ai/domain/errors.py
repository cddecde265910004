"""What document AI refuses, as the shared domain errors with this context's reasons."""

from __future__ import annotations

from knowledge_runtime.errors import InvalidField


class TaxonomyInvalid(InvalidField):
    """A document type or an extraction schema a caller sent is not acceptable."""

    reason = "TAXONOMY_INVALID"


class ExtractionInvalid(InvalidField):
    """A model's extraction does not satisfy the schema it was asked to fill."""

    reason = "EXTRACTION_INVALID"
