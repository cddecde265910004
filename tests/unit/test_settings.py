import os
from pathlib import Path

import pytest
from knowledge_runtime.devkeys import PRIVATE_KEY_FILE
from knowledge_runtime.settings import DEFAULT_MAX_UPLOAD_BYTES, CommonSettings, Env, SettingsError, service_address


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


def test_what_every_service_has_is_in_the_common_settings(keys_dir):
    settings = CommonSettings.from_env(
        "search",
        env(
            MAX_UPLOAD_BYTES="1000",
            METRICS_PORT="9464",
            SERVICE_KEY_PATH=str(keys_dir / PRIVATE_KEY_FILE),
            SERVICE_KEY_ID="kid-1",
        ),
    )
    assert (settings.max_upload_bytes, settings.metrics_port) == (1000, 9464)
    assert settings.service_key is not None and settings.service_key.key_id == "kid-1"
    assert settings.service_key.private_pem == (keys_dir / PRIVATE_KEY_FILE).read_bytes()
    assert "PRIVATE" not in repr(settings)  # the key never shows in a log line of the settings
    defaults = CommonSettings.from_env("search", env())
    assert (defaults.max_upload_bytes, defaults.metrics_port, defaults.service_key) == (100 * 1024 * 1024, 0, None)
    assert (defaults.jwt_issuer, defaults.jwt_audience) == ("knowledge-dev", "knowledge")


@pytest.mark.parametrize(
    ("values", "variable"),
    [
        ({"MAX_UPLOAD_BYTES": "0"}, "KNOWLEDGE_MAX_UPLOAD_BYTES"),
        ({"METRICS_PORT": "-1"}, "KNOWLEDGE_METRICS_PORT"),
        ({"SERVICE_KEY_PATH": "/nonexistent/key.pem"}, "KNOWLEDGE_SERVICE_KEY_PATH"),
    ],
)
def test_a_bad_common_value_names_its_variable(values, variable):
    with pytest.raises(SettingsError, match=variable):
        CommonSettings.from_env("content-index", env(**values))


def test_a_service_key_that_is_not_a_key_is_refused_at_start(tmp_path):
    (tmp_path / "key.pem").write_text("not a key")
    with pytest.raises(SettingsError, match="not an unencrypted PEM private key"):
        CommonSettings.from_env("ingest", env(SERVICE_KEY_PATH=str(tmp_path / "key.pem")))


def test_every_reader_of_the_upload_cap_and_the_token_audience_agrees(tmp_path):
    """One default each, read one way, by the services, the gateway and the local stack."""
    from knowledge_cli.stack_settings import StackSettings
    from knowledge_content_index.config import ContentIndexSettings
    from knowledge_gateway.config import GatewayConfig
    from knowledge_gateway.render import gateway_config
    from knowledge_ingest.config import IngestSettings

    def caps(values: dict[str, str]) -> set:
        environ = {"KNOWLEDGE_DATA_DIR": str(tmp_path), **values}
        return {
            ContentIndexSettings.from_env(Env(environ)).common.max_upload_bytes,
            IngestSettings.from_env(Env(environ)).common.max_upload_bytes,
            gateway_config(environ).max_body_bytes,
            StackSettings.from_env(Env(environ)).max_upload_bytes,
        }

    assert caps({}) == {DEFAULT_MAX_UPLOAD_BYTES} == {GatewayConfig.__dataclass_fields__["max_body_bytes"].default}
    assert caps({"KNOWLEDGE_MAX_UPLOAD_BYTES": "4096"}) == {4096}
    audience = {"KNOWLEDGE_DATA_DIR": str(tmp_path), "KNOWLEDGE_JWT_AUDIENCE": "aud", "KNOWLEDGE_JWT_ISSUER": "iss"}
    stack = StackSettings.from_env(Env(audience))
    common = CommonSettings.from_env("ingest", Env(audience))
    assert (stack.issuer, stack.audience) == (common.jwt_issuer, common.jwt_audience) == ("iss", "aud")
    assert (gateway_config(audience).issuer, gateway_config(audience).audience) == ("iss", "aud")


def test_ingest_workers_follow_the_cores_unless_set(tmp_path, monkeypatch):
    from knowledge_ingest import config
    from knowledge_ingest.config import IngestSettings, default_workers

    assert 1 <= config.usable_cores() <= (os.cpu_count() or 1)
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # a container limited to 1.5 cores
    assert config.usable_cores(tmp_path / "cpu.max") == min(2, os.cpu_count() or 1)
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert config.usable_cores(tmp_path / "cpu.max") == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert config.usable_cores(tmp_path / "cpu.max") == config.usable_cores(tmp_path / "absent")
    assert [default_workers(cores) for cores in (1, 2, 3, 16, 32, 100)] == [2, 4, 6, 32, 64, 64]
    environ = {"KNOWLEDGE_DATA_DIR": str(tmp_path), "KNOWLEDGE_SERVICE_KEY_PATH": ""}
    monkeypatch.setattr(config, "usable_cores", lambda: 3)
    assert IngestSettings.from_env(Env(environ)).workers == 6
    assert IngestSettings.from_env(Env({**environ, "KNOWLEDGE_INGEST_WORKERS": "1"})).workers == 1
    assert IngestSettings.from_env(Env({**environ, "KNOWLEDGE_INGEST_WORKERS": "0"})).workers == 0


def test_ingest_sizes_chunks_in_the_models_tokens_unless_characters_are_asked_for(tmp_path):
    from knowledge_ingest.config import IngestSettings

    environ = {"KNOWLEDGE_DATA_DIR": str(tmp_path), "KNOWLEDGE_SERVICE_KEY_PATH": ""}

    def read(**values: str) -> tuple[int, int, float]:
        settings = IngestSettings.from_env(Env({**environ, **{f"KNOWLEDGE_{k}": v for k, v in values.items()}}))
        return settings.chunk_max_chars, settings.chunk_max_tokens, settings.chunk_window_share

    assert read() == (0, 0, 0.75)  # tokens: three quarters of the window
    assert read(CHUNK_WINDOW_SHARE="1") == (0, 0, 1.0)
    assert read(CHUNK_MAX_TOKENS="200") == (0, 200, 0.75)
    assert read(CHUNK_MAX_CHARS="1500") == (1500, 0, 0.75)  # an explicit size in characters
    for bad, variable in (
        ({"CHUNK_WINDOW_SHARE": "1.5"}, "KNOWLEDGE_CHUNK_WINDOW_SHARE"),
        ({"CHUNK_WINDOW_SHARE": "0"}, "KNOWLEDGE_CHUNK_WINDOW_SHARE"),
        ({"CHUNK_MAX_CHARS": "100"}, "KNOWLEDGE_CHUNK_MAX_CHARS"),
        ({"CHUNK_MAX_CHARS": "1500", "CHUNK_MAX_TOKENS": "200"}, "set one"),
    ):
        with pytest.raises(SettingsError, match=variable):
            read(**bad)


def test_grpc_reflection_is_on_unless_switched_off():
    assert CommonSettings.from_env("ingest", env()).grpc_reflection is True
    assert CommonSettings.from_env("ingest", env(GRPC_REFLECTION="off")).grpc_reflection is False
    with pytest.raises(SettingsError):
        CommonSettings.from_env("ingest", env(GRPC_REFLECTION="sometimes"))
