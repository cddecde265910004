import json

import pytest
from knowledge_cli.stack_settings import default_embedding_model
from knowledge_runtime.model_config import embedding_dimension, model_dimension
from knowledge_runtime.settings import Env, SettingsError


def test_the_packaged_model_is_384_dimensional():
    assert embedding_dimension(Env({"KNOWLEDGE_EMBEDDING_MODEL": default_embedding_model()})) == 384


def test_an_explicit_dimension_wins():
    assert embedding_dimension(Env({"KNOWLEDGE_EMBEDDING_DIMENSION": "1024", "KNOWLEDGE_EMBEDDING_MODEL": "x"})) == 1024


def test_a_dense_head_sets_the_dimension(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "2_Dense").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 768}))
    (tmp_path / "2_Dense" / "config.json").write_text(json.dumps({"out_features": 256}))
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"path": "", "type": "sentence_transformers.models.Transformer"},
                {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ]
        )
    )
    assert model_dimension(tmp_path) == 256


def test_a_hub_name_without_a_local_copy_fails_by_variable():
    with pytest.raises(SettingsError, match="KNOWLEDGE_EMBEDDING_MODEL"):
        embedding_dimension(Env({"KNOWLEDGE_EMBEDDING_MODEL": "BAAI/bge-m3"}))
