"""API keys: X-API-Key or Authorization: Bearer, digests only, from the environment or a file, never a flag."""

import pytest

from gateway.config import GatewaySettings
from gateway.http.auth import ApiKeys
from services.bootstrap.settings import settings_from_cli


def test_either_header_carries_the_key_and_nothing_else_passes(tmp_path):
    keys = ApiKeys.load("k1, k2", None)
    assert keys.enabled
    assert keys.allows({"x-api-key": "k2"}) and keys.allows({"authorization": "Bearer k1"})
    assert keys.allows({"authorization": "bearer k1"})  # the scheme is case-insensitive
    for headers in ({}, {"x-api-key": "k3"}, {"authorization": "Basic k1"}, {"authorization": "Bearer "},
                    {"x-api-key": ""}):
        assert not keys.allows(headers), headers
    assert "k1" not in repr(vars(keys))  # only digests are kept
    file = tmp_path / "keys"
    file.write_text("# rotated 2026-12\nk9\n\n")
    assert ApiKeys.load("", file).allows({"x-api-key": "k9"})
    assert not ApiKeys.load("", None).enabled


def test_keys_never_come_from_a_flag(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        settings_from_cli(GatewaySettings, "prog", ["--api-keys", "k1"])
    assert "unrecognized arguments" in capsys.readouterr().err
    monkeypatch.setenv("MESH_GATEWAY_API_KEYS", "k1")
    assert settings_from_cli(GatewaySettings, "prog", []).api_keys.get_secret_value() == "k1"
