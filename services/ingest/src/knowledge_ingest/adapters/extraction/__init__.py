"""Text extraction: the ``Extractor`` port's adapter (see ``knowledge_ingest.domain.extraction``)."""

from knowledge_ingest.adapters.extraction.extractor import DocumentExtractor

__all__ = ["DocumentExtractor"]
