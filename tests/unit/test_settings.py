from pathlib import Path

import pytest
from knowledge_runtime.settings import CommonSettings, Env, SettingsError, service_address


def env(**values: str) -> Env:
    return Env({f"KNOWLEDGE_{k}": v for k, v in values.items()})


def test_defaults_are_local_and_per_service():
    settings = CommonSettings.from_env("ingest", env(DATA_DIR="/srv/k"))
    assert settings.host == "127.0.0.1"
    assert settings.port == 50153
    assert settings.jwks_path == Path("/srv/k/keys/jwks.json")
    assert settings.database_url is None


@pytest.mark.parametrize(
    ("values", "variable"),
    [
        ({"INGEST_PORT": "abc"}, "KNOWLEDGE_INGEST_PORT"),
        ({"INGEST_PORT": "70000"}, "KNOWLEDGE_INGEST_PORT"),
        ({"LOG_LEVEL": "loud"}, "KNOWLEDGE_LOG_LEVEL"),
        ({"SHUTDOWN_GRACE_S": "-1"}, "KNOWLEDGE_SHUTDOWN_GRACE_S"),
    ],
)
def test_invalid_values_name_the_variable(values, variable):
    with pytest.raises(SettingsError, match=variable):
        CommonSettings.from_env("ingest", env(**values))


def test_booleans_and_required_values():
    assert env(X="yes").bool("X", False) is True
    assert env(X="off").bool("X", True) is False
    with pytest.raises(SettingsError, match="KNOWLEDGE_X must be true or false"):
        env(X="maybe").bool("X", False)
    with pytest.raises(SettingsError, match="KNOWLEDGE_MODEL is required"):
        env().str("MODEL", required=True)


def test_service_address_follows_the_port_or_an_explicit_address():
    assert service_address("embedder", env(EMBEDDER_PORT="6000")) == "127.0.0.1:6000"
    assert service_address("embedder", env(EMBEDDER_ADDRESS="embedder:50052")) == "embedder:50052"
