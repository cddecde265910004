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


def padded_groups(lengths: Sequence[int], batch_size: int, slack: float | None) -> list[list[int]]:
    """Indices of ``lengths`` in passes of at most ``batch_size``, longest first. A pass pads
    every text to its first (longest), and closes when that would pad more than ``slack`` of its
    real tokens (0: texts of one length only); ``slack`` None: no bound, passes of ``batch_size``
    in length order."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for index in order:
        group = groups[-1] if groups else None
        if group is not None and len(group) < batch_size:
            longest = lengths[group[0]]
            real = sum(lengths[i] for i in group) + lengths[index]
            if slack is None or longest * (len(group) + 1) <= (1 + slack) * real:
                group.append(index)
                continue
        groups.append([index])
    return groups


def in_length_order(
    lengths: Sequence[int],
    batch_size: int,
    forward: Callable[[list[int]], np.ndarray],
    slack: float | None,
) -> np.ndarray:
    """``forward`` over the passes of :func:`padded_groups` (it gets the indices of each); rows
    back in input order."""
    groups = padded_groups(lengths, batch_size, slack)
    ordered = np.concatenate([forward(group) for group in groups])
    result = np.empty_like(ordered)
    result[[i for group in groups for i in group]] = ordered
    return result
