"""Search's synthesiser on a language model: the runtime's chat-completions client
(``knowledge_runtime.llm``) asked for an answer from the numbered sources.

Only the anonymised question and the sources leave the service; nothing is logged.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import httpx
from knowledge_runtime.costs import Cost, CostItem
from knowledge_runtime.llm import ChatClient, ChatReply

from knowledge_search.domain.answer import Source, Synthesis, chat_messages
from knowledge_search.domain.context import GRADING_INSTRUCTION
from knowledge_search.domain.conversation import CONDENSE_MAX_TOKENS, Turn, condense_messages, condensed


class ChatCompletionsSynthesiser:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        price_input_per_1k: float = 0.0,
        price_output_per_1k: float = 0.0,
        max_tokens: int = 800,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model_id = model
        self.grades = True  # asked to, it labels each statement's support level
        self._chat = ChatClient(
            base_url,
            model,
            api_key=api_key,
            timeout_s=timeout_s,
            price_input_per_1k=price_input_per_1k,
            price_output_per_1k=price_output_per_1k,
            transport=transport,
        )
        self._max_tokens = max_tokens

    async def synthesise(
        self, question: str, sources: Sequence[Source], *, graded: bool = False, history: Sequence[Turn] = ()
    ) -> Synthesis:
        messages = chat_messages(question, sources, GRADING_INSTRUCTION if graded else "", _turns(history))
        reply = await self._chat.complete(messages, max_tokens=self._max_tokens)  # LlmUnavailable on failure
        return Synthesis(text=reply.text, cost=self._cost(reply))

    async def stream(
        self, question: str, sources: Sequence[Source], *, history: Sequence[Turn] = ()
    ) -> AsyncGenerator[str | Synthesis]:
        messages = chat_messages(question, sources, "", _turns(history))
        async for item in self._chat.stream(messages, max_tokens=self._max_tokens):
            yield item if isinstance(item, str) else Synthesis(text=item.text, cost=self._cost(item))

    async def condense(self, question: str, history: Sequence[Turn]) -> tuple[str, Cost]:
        reply = await self._chat.complete(condense_messages(question, history), max_tokens=CONDENSE_MAX_TOKENS)
        return condensed(reply.text, question), self._cost(reply)

    def _cost(self, reply: ChatReply) -> Cost:
        item = CostItem(
            model_id=self.model_id,
            operation="chat",
            texts=reply.messages,
            input_tokens=reply.prompt_tokens,
            output_tokens=reply.completion_tokens,
            amount=reply.amount,
        )
        return Cost(items=(item,))

    async def close(self) -> None:
        await self._chat.close()


def _turns(history: Sequence[Turn]) -> list[tuple[str, str]]:
    return [(turn.role, turn.text) for turn in history]
