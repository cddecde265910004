"""The writing tools: index_content (a document's chunks, or an entity's anchor) and refresh_anchor.

Chunks go through ingest's IngestText, the only writer of chunks (the embedder refuses chunk
indexing): a new document of a corpus, or the new content of a document, as a durable job that
this tool waits for a while so that the model learns whether it is searchable. Anchors go to the
embedder's Index and RefreshAnchor with the caller's token, which the embedder admits only with
the internal `embed` capability of a platform service's token; a user's token is refused there
(CAPABILITY_MISSING), as on any other path.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Literal

from knowledge.v1 import ingest_pb2
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.api.outputs import AnchorOutput, IndexOutput, state_name
from knowledge_mcp.api.runner import Runner
from knowledge_mcp.descriptions import ARGUMENTS, TOOLS
from knowledge_mcp.domain.contract import Hint, Ok, call

POLL_S = 0.25
ENDED = frozenset(
    {ingest_pb2.DOCUMENT_STATE_SEARCHABLE, ingest_pb2.DOCUMENT_STATE_FAILED, ingest_pb2.DOCUMENT_STATE_CANCELLED}
)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
EntityType = Annotated[str, Field(description=ARGUMENTS["entity_type"], max_length=64)]
EntityId = Annotated[str, Field(description=ARGUMENTS["entity_id"], max_length=256)]


async def _until_ended(services: Services, job_id: str, wait_s: float) -> ingest_pb2.IngestJob:
    """The job once it ended, or as it is when ``wait_s`` has passed."""
    deadline = time.monotonic() + wait_s
    while True:
        job = await services.job(job_id)
        if job.state in ENDED or time.monotonic() >= deadline:
            return job
        await asyncio.sleep(POLL_S)


def register(server: MCPServer, runner: Runner, services: Services, *, index_wait_s: float) -> None:
    @server.tool(name="index_content", description=TOOLS["index_content"], annotations=WRITES)
    async def index_content(
        ctx: Context,
        kind: Annotated[Literal["chunks", "anchor"], Field(description=ARGUMENTS["kind"])],
        content: Annotated[str, Field(description=ARGUMENTS["content"], min_length=1)],
        corpus_id: Annotated[str, Field(description=ARGUMENTS["index_corpus_id"])] = "",
        document_id: Annotated[str, Field(description=ARGUMENTS["index_document_id"])] = "",
        title: Annotated[str, Field(description=ARGUMENTS["title"], max_length=1000)] = "",
        entity_type: EntityType = "",
        entity_id: EntityId = "",
    ) -> Annotated[CallToolResult, IndexOutput]:
        async def chunks() -> Ok | Hint:
            if not corpus_id.strip() and not document_id.strip():
                return Hint(
                    "kind=chunks needs corpus_id (a new document) or document_id (new content for it).",
                    f"Find a corpus_id with {call('list_corpora')}, then call index_content again.",
                )
            request = ingest_pb2.IngestTextRequest(
                corpus_id=corpus_id.strip(), document_id=document_id.strip(), text=content, title=title
            )
            accepted = await services.ingest_text(request)
            job = await _until_ended(services, accepted.job_id, index_wait_s)
            result = job.result
            out = IndexOutput(
                kind="chunks",
                state=state_name(job.state),
                job_id=accepted.job_id,
                document_id=result.document_id or document_id.strip(),
                corpus_id=accepted.corpus_id,
                chunk_count=result.chunk_count,
                message=job.error or result.message,
            )
            if job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE:
                text = f"Indexed: document {out.document_id} is searchable ({out.chunk_count} chunks)."
            elif job.state in ENDED:
                text = f"Indexing ended {out.state}: {out.message}"
            else:
                text = f"Still indexing (job {out.job_id}, {job.stage}); it will be searchable when it ends."
            return Ok(text, out.model_dump(mode="json"))

        async def anchor() -> Ok | Hint:
            if not entity_type.strip() or not entity_id.strip():
                return Hint(
                    "kind=anchor needs entity_type and entity_id.",
                    call("index_content", kind="anchor", entity_type="tool", entity_id="...", content="..."),
                )
            written = await services.index_anchor(entity_type.strip(), entity_id.strip(), content)
            out = IndexOutput(kind="anchor", state="WRITTEN", anchor_id=",".join(written.chunk_ids))
            return Ok(f"Anchor {entity_type}/{entity_id} written.", out.model_dump(mode="json"))

        asked = {"corpus_id": corpus_id, "document_id": document_id, "entity_type": entity_type, "entity_id": entity_id}
        return await runner.run(ctx, chunks if kind == "chunks" else anchor, **asked)

    @server.tool(name="refresh_anchor", description=TOOLS["refresh_anchor"], annotations=WRITES)
    async def refresh_anchor(
        ctx: Context,
        entity_type: Annotated[str, Field(description=ARGUMENTS["entity_type"], min_length=1, max_length=64)],
        entity_id: Annotated[str, Field(description=ARGUMENTS["entity_id"], min_length=1, max_length=256)],
        content: Annotated[str, Field(description=ARGUMENTS["content"], min_length=1)],
    ) -> Annotated[CallToolResult, AnchorOutput]:
        async def work() -> Ok:
            reply = await services.refresh_anchor(entity_type.strip(), entity_id.strip(), content)
            out = AnchorOutput(anchor_id=reply.anchor_id, piece_count=reply.piece_count)
            return Ok(f"Anchor {entity_type}/{entity_id} refreshed.", out.model_dump(mode="json"))

        return await runner.run(ctx, work, entity_type=entity_type, entity_id=entity_id)
