"""Conversations: the earlier turns a question comes with, and the one query retrieval reads.

The service keeps no conversation state: the caller sends the turns before the question each
time. A follow-up ("and for part-time staff?") means little alone, so retrieval reads a
standalone query: a language model condenses the question and its history into one; without a
model, the last earlier user turn is read with the question, and the answer says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from knowledge_search.domain.errors import InvalidSearch

Role = Literal["user", "assistant"]
MAX_TURNS = 50
MAX_TURN_CHARS = 3_500
# What the history may take of the prompt (about 1,500 tokens); the sources keep the rest, so a
# long conversation never crowds out what the answer is written from.
HISTORY_BUDGET_CHARS = 6_000
CONDENSE_MAX_TOKENS = 96
WITHOUT_MODEL_NOTE = (
    "no language model condensed the conversation: retrieval read your last earlier question with this one"
)

CONDENSE_PROMPT = (
    "Rewrite the user's last question as one standalone search query that can be understood without "
    "the conversation. Keep names, numbers and terms from the conversation that the question refers "
    "to. Answer with the query only, on one line, without quotes or explanations."
)


@dataclass(frozen=True, slots=True)
class Turn:
    role: Role
    text: str


def parse_history(turns: Sequence[tuple[Role | None, str]]) -> tuple[Turn, ...]:
    """The history as given, checked: every turn has a role and text, within the limits."""
    if len(turns) > MAX_TURNS:
        raise InvalidSearch(f"at most {MAX_TURNS} earlier turns are read", field="history")
    parsed = []
    for n, (role, text) in enumerate(turns):
        if role is None:
            raise InvalidSearch("a turn's role is user or assistant", field=f"history[{n}].role")
        if not text.strip():
            raise InvalidSearch("a turn's text is empty", field=f"history[{n}].text")
        if len(text) > MAX_TURN_CHARS:
            raise InvalidSearch(f"a turn is at most {MAX_TURN_CHARS} characters", field=f"history[{n}].text")
        parsed.append(Turn(role, text.strip()))
    return tuple(parsed)


def without_model(question: str, history: Sequence[Turn]) -> str:
    """The query retrieval reads when no model can condense: the last earlier user turn, then the
    question (the follow-up's subject is usually in the question before it)."""
    earlier = next((turn.text for turn in reversed(history) if turn.role == "user"), "")
    return f"{earlier} {question}".strip() if earlier else question


def condense_messages(question: str, history: Sequence[Turn]) -> list[dict[str, str]]:
    """The chat that asks a model for the standalone query."""
    lines = [f"{'User' if turn.role == 'user' else 'Assistant'}: {turn.text}" for turn in history]
    conversation = "\n".join(lines)
    user = f"Conversation:\n{conversation}\n\nLast question: {question}\n\nStandalone query:"
    return [{"role": "system", "content": CONDENSE_PROMPT}, {"role": "user", "content": user}]


def condensed(reply: str, question: str) -> str:
    """The model's standalone query, cleaned; the question itself when the reply is unusable."""
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    line = line.removeprefix("Standalone query:").strip().strip("\"'").strip()
    return line[:MAX_TURN_CHARS] if line else question


def within_budget(history: Sequence[Turn], budget_chars: int) -> tuple[Turn, ...]:
    """The most recent turns whose text fits ``budget_chars``: the oldest are left out first."""
    kept: list[Turn] = []
    used = 0
    for turn in reversed(history):
        used += len(turn.text)
        if used > budget_chars:
            break
        kept.append(turn)
    return tuple(reversed(kept))
