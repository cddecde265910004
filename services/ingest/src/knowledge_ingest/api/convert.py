"""Domain values to and from knowledge.v1 messages."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp
from knowledge.v1 import ingest_pb2

from knowledge_ingest.domain.model import Corpus


def timestamp(value) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def corpus_message(corpus: Corpus) -> ingest_pb2.Corpus:
    return ingest_pb2.Corpus(
        corpus_id=str(corpus.corpus_id),
        name=corpus.name,
        description=corpus.description,
        document_count=corpus.document_count,
        chunk_count=corpus.chunk_count,
        create_time=timestamp(corpus.create_time),
    )
