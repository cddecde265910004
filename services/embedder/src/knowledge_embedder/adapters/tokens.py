"""Token counts and truncation, from the model's own tokenizer (a private, untruncated copy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
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


def in_length_order(texts: Sequence[str], batch_size: int, forward: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``forward`` over sub-batches of similar length (little padding); rows back in input order."""
    order = np.argsort([-len(text) for text in texts], kind="stable")
    parts = [
        forward([texts[i] for i in order[start : start + batch_size]]) for start in range(0, len(texts), batch_size)
    ]
    ordered = np.concatenate(parts)
    result = np.empty_like(ordered)
    result[order] = ordered
    return result
