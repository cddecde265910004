"""One result contract for every tool: Ok, Hint or Err.

- **Ok**: the tool's result; its structured content follows the tool's output schema, with the
  text a model reads beside it.
- **Hint**: a recoverable input the model can act on, saying what to call instead (the ids it
  may have meant, the corpora in reach, the valid range). A bad argument is a Hint.
- **Err**: an infrastructure failure or a refusal, with its catalogue reason and the refusal's
  plain words (``knowledge_runtime.refusals.REFUSALS``).

Hints and errors are tool results with ``isError`` set, never a protocol error and never a stack
trace. Their structured content is one small shape of its own (``outcome`` "hint" or "error"),
since an output schema describes the successful result only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knowledge_runtime.reasons import spec_of
from knowledge_runtime.refusals import REFUSALS, refusal_of

# The gRPC codes of a caller's input that another call can fix: named something that is not
# there, asked past the end, or named a value that is wrong or taken. A refusal is never one.
HINT_CODES = frozenset({"INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "ALREADY_EXISTS", "FAILED_PRECONDITION"})
# A failure that another try later may not meet: the service was down, slow or busy.
TRANSIENT_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED"})
# The catalogue's reason for a failure that named none: the channel's own (a service unreachable).
REASON_OF_BARE_CODE = {"UNAVAILABLE": "DEPENDENCY_UNAVAILABLE", "DEADLINE_EXCEEDED": "UPSTREAM_TIMEOUT"}


@dataclass(frozen=True, slots=True)
class Suggestion:
    """Something the model may have meant: an id and what a person calls it."""

    id: str
    label: str


@dataclass(frozen=True, slots=True)
class Ok:
    text: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Hint:
    message: str  # what was wrong with the input
    instead: str  # what to call instead
    suggestions: tuple[Suggestion, ...] = ()
    reason: str = ""  # the catalogue's reason behind it, when a service gave one

    def text(self) -> str:
        lines = [f"Hint: {self.message}"]
        lines += [f"- {s.id}: {s.label}" if s.label else f"- {s.id}" for s in self.suggestions]
        lines.append(self.instead)
        return "\n".join(lines)

    def structured(self) -> dict[str, Any]:
        return {
            "outcome": "hint",
            "reason": self.reason,
            "message": self.message,
            "instead": self.instead,
            "suggestions": [{"id": s.id, "label": s.label} for s in self.suggestions],
        }


@dataclass(frozen=True, slots=True)
class Err:
    reason: str  # the catalogue's (a refusal's among them)
    message: str  # in plain words
    retry: bool  # whether trying again later may work

    def text(self) -> str:
        advice = "Try again later." if self.retry else "Do not retry this call; tell the user."
        return f"Error {self.reason}: {self.message}. {advice}"

    def structured(self) -> dict[str, Any]:
        return {"outcome": "error", "reason": self.reason, "message": self.message, "retry": self.retry}


Outcome = Ok | Hint | Err


def is_hint(reason: str, code: str) -> bool:
    """Whether a service's answer is the caller's input to correct (a Hint) rather than an Err."""
    return refusal_of(reason) is None and code in HINT_CODES


def failure(reason: str, code: str, detail: str = "", metadata: Mapping[str, str] | None = None) -> Err:
    """The Err for a refusal (its plain words) or a failure (the catalogue's meaning of its reason)."""
    metadata = metadata or {}
    if reason in ("", "UNKNOWN") and code in REASON_OF_BARE_CODE:
        reason = REASON_OF_BARE_CODE[code]
    refusal = refusal_of(reason)
    if refusal is not None:
        spec = REFUSALS[refusal]
        named = [f"{key} {metadata[key]}" for key in spec.metadata if metadata.get(key)]
        words = spec.plain + (f" ({', '.join(named)})" if named else "")
        return Err(reason, words, spec.waiting_helps)
    known = spec_of(reason)
    words = known.meaning.removesuffix(" (internal)") if known is not None else (detail or "the call failed")
    return Err(reason or code or "UNKNOWN", words, code in TRANSIENT_CODES)


def call(tool: str, **arguments: object) -> str:
    """How a tool is called, as a model writes it: ``get_document_text(document_id="12", page=2)``."""
    return f"{tool}({', '.join(f'{name}={json.dumps(value)}' for name, value in arguments.items())})"


def arguments_line(parameters: Mapping[str, Any]) -> str:
    """A tool's arguments as a model reads them: ``query (required), top_k, mode``."""
    required = set(parameters.get("required", ()))
    names = [f"{name} (required)" if name in required else name for name in parameters.get("properties", {})]
    return ", ".join(names) if names else "none"


def bad_arguments(tool: str, problems: list[tuple[str, str]], parameters: Mapping[str, Any]) -> Hint:
    """The Hint for arguments that do not fit the tool's input schema: each fault by its argument
    (never the value given: it may be the user's text), then the arguments the tool takes."""
    faults = "; ".join(f"{where or 'arguments'}: {what}" for where, what in problems)
    return Hint(
        f"the arguments of {tool} do not fit: {faults}.",
        f"Call {tool} again with its arguments corrected. Its arguments: {arguments_line(parameters)}.",
        reason="INVALID_REQUEST",
    )


def unknown_arguments(tool: str, names: list[str], parameters: Mapping[str, Any]) -> Hint:
    """Arguments the tool does not take. The reach (tenant, scope, clearance) is never one: it is
    the token's."""
    return Hint(
        f"{tool} takes no argument {', '.join(repr(n) for n in sorted(names))}; what you can read comes "
        "from your token, never from an argument.",
        f"Call {tool} again without them. Its arguments: {arguments_line(parameters)}.",
        reason="UNKNOWN_FIELD",
    )


def unknown_tool(name: str, tools: list[Suggestion]) -> Hint:
    return Hint(
        f"there is no tool {name!r}. The tools:",
        "Call one of these instead; search_documents answers questions about the documents.",
        tuple(tools),
        reason="METHOD_NOT_FOUND",
    )
