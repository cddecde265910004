"""The reading tools: search_documents, get_document_text, get_context and prefetch_context."""

from __future__ import annotations

from typing import Annotated, Literal

from knowledge.v1 import search_pb2
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.api.outputs import (
    ContextOutput,
    DocumentPage,
    PrefetchOutput,
    SearchOutput,
    context_output,
    prefetch_output,
    search_output,
)
from knowledge_mcp.api.runner import Runner
from knowledge_mcp.descriptions import ARGUMENTS, TOOLS
from knowledge_mcp.domain.contract import Ok, call

MODES = {
    "hybrid": search_pb2.SEARCH_MODE_HYBRID,
    "vector": search_pb2.SEARCH_MODE_VECTOR,
    "lexical": search_pb2.SEARCH_MODE_LEXICAL,
}
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

Query = Annotated[str, Field(description=ARGUMENTS["query"], min_length=1, max_length=3500)]
CorpusId = Annotated[str, Field(description=ARGUMENTS["corpus_id"])]
DocumentId = Annotated[str, Field(description=ARGUMENTS["document_id"], min_length=1)]
Filter = Annotated[str, Field(description=ARGUMENTS["filter"])]


def register(server: MCPServer, runner: Runner, services: Services) -> None:
    @server.tool(name="search_documents", description=TOOLS["search_documents"], annotations=READ_ONLY)
    async def search_documents(
        ctx: Context,
        query: Query,
        corpus_id: CorpusId = "",
        document_id: Annotated[str, Field(description=ARGUMENTS["search_document_id"])] = "",
        top_k: Annotated[int, Field(description=ARGUMENTS["top_k"], ge=1, le=100)] = 10,
        mode: Annotated[Literal["hybrid", "vector", "lexical"], Field(description=ARGUMENTS["mode"])] = "hybrid",
        filter: Filter = "",
    ) -> Annotated[CallToolResult, SearchOutput]:
        async def work() -> Ok:
            request = search_pb2.SearchDocumentsRequest(
                query=query,
                corpus_id=corpus_id.strip(),
                document_id=document_id.strip(),
                top_k=top_k,
                mode=MODES[mode],
                filter=filter,
            )
            reply = await services.search_documents(request)
            return Ok(reply.text, search_output(reply).model_dump(mode="json"))

        return await runner.run(ctx, work, corpus_id=corpus_id, document_id=document_id)

    @server.tool(name="get_document_text", description=TOOLS["get_document_text"], annotations=READ_ONLY)
    async def get_document_text(
        ctx: Context,
        document_id: DocumentId,
        page: Annotated[int, Field(description=ARGUMENTS["page"], ge=1)] = 1,
    ) -> Annotated[CallToolResult, DocumentPage]:
        async def work() -> Ok:
            reply = await services.document_text(document_id.strip(), page)
            count = reply.page_count if reply.HasField("page_count") else 1
            number = reply.page if reply.HasField("page") else 1
            following = reply.next_page if reply.HasField("next_page") else None
            preceding = reply.previous_page if reply.HasField("previous_page") else None
            page_out = DocumentPage(
                document_id=reply.document_id,
                page=number,
                page_count=count,
                text=reply.text,
                next_page=following,
                previous_page=preceding,
                next_call=call("get_document_text", document_id=reply.document_id, page=following) if following else "",
                previous_call=(
                    call("get_document_text", document_id=reply.document_id, page=preceding) if preceding else ""
                ),
                source_url=reply.source_url,
            )
            footer = [f"[Page {number} of {count} of document {reply.document_id}.]"]
            if page_out.next_call:
                footer.append(f"Next page: {page_out.next_call}")
            if page_out.previous_call:
                footer.append(f"Previous page: {page_out.previous_call}")
            return Ok(f"{reply.text}\n\n" + "\n".join(footer), page_out.model_dump(mode="json"))

        return await runner.run(ctx, work, document_id=document_id, page=page)

    @server.tool(name="get_context", description=TOOLS["get_context"], annotations=READ_ONLY)
    async def get_context(
        ctx: Context,
        query: Query,
        corpus_id: CorpusId = "",
        top_k: Annotated[int, Field(description=ARGUMENTS["context_top_k"], ge=1, le=50)] = 8,
        filter: Filter = "",
    ) -> Annotated[CallToolResult, ContextOutput]:
        async def work() -> Ok:
            request = search_pb2.GetContextRequest(query=query, corpus_id=corpus_id.strip(), top_k=top_k, filter=filter)
            reply = await services.context(request)
            return Ok(reply.context.rendered, context_output(reply).model_dump(mode="json"))

        return await runner.run(ctx, work, corpus_id=corpus_id)

    @server.tool(name="prefetch_context", description=TOOLS["prefetch_context"], annotations=READ_ONLY)
    async def prefetch_context(
        ctx: Context,
        user_message: Annotated[str, Field(description=ARGUMENTS["user_message"], min_length=1, max_length=100_000)],
    ) -> Annotated[CallToolResult, PrefetchOutput]:
        async def work() -> Ok:
            reply = await services.prefetch(user_message)
            text = reply.rendered or "No suggested context for this message."
            if reply.degraded:
                text += f"\n(degraded: {'; '.join(reply.degradations)})"
            return Ok(text, prefetch_output(reply).model_dump(mode="json"))

        return await runner.run(ctx, work)
