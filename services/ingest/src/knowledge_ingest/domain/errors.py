"""Ingest's domain errors; each declares its status code through its runtime base class."""

from __future__ import annotations

from knowledge_runtime.errors import AlreadyExists, InvalidArgument


class InvalidCorpus(InvalidArgument):
    reason = "CORPUS_INVALID"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, metadata={"field": field})


class CorpusNameTaken(AlreadyExists):
    reason = "CORPUS_ALREADY_EXISTS"

    def __init__(self, name: str) -> None:
        super().__init__("a corpus with this name already exists", metadata={"name": name[:200]})

