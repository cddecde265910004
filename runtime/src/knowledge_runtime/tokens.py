"""Counting in an embedding model's tokens, with the model's own tokenizer.

A tokenizer is a vocabulary and its rules, not a model: the ``tokenizers`` library runs it
without torch. The embedder counts its inputs and cuts its windows with one; ingest sizes its
chunks with the same one, which it gets from the embedder as JSON (``GetTokenizer``), so that
both count alike. ``identity`` (the SHA-256 of that JSON) names it across processes.

A :class:`TokenCounter` is a :class:`knowledge_runtime.chunking.Measure`: the chunker counts
its sizes with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Encoding, Tokenizer

MIN_CONTENT_TOKENS = 8  # the smallest chunk worth embedding, beside the special tokens
# Pre-tokenizers that cut at whitespace before anything else, and normalizers that neither add nor
# take whitespace: with both, a text's tokens are its words' tokens, and texts joined by
# whitespace have exactly their own tokens together (``TokenCounter.joined`` is exact).
_WHITESPACE_SPLITS = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
_WORD_NORMALIZERS = frozenset({"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents"})


@dataclass(frozen=True, slots=True)
class Span:
    """One piece of a text: characters ``start:end``, ``tokens`` as the model reads it (its
    special tokens included)."""

    start: int
    end: int
    tokens: int


class TokenCounter:
    """Token counts of texts as the model reads them (special tokens included, nothing
    truncated), and cuts of a longer text into pieces that fit.

    Thread-safe: it only encodes (the tokenizer is never reconfigured after construction)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        # A private copy without truncation or padding, whatever the model's own settings are.
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        processor = self._tokenizer.post_processor
        self.specials = processor.num_special_tokens_to_add(False) if processor is not None else 0
        self.json = self._tokenizer.to_str()
        self.identity = hashlib.sha256(self.json.encode()).hexdigest()
        self.smallest = self.specials + MIN_CONTENT_TOKENS
        self.exact = _splits_words_at_whitespace(json.loads(self.json))
        self._separators: dict[str, int] = {}

    @classmethod
    def from_json(cls, text: str) -> TokenCounter:
        return cls(Tokenizer.from_str(text))

    def size(self, text: str) -> int:
        return len(self._tokenizer.encode(text).ids)

    def sizes(self, texts: Sequence[str]) -> list[int]:
        # The fast batch skips the offsets, which a count does not need: half the time of encode_batch.
        return [len(encoding.ids) for encoding in self._tokenizer.encode_batch_fast(list(texts))]

    def joined(self, sizes: Sequence[int], separator: str) -> int:
        """The tokens of texts of ``sizes`` joined by ``separator``: each one's content, the
        separators' own tokens (none for whitespace in most tokenizers) and the special tokens
        once. Exact where the tokenizer splits words at whitespace (WordPiece, as in BERT and
        MiniLM); an estimate elsewhere, which the chunker checks on every chunk it makes."""
        if not sizes:
            return 0
        joins = len(sizes) - 1
        return sum(sizes) - self.specials * joins + self._separator(separator) * joins

    def split(self, text: str, limit: int) -> list[str]:
        """``text`` in pieces of at most ``limit`` tokens, cut between words where possible."""
        return [text[span.start : span.end] for span in self.spans(text, limit)]

    def spans(self, text: str, limit: int, overlap: int = 0) -> list[Span]:
        """``text`` as consecutive pieces of at most ``limit`` tokens each, every one after the
        first starting about ``overlap`` tokens before the previous one's end. A cut falls where
        whitespace separates two tokens in the piece's second half, else between two words,
        else between two tokens. One piece (the whole text) when it fits."""
        room = limit - self.specials  # content tokens per piece
        if room < 1 or not 0 <= overlap < room:
            raise ValueError(f"a piece of {limit} tokens cannot hold content with an overlap of {overlap}")
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        offsets = encoding.offsets
        count = len(offsets)
        if count <= room:
            return [Span(0, len(text), count + self.specials)]
        spans: list[Span] = []
        start = 0
        while True:
            end = min(start + room, count)
            if end < count:
                end = _cut(encoding, start + room // 2, end)
            spans.append(Span(offsets[start][0], offsets[end - 1][1], end - start + self.specials))
            if end >= count:
                return spans
            # Back by the overlap, to where a word starts (at most half as far again), always forward.
            back = max(end - overlap, start + 1)
            start = _cut(encoding, max(back - overlap // 2, start + 1), back) if overlap else end

    def _separator(self, separator: str) -> int:
        if separator not in self._separators:
            alone = len(self._tokenizer.encode("a", add_special_tokens=False).ids)
            joined = len(self._tokenizer.encode(f"a{separator}a", add_special_tokens=False).ids)
            self._separators[separator] = max(joined - 2 * alone, 0)
        return self._separators[separator]


def _splits_words_at_whitespace(config: dict) -> bool:
    """Whether the tokenizer (its JSON) cuts at whitespace first and normalizes within words."""

    def steps(part: dict | None, key: str) -> list[str]:
        if part is None:
            return []
        if part.get("type") == "Sequence":
            return [step.get("type", "") for step in part.get(key, [])]
        return [part.get("type", "")]

    splits = steps(config.get("pre_tokenizer"), "pretokenizers")
    normalizers = steps(config.get("normalizer"), "normalizers")
    return bool(splits) and splits[0] in _WHITESPACE_SPLITS and set(normalizers) <= _WORD_NORMALIZERS


def _cut(encoding: Encoding, lowest: int, highest: int) -> int:
    """The best token index in ``lowest..highest`` to cut before: the highest one with whitespace
    before it, else the highest that starts a word, else ``highest``."""
    offsets, words = encoding.offsets, encoding.word_ids
    for index in range(highest, lowest - 1, -1):
        if 0 < index < len(offsets) and offsets[index][0] > offsets[index - 1][1]:
            return index
    for index in range(highest, lowest - 1, -1):
        if 0 < index < len(words) and (words[index] is None or words[index] != words[index - 1]):
            return index
    return highest
