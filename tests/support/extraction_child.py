"""Run in a child of ingest's extraction fork server: what the child inherited from it."""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection


def report_preloaded(sender: Connection) -> None:
    """Sends whether the optional unstructured path was already loaded (spaCy imported, the
    partitioners found) when the child started, before it reads any file."""
    from knowledge_ingest.extraction import unstructured_path

    loaded = unstructured_path.partitioners.cache_info().currsize == 1
    sender.send({"spacy": "spacy" in sys.modules, "partitioners": loaded})
    sender.close()
