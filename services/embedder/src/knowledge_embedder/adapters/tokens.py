"""Token counts and truncation, from the model's own tokenizer (a private, untruncated copy)."""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer

from knowledge_embedder.domain.model import Measured


class TokenMeasurer:
    def __init__(self, tokenizer: Tokenizer, max_seq_length: int) -> None:
        # A copy, so that the model's own truncation and padding settings are left alone.
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._max = max_seq_length
        processor = self._tokenizer.post_processor
        self._specials = processor.num_special_tokens_to_add(False) if processor is not None else 0

    def measure(self, texts: Sequence[str]) -> list[Measured]:
        return [self._one(text, encoding) for text, encoding in zip(texts, self._tokenizer.encode_batch(list(texts)))]

    def _one(self, text: str, encoding) -> Measured:
        total = len(encoding.ids)
        if total <= self._max:
            return Measured(tokens=total)
        content = [offset for offset, special in zip(encoding.offsets, encoding.special_tokens_mask) if not special]
        visible = max(self._max - self._specials, 0)
        seen_end = content[visible - 1][1] if visible else 0
        return Measured(tokens=self._max, truncated_chars=max(len(text.rstrip()) - seen_end, 0))
