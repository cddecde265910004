"""A language model behind an OpenAI-compatible chat-completions endpoint.

``KNOWLEDGE_LLM_URL`` is the API base (e.g. ``http://host:8000/v1``); the client posts to
``<base>/chat/completions`` with the model name, temperature 0 and the numbered sources.
Only the anonymised question and the sources leave the service; nothing is logged.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from knowledge_search.domain.answer import Source, Synthesis, chat_messages
from knowledge_search.domain.context import GRADING_INSTRUCTION
from knowledge_search.domain.errors import LlmUnavailable
from knowledge_search.domain.model import Cost, CostItem


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
        self._url = base_url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=timeout_s, headers=headers, transport=transport)
        self._prices = (price_input_per_1k, price_output_per_1k)
        self._max_tokens = max_tokens

    async def synthesise(self, question: str, sources: Sequence[Source], *, graded: bool = False) -> Synthesis:
        messages = chat_messages(question, sources, GRADING_INSTRUCTION if graded else "")
        body = {"model": self.model_id, "messages": messages, "temperature": 0, "max_tokens": self._max_tokens}
        try:
            response = await self._client.post(self._url, json=body)
        except httpx.TimeoutException:
            raise LlmUnavailable("timed out") from None
        except httpx.HTTPError:
            raise LlmUnavailable("unreachable") from None
        if response.status_code != 200:
            raise LlmUnavailable(f"HTTP {response.status_code}")
        try:
            payload = response.json()
            text = payload["choices"][0]["message"]["content"] or ""
            usage = payload.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmUnavailable("malformed response") from None
        amount = prompt_tokens / 1000 * self._prices[0] + completion_tokens / 1000 * self._prices[1]
        item = CostItem(
            model_id=self.model_id,
            operation="chat",
            texts=len(messages),
            input_tokens=prompt_tokens,
            output_tokens=completion_tokens,
            amount=amount,
        )
        return Synthesis(text=text, cost=Cost(items=(item,)))

    async def close(self) -> None:
        await self._client.aclose()
