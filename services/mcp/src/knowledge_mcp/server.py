"""The MCP server: the official SDK's MCPServer with every tool, keeping the result contract at
its edge too. An unknown tool, an argument the tool does not take, or one that does not fit its
input schema is a Hint; a tool that fails inside this process is an Err (INTERNAL) with nothing
of the failure in it. None of them is a protocol error."""

from __future__ import annotations

from typing import Any

from knowledge_runtime.logging import get_logger
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from knowledge_mcp.adapters.services import Services
from knowledge_mcp.api import corpora, docai, indexing, prompts, retrieval
from knowledge_mcp.api.runner import Runner, internal_error, tool_result
from knowledge_mcp.caller import FixedCaller
from knowledge_mcp.descriptions import INSTRUCTIONS, SERVER
from knowledge_mcp.domain.contract import Suggestion, bad_arguments, unknown_arguments, unknown_tool
from knowledge_mcp.usecases import Explainer

log = get_logger(__name__)
VERSION = "0.1.0"


class KnowledgeMcp(MCPServer):
    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            listed = [Suggestion(t.name, (t.description or "").split(".")[0]) for t in await self.list_tools()]
            return tool_result(unknown_tool(name, listed))
        unknown = [key for key in arguments if key not in tool.parameters.get("properties", {})]
        if unknown:
            return tool_result(unknown_arguments(name, unknown, tool.parameters))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as error:
            log.error("tool_failed", tool=name, error=type(error.__cause__).__name__)
            return internal_error()
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                problems = [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in error.__cause__.errors()]
                return tool_result(bad_arguments(name, problems, tool.parameters))
            log.error("tool_failed", tool=name, error=type(error.__cause__).__name__)
            return internal_error()


def build_server(services: Services, *, fixed: FixedCaller | None = None, index_wait_s: float = 30.0) -> KnowledgeMcp:
    """The server with every tool and the prompt; ``fixed`` is stdio's one caller (None over HTTP,
    where the bearer middleware gives each request its own)."""
    server = KnowledgeMcp(SERVER, title="Knowledge", instructions=INSTRUCTIONS, version=VERSION)
    runner = Runner(Explainer(services), fixed=fixed)
    retrieval.register(server, runner, services)
    corpora.register(server, runner, services)
    docai.register(server, runner, services)
    indexing.register(server, runner, services, index_wait_s=index_wait_s)
    prompts.register(server, runner, services)
    return server
