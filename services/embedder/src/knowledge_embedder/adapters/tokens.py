"""Token counts and windows, from the model's own tokenizer (a private, untruncated copy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from knowledge_runtime.tokens import TokenCounter
from tokenizers import Tokenizer

from knowledge_embedder.domain.model import Measured, Window, window_overlap


class TokenMeasurer:
    """Counts each text in the model's tokens; a text longer than ``window`` gets the windows it
    is read in (overlapping by :func:`window_overlap`, cut between words where possible)."""

    def __init__(self, tokenizer: Tokenizer, window: int) -> None:
        self.counter = TokenCounter(tokenizer)  # a copy: the model's own settings are left alone
        self._window = window
        self._overlap = window_overlap(window)

    def measure(self, texts: Sequence[str]) -> list[Measured]:
        return [
            Measured(tokens=count) if count <= self._window else self._windows(text)
            for text, count in zip(texts, self.counter.sizes(texts))
        ]

    def _windows(self, text: str) -> Measured:
        spans = self.counter.spans(text, self._window, self._overlap)
        windows = tuple(Window(span.start, span.end, span.tokens) for span in spans)
        return Measured(tokens=sum(w.tokens for w in windows), windows=windows)


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
