"""A language model behind an OpenAI-compatible chat-completions endpoint, for every service.

``KNOWLEDGE_LLM_URL`` is the API base (e.g. ``http://host:8000/v1``: vLLM, Ollama, llama.cpp's
server or a hosted API) and ``KNOWLEDGE_LLM_MODEL`` the model name; the client posts messages to
``<base>/chat/completions`` at temperature 0 and answers the text and the token usage, priced
per 1,000 tokens from ``KNOWLEDGE_LLM_PRICE_*``. Whatever goes wrong (unreachable, timed out, a
non-200 answer, a malformed body) is one error, :class:`LlmUnavailable` (RUNTIME_UNAVAILABLE:
waiting helps). Nothing sent or received is logged: prompts carry document text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from knowledge_runtime.refusals import Refusal, Refused
from knowledge_runtime.settings import PREFIX, Env, SettingsError

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_TOKENS = 800


class LlmUnavailable(Refused):
    """The language model cannot answer now. RUNTIME_UNAVAILABLE (waiting helps)."""

    def __init__(self, why: str) -> None:
        super().__init__(
            Refusal.RUNTIME_UNAVAILABLE, f"the language model is unavailable ({why})", metadata={"runtime": "llm"}
        )


class LlmNotConfigured(Refused):
    """A call that needs a language model, on a service configured without one."""

    def __init__(self, what: str) -> None:
        super().__init__(
            Refusal.RUNTIME_UNAVAILABLE,
            f"{what} needs a language model and none is configured: set {PREFIX}LLM_URL "
            f"(an OpenAI-compatible API base, e.g. http://127.0.0.1:8000/v1) and {PREFIX}LLM_MODEL",
            metadata={"runtime": "llm"},
        )


@dataclass(frozen=True, slots=True)
class LlmSettings:
    url: str
    model: str
    api_key: str | None
    timeout_s: float
    price_input_per_1k: float
    price_output_per_1k: float


def llm_settings(env: Env) -> LlmSettings | None:
    """``KNOWLEDGE_LLM_*``, or None when ``KNOWLEDGE_LLM_URL`` is not set (no model configured)."""
    url = env.str("LLM_URL")
    if url is None:
        return None
    if not url.startswith(("http://", "https://")):
        raise SettingsError(f"{PREFIX}LLM_URL must be an http(s) URL")
    model = env.str("LLM_MODEL")
    if model is None:
        raise SettingsError(f"{PREFIX}LLM_MODEL is required when {PREFIX}LLM_URL is set")
    return LlmSettings(
        url=url,
        model=model,
        api_key=env.str("LLM_API_KEY"),
        timeout_s=env.float("LLM_TIMEOUT_S", DEFAULT_TIMEOUT_S, minimum=0.1),
        price_input_per_1k=env.float("LLM_PRICE_INPUT_PER_1K", 0.0, minimum=0.0),
        price_output_per_1k=env.float("LLM_PRICE_OUTPUT_PER_1K", 0.0, minimum=0.0),
    )


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    model: str
    messages: int  # how many messages were sent (a cost record's "texts")
    prompt_tokens: int
    completion_tokens: int
    amount: float  # priced from the configured rates; 0 for a local model


class ChatClient:
    """One chat-completions endpoint: messages in, :class:`ChatReply` out."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        price_input_per_1k: float = 0.0,
        price_output_per_1k: float = 0.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=timeout_s, headers=headers, transport=transport)
        self._prices = (price_input_per_1k, price_output_per_1k)

    @classmethod
    def from_settings(cls, settings: LlmSettings) -> ChatClient:
        return cls(
            settings.url,
            settings.model,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            price_input_per_1k=settings.price_input_per_1k,
            price_output_per_1k=settings.price_output_per_1k,
        )

    def _body(self, messages: Sequence[Mapping[str, str]], max_tokens: int) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": 0,
            "max_tokens": max_tokens,
        }

    def _reply(self, text: str, messages: int, prompt_tokens: int, completion_tokens: int) -> ChatReply:
        amount = prompt_tokens / 1000 * self._prices[0] + completion_tokens / 1000 * self._prices[1]
        return ChatReply(text, self.model, messages, prompt_tokens, completion_tokens, amount)

    async def stream(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> AsyncIterator[str | ChatReply]:
        """The model's answer as it is written (server-sent events, ``stream: true``): each piece of
        text as it comes, then the whole :class:`ChatReply` (its usage, when the server reports
        it). Closing the iterator early (the caller went away) closes the connection, which ends
        the server's generation."""
        body = {**self._body(messages, max_tokens), "stream": True, "stream_options": {"include_usage": True}}
        pieces: list[str] = []
        usage: Mapping[str, Any] = {}
        try:
            async with self._client.stream("POST", self._url, json=body) as response:
                if response.status_code != 200:
                    raise LlmUnavailable(f"HTTP {response.status_code}")
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        event = json.loads(data)
                        usage = event.get("usage") or usage
                        choices = event.get("choices") or []
                        piece = (choices[0].get("delta") or {}).get("content") or "" if choices else ""
                        if not isinstance(piece, str):
                            raise TypeError("content is not text")
                    except (ValueError, TypeError, AttributeError):
                        raise LlmUnavailable("malformed response") from None
                    if piece:
                        pieces.append(piece)
                        yield piece
        except httpx.TimeoutException:
            raise LlmUnavailable("timed out") from None
        except httpx.HTTPError:
            raise LlmUnavailable("unreachable") from None
        try:
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", len(pieces)))
        except (ValueError, TypeError):
            raise LlmUnavailable("malformed response") from None
        yield self._reply("".join(pieces), len(messages), prompt_tokens, completion_tokens)

    async def complete(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int = DEFAULT_MAX_TOKENS, json_object: bool = False
    ) -> ChatReply:
        """The model's answer at temperature 0; ``json_object`` asks for a JSON object answer
        (``response_format``, which vLLM, Ollama and llama.cpp's server honour)."""
        body = self._body(messages, max_tokens)
        if json_object:
            body["response_format"] = {"type": "json_object"}
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
            if not isinstance(text, str):
                raise TypeError("content is not text")
            usage = payload.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise LlmUnavailable("malformed response") from None
        return self._reply(text, len(messages), prompt_tokens, completion_tokens)

    async def close(self) -> None:
        await self._client.aclose()
