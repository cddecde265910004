"""The live document list's pure rules (what a watcher is told) and BatchGetDocuments' answer."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from knowledge_ingest.domain.documents import Document, State
from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.watch import MAX_BATCH_GET, ChangeKind, batch_answer, batch_ids, change_of

NOW = datetime.now(UTC)
DOC = Document(
    document_id=7,
    corpus_id=1,
    filename="a.txt",
    state=State.EMBEDDING,
    error=None,
    chunk_count=0,
    size_bytes=10,
    mime_type="text/plain",
    extractable=None,
    source_url=None,
    job_id=None,
    create_time=NOW,
    update_time=NOW,
    stage="embedding 2/8",
    progress=0.375,
)


def test_a_new_or_changed_document_is_sent_as_it_is_now():
    added = change_of(1, 7, DOC, None)
    assert added.kind is ChangeKind.CHANGED and added.document is DOC and added.document_id == 7
    further = replace(DOC, stage="embedding 4/8", progress=0.55)
    assert change_of(1, 7, further, DOC).document is further
    done = replace(DOC, state=State.SEARCHABLE, stage="searchable", progress=1.0, chunk_count=8)
    assert change_of(1, 7, done, further).document.state is State.SEARCHABLE


def test_an_announcement_that_changes_nothing_shown_sends_nothing():
    assert change_of(1, 7, DOC, DOC) is None  # a repeat (two triggers of one commit, or the snapshot's race)
    assert change_of(1, 7, None, None) is None  # a document the watcher never showed is gone
    assert change_of(1, 7, replace(DOC, corpus_id=2), None) is None  # another corpus's, never shown here


def test_a_document_deleted_or_moved_out_is_removed():
    deleted = change_of(1, 7, None, DOC)
    assert deleted.kind is ChangeKind.REMOVED and deleted.document_id == 7 and deleted.document is None
    moved = change_of(1, 7, replace(DOC, corpus_id=2), DOC)
    assert moved.kind is ChangeKind.REMOVED
    moved_in = change_of(2, 7, replace(DOC, corpus_id=2), None)
    assert moved_in.kind is ChangeKind.CHANGED


def test_batch_ids_keep_the_order_once_each_and_spell_no_id_as_not_found():
    asked = batch_ids(["9", "3", "9", "x", "01", "3"])
    assert asked == {"9": 9, "3": 3, "x": None, "01": None}
    found = [replace(DOC, document_id=3), replace(DOC, document_id=9)]  # the store's order is not the answer's
    documents, missing = batch_answer(asked, found)
    assert [d.document_id for d in documents] == [9, 3] and missing == ["x", "01"]
    documents, missing = batch_answer(asked, found[:1])
    assert [d.document_id for d in documents] == [3] and missing == ["9", "x", "01"]


@pytest.mark.parametrize("ids", [[], [str(n) for n in range(1, MAX_BATCH_GET + 2)]])
def test_batch_ids_need_one_to_a_hundred(ids):
    with pytest.raises(InvalidRequest) as caught:
        batch_ids(ids)
    assert caught.value.metadata["field"] == "document_ids"
    assert len(batch_ids([str(n) for n in range(1, MAX_BATCH_GET + 1)])) == MAX_BATCH_GET
