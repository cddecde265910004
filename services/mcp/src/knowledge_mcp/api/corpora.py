"""The collection tools: list_corpora, create_corpus and move_documents."""

from __future__ import annotations

from typing import Annotated

from knowledge.v1 import ingest_pb2
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.api.outputs import CorporaOutput, CorpusOut, MoveOutput, corpus_out
from knowledge_mcp.api.runner import Runner
from knowledge_mcp.descriptions import ARGUMENTS, TOOLS
from knowledge_mcp.domain.contract import Hint, Ok, call


def corpus_line(corpus: CorpusOut) -> str:
    about = f" - {corpus.description}" if corpus.description else ""
    return f"- {corpus.name} (corpus_id={corpus.corpus_id}): {corpus.document_count} documents{about}"


def register(server: MCPServer, runner: Runner, services: Services) -> None:
    @server.tool(
        name="list_corpora",
        description=TOOLS["list_corpora"],
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def list_corpora(ctx: Context) -> Annotated[CallToolResult, CorporaOutput]:
        async def work() -> Ok:
            corpora = [corpus_out(c) for c in await services.corpora()]
            text = "\n".join(corpus_line(c) for c in corpora) if corpora else "No corpora yet."
            return Ok(text, CorporaOutput(corpora=corpora).model_dump(mode="json"))

        return await runner.run(ctx, work)

    @server.tool(
        name="create_corpus",
        description=TOOLS["create_corpus"],
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    async def create_corpus(
        ctx: Context,
        name: Annotated[str, Field(description=ARGUMENTS["name"], min_length=1, max_length=200)],
        description: Annotated[str, Field(description=ARGUMENTS["description"], max_length=2000)] = "",
    ) -> Annotated[CallToolResult, CorpusOut]:
        async def work() -> Ok:
            created = corpus_out(await services.create_corpus(name, description))
            return Ok(
                f"Created corpus {created.name} (corpus_id={created.corpus_id}).", created.model_dump(mode="json")
            )

        return await runner.run(ctx, work, name=name)

    @server.tool(
        name="move_documents",
        description=TOOLS["move_documents"],
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    async def move_documents(
        ctx: Context,
        target_corpus_id: Annotated[str, Field(description=ARGUMENTS["target_corpus_id"], min_length=1)],
        document_ids: Annotated[list[str], Field(description=ARGUMENTS["document_ids"], max_length=1000)] = [],  # noqa: B006 - pydantic copies defaults
        source_corpus_id: Annotated[str, Field(description=ARGUMENTS["source_corpus_id"])] = "",
        all_documents: Annotated[bool, Field(description=ARGUMENTS["all_documents"])] = False,
    ) -> Annotated[CallToolResult, MoveOutput]:
        async def work() -> Ok | Hint:
            if all_documents and document_ids:
                whole = call(
                    "move_documents", target_corpus_id=target_corpus_id, source_corpus_id="...", all_documents=True
                )
                return Hint("give document_ids or all_documents, not both.", f"To move a whole corpus: {whole}.")
            request = ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=target_corpus_id.strip(),
                document_ids=[d.strip() for d in document_ids],
                source_corpus_id=source_corpus_id.strip(),
                all_documents=all_documents,
            )
            reply = await services.move(request)
            moved = MoveOutput(
                moved_count=reply.moved_count,
                moved_document_ids=list(reply.moved_document_ids),
                target_corpus_id=target_corpus_id.strip(),
            )
            text = f"Moved {moved.moved_count} document(s) to corpus {moved.target_corpus_id}."
            return Ok(text, moved.model_dump(mode="json"))

        # A not-found corpus is the target's unless the service names another.
        return await runner.run(ctx, work, corpus_id=target_corpus_id, document_id=",".join(document_ids))
