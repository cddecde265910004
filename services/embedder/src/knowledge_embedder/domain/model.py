"""The embedder's values: frozen, validated on the way in, free of I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from knowledge_embedder.domain.errors import InvalidInput

MAX_TEXTS = 2048
MAX_PASSAGES = 256  # per Rerank call
MAX_QUERY_CHARS = 3500
# A text longer than the window is read in windows that repeat this share of the window from the
# previous one: a sentence cut at one window's end is read whole at the next one's start.
WINDOW_OVERLAP_SHARE = 0.125
MAX_ENTITY_TYPE_CHARS = 64
MAX_ENTITY_ID_CHARS = 256
DEFAULT_TOP_K = 10
MAX_TOP_K = 100
_ENTITY_TYPE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class Window:
    """One window of a text longer than the model's: characters ``start:end``, ``tokens`` as the
    model reads them."""

    start: int
    end: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Measured:
    """What the tokenizer says about one text: the tokens the model reads for it and, for a text
    longer than the window, the windows it is read in (their tokens together)."""

    tokens: int
    windows: tuple[Window, ...] = ()

    @property
    def pooled(self) -> bool:
        return bool(self.windows)

    def pieces(self, text: str) -> list[tuple[str, int]]:
        """What the model reads for ``text``, with the tokens of each: its windows, or itself."""
        if not self.windows:
            return [(text, self.tokens)]
        return [(text[w.start : w.end], w.tokens) for w in self.windows]


def window_overlap(window: int) -> int:
    """Tokens a window repeats from the previous one."""
    return max(1, int(window * WINDOW_OVERLAP_SHARE))


@dataclass(frozen=True, slots=True)
class Embedded:
    """Unit vectors (one row per input, in order) and what each input cost in tokens."""

    vectors: np.ndarray
    measured: tuple[Measured, ...]

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.measured)

    @property
    def pooled_indexes(self) -> list[int]:
        return [index for index, m in enumerate(self.measured) if m.pooled]


@dataclass(frozen=True, slots=True)
class Price:
    per_1k_tokens: float
    currency: str

    def of(self, tokens: int) -> float:
        return round(self.per_1k_tokens * tokens / 1000.0, 6)


@dataclass(frozen=True, slots=True)
class CostLine:
    """One stored cost record: one model, one operation, one caller's texts."""

    model: str
    operation: str
    texts: int
    tokens: int
    amount: float
    currency: str


@dataclass(frozen=True, slots=True)
class AnchorTarget:
    entity_type: str
    entity_id: str

    @classmethod
    def parse(cls, entity_type: str, entity_id: str) -> AnchorTarget:
        if not entity_type:
            raise InvalidInput("entity_type must not be empty", field="entity_type")
        if len(entity_type) > MAX_ENTITY_TYPE_CHARS or not _ENTITY_TYPE.match(entity_type):
            raise InvalidInput(
                f"entity_type must be lowercase letters, digits, '_', '.' or '-', at most {MAX_ENTITY_TYPE_CHARS}",
                field="entity_type",
            )
        if not entity_id.strip():
            raise InvalidInput("entity_id must not be empty", field="entity_id")
        if len(entity_id) > MAX_ENTITY_ID_CHARS or "\x00" in entity_id:
            raise InvalidInput(f"entity_id must be at most {MAX_ENTITY_ID_CHARS} characters", field="entity_id")
        return cls(entity_type=entity_type, entity_id=entity_id)


@dataclass(frozen=True, slots=True)
class IndexResult:
    ids: tuple[int, ...]
    count: int  # windows pooled into the one vector
    cost: CostLine
    vectors: np.ndarray  # the single anchor vector, as one row


@dataclass(frozen=True, slots=True)
class AnchorMatch:
    target: AnchorTarget
    score: float


def require_content(content: str, field: str = "content") -> str:
    if not content.strip():
        raise InvalidInput(f"{field} must not be empty", field=field)
    if "\x00" in content:
        raise InvalidInput(f"{field} must not contain NUL characters", field=field)
    return content


