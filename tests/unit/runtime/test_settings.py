from services.embedding.config import EmbeddingSettings
from services.runtime.settings import settings_from_cli


def test_flag_beats_env_beats_default(monkeypatch):
    assert settings_from_cli(EmbeddingSettings, "t", []).port == 50051
    monkeypatch.setenv("MESH_EMBEDDING_PORT", "6000")
    monkeypatch.setenv("MESH_EMBEDDING_PRECISION", "fp32")
    s = settings_from_cli(EmbeddingSettings, "t", ["--port", "7000"])
    assert s.port == 7000 and s.precision == "fp32"


def test_help_names_every_env_var(capsys):
    import pytest

    with pytest.raises(SystemExit):
        settings_from_cli(EmbeddingSettings, "t", ["--help"])
    out = capsys.readouterr().out
    for name in EmbeddingSettings.model_fields:
        assert f"MESH_EMBEDDING_{name.upper()}" in out
