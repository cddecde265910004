"""Events: what other services hear about documents and corpora, and where a watch starts.

An event is decided here from what changed (``document_ended``, ``searchable``, ...) and written
by ``adapters.outbox.publish`` in the transaction of the change. A tenant's events carry the
gapless sequence 1, 2, 3, ... given by the relay once committed (a document's events in the order
of its changes); a cursor is the sequence number of the last event a consumer has, and retention
removes a prefix of the sequence.

A consumer receives only the events of corpora it could read now (:func:`delivered_to`): the
corpus's placement as the read finds it, judged by the one reach decision
(``Reader.may_read``) and the system corpora's read rule, and only those of documents whose
access list admits it (``Reader.may_read_document``; a filename or a chunk count of a document a
caller may not read is itself a leak); a skipped event still moves the stream's cursor on.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from knowledge_runtime.reach import Band, Reader, ScopePath

from knowledge_ingest.domain.documents import State
from knowledge_ingest.domain.errors import CursorExpired, InvalidRequest
from knowledge_ingest.domain.system_corpora import CorpusKind, may_read

MAX_CURSOR_CHARS = 20  # a bigint's digits


class EventType(StrEnum):
    DOCUMENT_SEARCHABLE = "document.searchable"
    DOCUMENT_FAILED = "document.failed"
    DOCUMENT_CANCELLED = "document.cancelled"
    DOCUMENT_MOVED = "document.moved"
    DOCUMENT_REMOVED = "document.removed"
    # Who may read the document changed (SetDocumentAccess, or a list given with a new version);
    # the detail carries the new list (principals).
    DOCUMENT_ACCESS_CHANGED = "document.access_changed"
    CORPUS_CREATED = "corpus.created"
    CORPUS_DELETED = "corpus.deleted"
    # A webhook failed for too long and was disabled (detail: webhook_id, reason). It names no
    # corpus: it is placed at the webhook's scope node and clearance instead.
    WEBHOOK_DISABLED = "webhook.disabled"
    # An embedding-model change moved on (detail: the change as it was then, model_change_detail).
    # It names no corpus: it is placed at the root of the operator's tenant.
    MODEL_CHANGE_STARTED = "model.change_started"
    MODEL_CHANGE_RE_EMBEDDED = "model.change_re_embedded"  # every chunk has the new model's vectors
    MODEL_CHANGE_GATED = "model.change_gated"  # swapped or held, with both figures
    MODEL_CHANGE_ROLLED_BACK = "model.change_rolled_back"
    MODEL_CHANGE_CANCELLED = "model.change_cancelled"
    MODEL_CHANGE_FINISHED = "model.change_finished"  # the old vectors dropped: no rollback any more
    # Not stored: sent on a quiet stream every heartbeat interval, with the stream's cursor, so
    # that a consumer (and every proxy between) sees the stream alive.
    HEARTBEAT = "stream.heartbeat"


@dataclass(frozen=True, slots=True)
class NewEvent:
    type: EventType
    document_id: int | None = None
    corpus_id: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)  # chunk_count, warnings, reason, from_corpus_id, webhook_id


@dataclass(frozen=True, slots=True)
class EventPlacement:
    """Where the corpus of an event sits when the event is read: its node, band and kind; and the
    access list of its document then (empty for a corpus's event)."""

    node: ScopePath
    band: Band
    kind: CorpusKind
    principals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    event_id: uuid.UUID | None  # None for a heartbeat
    type: EventType
    document_id: int | None
    corpus_id: int | None
    time: datetime.datetime
    detail: dict[str, Any]
    placement: EventPlacement | None = None  # None: no corpus to judge by (then nobody is sent it)

    @property
    def cursor(self) -> str:
        return str(self.seq)


def delivered_to(event: Event, reader: Reader, capabilities: frozenset[str]) -> bool:
    """Whether a consumer (its resolved reader and capabilities) is sent ``event``: only when it
    could read the event's corpus now, and its document, as every other read decides it. An event
    whose corpus cannot be placed is sent to no one (closed by default)."""
    placement = event.placement
    if placement is None:
        return False
    return (
        reader.may_read(placement.node, placement.band)
        and may_read(placement.kind, capabilities)
        and reader.may_read_document(placement.principals)
    )


def ends_with_event(state: State) -> bool:
    """Whether a document that follows its job into ``state`` has an event (``document_ended``
    decides: one rule)."""
    return document_ended(state, 0, 0, None) is not None


def document_ended(state: State, document_id: int, corpus_id: int, error: str | None) -> NewEvent | None:
    """The event of a document whose job ended FAILED or CANCELLED; None for other states."""
    if state is State.FAILED:
        return NewEvent(EventType.DOCUMENT_FAILED, document_id, corpus_id, {"reason": error or ""})
    if state is State.CANCELLED:
        return NewEvent(EventType.DOCUMENT_CANCELLED, document_id, corpus_id)
    return None


def searchable(document_id: int, corpus_id: int, chunk_count: int, warnings: tuple[str, ...]) -> NewEvent:
    return NewEvent(
        EventType.DOCUMENT_SEARCHABLE,
        document_id,
        corpus_id,
        {"chunk_count": chunk_count, "warnings": list(warnings)},
    )


def moved(document_id: int, from_corpus_id: int, to_corpus_id: int) -> NewEvent | None:
    """None when the document was already in the target corpus (nothing changed)."""
    if from_corpus_id == to_corpus_id:
        return None
    return NewEvent(EventType.DOCUMENT_MOVED, document_id, to_corpus_id, {"from_corpus_id": from_corpus_id})


def removed(document_id: int, corpus_id: int, chunk_count: int) -> NewEvent:
    return NewEvent(EventType.DOCUMENT_REMOVED, document_id, corpus_id, {"chunk_count": chunk_count})


def access_changed(document_id: int, corpus_id: int, old: tuple[str, ...], new: tuple[str, ...]) -> NewEvent | None:
    """The event of a document whose access list became ``new`` (both lists as stored: checked,
    sorted); None when it was ``new`` already (nothing changed)."""
    if old == new:
        return None
    return NewEvent(EventType.DOCUMENT_ACCESS_CHANGED, document_id, corpus_id, {"principals": list(new)})


def corpus_created(corpus_id: int) -> NewEvent:
    return NewEvent(EventType.CORPUS_CREATED, None, corpus_id)


def corpus_deleted(corpus_id: int, document_count: int) -> NewEvent:
    return NewEvent(EventType.CORPUS_DELETED, None, corpus_id, {"document_count": document_count})


def parse_cursor(after: str) -> int | None:
    """A cursor as issued (the digits of a sequence number); empty: from the oldest retained event."""
    if after == "":
        return None
    if len(after) > MAX_CURSOR_CHARS or not after.isascii() or not after.isdigit() or after != str(int(after)):
        raise InvalidRequest("after must be a cursor this service issued (an event's `cursor`)", field="after")
    return int(after)


def start_after(after: int | None, first_retained: int, head: int) -> int:
    """The sequence number a watch reads after: ``after`` itself while the events following it are
    all retained; an empty cursor starts before the oldest retained event. ``first_retained`` is
    the oldest retained sequence number (``head + 1`` when none is retained)."""
    if after is None:
        return first_retained - 1
    if after > head:
        # The newest cursor is the tenant's, counting events of corpora the caller may not read:
        # naming it would tell the caller how much happens beyond its reach.
        raise InvalidRequest(
            f"cursor {after} is ahead of the newest event: resume from a cursor this stream sent, or from an empty one",
            field="after",
        )
    if after + 1 < first_retained:
        raise CursorExpired(after, first_retained)
    return after
