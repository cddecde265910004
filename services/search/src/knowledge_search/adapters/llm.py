"""Search's synthesiser on a language model: the runtime's chat-completions client
(``knowledge_runtime.llm``) asked for an answer from the numbered sources.

Only the anonymised question and the sources leave the service; nothing is logged.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from knowledge_runtime.costs import Cost, CostItem
from knowledge_runtime.llm import ChatClient

from knowledge_search.domain.answer import Source, Synthesis, chat_messages
from knowledge_search.domain.context import GRADING_INSTRUCTION


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

    async def synthesise(self, question: str, sources: Sequence[Source], *, graded: bool = False) -> Synthesis:
        messages = chat_messages(question, sources, GRADING_INSTRUCTION if graded else "")
        reply = await self._chat.complete(messages, max_tokens=self._max_tokens)  # LlmUnavailable on failure
        item = CostItem(
            model_id=self.model_id,
            operation="chat",
            texts=reply.messages,
            input_tokens=reply.prompt_tokens,
            output_tokens=reply.completion_tokens,
            amount=reply.amount,
        )
        return Synthesis(text=reply.text, cost=Cost(items=(item,)))

    async def close(self) -> None:
        await self._chat.close()
