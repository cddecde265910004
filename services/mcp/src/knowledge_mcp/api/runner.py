"""Every tool call runs through :class:`Runner`: as its caller, with a service's refusal turned
into a Hint or an Err, and the outcome turned into the tool result the contract promises."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from knowledge_client import KnowledgeError
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent

from knowledge_mcp.caller import Caller, FixedCaller, acting_as, caller_of
from knowledge_mcp.domain.contract import Err, Hint, Ok, Outcome, failure
from knowledge_mcp.usecases import Explainer


def tool_result(outcome: Outcome) -> CallToolResult:
    """Ok: its text and structured content; Hint and Err: their text and shape, with isError."""
    if isinstance(outcome, Ok):
        return CallToolResult(
            content=[TextContent(type="text", text=outcome.text)], structured_content=dict(outcome.data)
        )
    return CallToolResult(
        content=[TextContent(type="text", text=outcome.text())], structured_content=outcome.structured(), is_error=True
    )


def request_of(ctx: Context | None) -> Any:
    """The HTTP request a call came on; None over stdio (or outside a request)."""
    if ctx is None:
        return None
    try:
        return ctx.request_context.request
    except ValueError:
        return None


class Runner:
    def __init__(self, explainer: Explainer, *, fixed: FixedCaller | None = None) -> None:
        self._explainer = explainer
        self._fixed = fixed  # stdio's one caller; None over HTTP, where each request has its own

    def caller(self, ctx: Context | None) -> Caller | None:
        return caller_of(request_of(ctx), self._fixed)

    async def run(self, ctx: Context | None, work: Callable[[], Awaitable[Ok | Hint]], **asked: Any) -> CallToolResult:
        caller = self.caller(ctx)
        if caller is None:
            return tool_result(failure("TOKEN_MISSING", "UNAUTHENTICATED"))
        outcome: Outcome
        with acting_as(caller):
            try:
                outcome = await work()
            except KnowledgeError as error:
                outcome = await self._explainer.explain(error, asked)
        return tool_result(outcome)


def internal_error() -> CallToolResult:
    """A tool that failed in this process: the catalogue's INTERNAL, no trace, no internals."""
    return tool_result(Err("INTERNAL", "the tool failed inside the knowledge service; the failure is logged", True))