def require_texts(texts: list[str]) -> list[str]:
    if not texts:
        raise InvalidInput("texts must not be empty", field="texts")
    if len(texts) > MAX_TEXTS:
        raise InvalidInput(f"at most {MAX_TEXTS} texts per request", field="texts")
    for index, text in enumerate(texts):
        if not text.strip():
            raise InvalidInput(f"texts[{index}] must not be empty", field=f"texts[{index}]")
    return texts


@dataclass(frozen=True, slots=True)
class TextInput:
    """One text for the embedding model (a query, a passage, an anchor; or a window of a longer
    one). ``query``: a search query, which some models read with another prompt than passages."""

    text: str
    query: bool = False


@dataclass(frozen=True, slots=True)
class Prompts:
    """What a model expects before each input it reads: e5's ``query: `` and ``passage: ``,
    instruction models' instructions, nothing for MiniLM. They come from the model's configuration
    (its ``config_sentence_transformers.json`` prompts, or the settings), never from code, since a
    model read without its prompts loses quality silently. Every window of a long text gets one."""

    query: str = ""
    passage: str = ""

    def of(self, *, query: bool) -> str:
        return self.query if query else self.passage

    def applied(self, texts: list[str], *, query: bool) -> list[str]:
        prompt = self.of(query=query)
        return [prompt + text for text in texts] if prompt else texts


@dataclass(frozen=True, slots=True)
class RerankPair:
    """One (query, passage) input of the cross-encoder; it travels the batch queue beside texts."""

    query: str
    passage: str


# What the batch queue carries: each kind goes to its own model in the same batch.
ModelInput: TypeAlias = TextInput | RerankPair


def require_passages(passages: list[str]) -> list[str]:
    if not passages:
        raise InvalidInput("passages must not be empty", field="passages")
    if len(passages) > MAX_PASSAGES:
        raise InvalidInput(f"at most {MAX_PASSAGES} passages per request", field="passages")
    for index, passage in enumerate(passages):
        if not passage.strip():
            raise InvalidInput(f"passages[{index}] must not be empty", field=f"passages[{index}]")
        if "\x00" in passage:
            raise InvalidInput(f"passages[{index}] must not contain NUL characters", field=f"passages[{index}]")
    return passages


def truncate_query(query: str) -> tuple[str, int]:
    """The query cut to ``MAX_QUERY_CHARS`` and how many characters were dropped."""
    require_content(query, "query")
    if len(query) <= MAX_QUERY_CHARS:
        return query, 0
    return query[:MAX_QUERY_CHARS], len(query) - MAX_QUERY_CHARS


def top_k_of(requested: int) -> int:
    if requested == 0:
        return DEFAULT_TOP_K
    if not 1 <= requested <= MAX_TOP_K:
        raise InvalidInput(f"top_k must be between 1 and {MAX_TOP_K}", field="top_k")
    return requested


def pool_pieces(vectors: np.ndarray, pieces: list[int]) -> np.ndarray:
    """One vector per text from its pieces' vectors (consecutive rows, ``pieces[i]`` of them for
    text ``i``): a text that fits the window is its one piece; a longer one is the re-normalised
    mean of its windows' vectors."""
    rows, start = [], 0
    for count in pieces:
        rows.append(mean_pool(vectors[start : start + count]))
        start += count
    if start != len(vectors):
        raise ValueError(f"{len(vectors)} vectors for {start} pieces")
    return np.stack(rows)


def mean_pool(vectors: np.ndarray) -> np.ndarray:
    """The re-normalised mean of unit vectors; a single vector comes back unchanged."""
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError("mean_pool needs a non-empty matrix")
    first: np.ndarray = vectors[0]
    if len(vectors) == 1:
        return first
    mean = vectors.astype(np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    if norm == 0.0:  # opposite pieces cancel; fall back to the first rather than a zero vector
        return first
    pooled: np.ndarray = (mean / norm).astype(np.float32)
    return pooled
