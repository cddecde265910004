"""The document AI tools: classify_document, extract_document and process_document."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.api.outputs import (
    ClassifyOutput,
    ExtractOutput,
    ProcessOutput,
    classify_output,
    extract_output,
    process_output,
)
from knowledge_mcp.api.runner import Runner
from knowledge_mcp.descriptions import ARGUMENTS, TOOLS
from knowledge_mcp.domain.contract import Ok

DocumentId = Annotated[str, Field(description=ARGUMENTS["document_id"], min_length=1)]


def register(server: MCPServer, runner: Runner, services: Services) -> None:
    @server.tool(
        name="classify_document",
        description=TOOLS["classify_document"],
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def classify_document(ctx: Context, document_id: DocumentId) -> Annotated[CallToolResult, ClassifyOutput]:
        async def work() -> Ok:
            found = classify_output(await services.classify(document_id.strip()))
            text = found.summary or f"Type: {found.type_name} (confidence {found.confidence:.2f})."
            return Ok(text, found.model_dump(mode="json"))

        return await runner.run(ctx, work, document_id=document_id)

    @server.tool(
        name="extract_document",
        description=TOOLS["extract_document"],
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def extract_document(
        ctx: Context,
        document_id: DocumentId,
        schema_name: Annotated[str, Field(description=ARGUMENTS["schema_name"])] = "",
        schema_version: Annotated[int, Field(description=ARGUMENTS["schema_version"], ge=0)] = 0,
    ) -> Annotated[CallToolResult, ExtractOutput]:
        async def work() -> Ok:
            found = extract_output(await services.extract(document_id.strip(), schema_name.strip(), schema_version))
            text = found.summary or f"{len(found.fields)} field(s), {len(found.tables)} table(s)."
            return Ok(text, found.model_dump(mode="json"))

        return await runner.run(ctx, work, document_id=document_id)

    @server.tool(
        name="process_document",
        description=TOOLS["process_document"],
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    async def process_document(ctx: Context, document_id: DocumentId) -> Annotated[CallToolResult, ProcessOutput]:
        async def work() -> Ok:
            found = process_output(await services.process(document_id.strip()))
            lines = [f"Document {found.document_id}: {found.type_name} (confidence {found.confidence:.2f})."]
            lines += [f'- {f.name}: {f.value!r} ("{f.quote}")' for f in found.fields]
            lines += [f"- table {t.title or '(untitled)'}: {t.row_count} rows" for t in found.tables]
            lines += [f"Note: {note}" for note in found.notes]
            return Ok("\n".join(lines), found.model_dump(mode="json"))

        return await runner.run(ctx, work, document_id=document_id)
