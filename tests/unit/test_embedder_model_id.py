"""The model id the embedder reports (Info, cost records, answers) never exposes a server path."""

from knowledge_embedder.config import EmbedderSettings
from knowledge_runtime.settings import Env


def settings(**values: str) -> EmbedderSettings:
    return EmbedderSettings.from_env(Env({f"KNOWLEDGE_{k}": v for k, v in values.items()}))


def test_a_local_path_is_named_by_its_last_folders():
    assert settings(EMBEDDING_MODEL="/srv/models/acme/bge-m3").model_id == "acme/bge-m3"


def test_a_hub_style_name_is_kept_and_an_explicit_id_wins():
    assert settings(EMBEDDING_MODEL="BAAI/bge-m3").model_id == "BAAI/bge-m3"
    assert (
        settings(EMBEDDING_MODEL="/srv/m", EMBEDDING_MODEL_ID="sentence-transformers/all-MiniLM-L6-v2").model_id
        == "sentence-transformers/all-MiniLM-L6-v2"
    )
