"""The prompt context line (ingest's GetPromptContext) as the MCP prompt ``knowledge_context``: a
prompt, not a resource, because it is the caller's own (a prompt is given the request, a static
resource is not)."""

from __future__ import annotations

from knowledge_client import KnowledgeError
from mcp.server.mcpserver import Context, MCPServer

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.api.runner import Runner
from knowledge_mcp.caller import acting_as
from knowledge_mcp.descriptions import PROMPT_CONTEXT
from knowledge_mcp.domain.contract import failure

PROMPT_NAME = "knowledge_context"
NOTHING = "- Knowledge: no documents yet."


def register(server: MCPServer, runner: Runner, services: Services) -> None:
    @server.prompt(name=PROMPT_NAME, description=PROMPT_CONTEXT)
    async def knowledge_context(ctx: Context) -> str:
        caller = runner.caller(ctx)
        if caller is None:
            return failure("TOKEN_MISSING", "UNAUTHENTICATED").text()
        with acting_as(caller):
            try:
                return (await services.prompt_context()).text or NOTHING
            except KnowledgeError as error:
                return failure(error.reason, error.code.name, str(error), error.metadata).text()
