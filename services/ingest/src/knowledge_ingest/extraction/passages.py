"""The ``passages`` format: a passages job's blob (``domain.passages.encode``) read back as the
passages it holds, as given: no detection, no markup, no chunking. Read in process, not in the
isolated child: the blob is JSON ingest wrote itself from a request it had checked, so there is
no parser to contain (as with small texts)."""

from __future__ import annotations

import os
from pathlib import Path

from knowledge_ingest.domain.extraction import ExtractionFailed, Source
from knowledge_ingest.domain.passages import PASSAGES_FORMAT, PassageSet, decode

READER = "passages"  # what the document's extractor says read it


def read_passages(source: Source) -> PassageSet:
    data = source if isinstance(source, bytes) else Path(os.fspath(source)).read_bytes()
    try:
        return decode(data)
    except (ValueError, KeyError, TypeError):
        raise ExtractionFailed(
            "the stored passages cannot be read; index them again",
            reason=ExtractionFailed.FILE_CORRUPT,
            file_format=PASSAGES_FORMAT,
        ) from None
