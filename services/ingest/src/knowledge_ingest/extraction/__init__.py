"""Text extraction: the ``Extractor`` port's adapter (see ``knowledge_ingest.domain.extraction``)."""

from knowledge_ingest.extraction.extractor import DocumentExtractor
from knowledge_ingest.extraction.isolated import IsolatedExtractor

__all__ = ["DocumentExtractor", "IsolatedExtractor"]
