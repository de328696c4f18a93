"""API keys: X-API-Key or Authorization: Bearer, digests only, from the environment or a file, never a flag."""

import pytest

from gateway.config import GatewaySettings
from gateway.http.auth import ApiKeys
from services.runtime.settings import settings_from_cli


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


async def _status(app, path: str, headers: dict[str, str] | None = None) -> int:
    import httpx
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        return (await http.get(path, headers=headers or {})).status_code


@pytest.mark.parametrize("protect_ops", [False, True])
async def test_operator_paths_need_a_key_only_when_protected_and_healthz_never(protect_ops):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from gateway.http.auth import RequireApiKey

    async def ok(request):
        return PlainTextResponse("ok")

    paths = ["/healthz", "/readyz", "/metrics", "/docs", "/openapi.json", "/v1/search"]
    app = RequireApiKey(Starlette(routes=[Route(p, ok) for p in paths]), ApiKeys.load("k1", None),
                        protect_ops=protect_ops)
    without = {p: await _status(app, p) for p in paths}
    assert without["/healthz"] == 200 and without["/v1/search"] == 401
    for path in RequireApiKey.OPS:
        assert without[path] == (401 if protect_ops else 200), path
    for path in paths:
        assert await _status(app, path, {"authorization": "Bearer k1"}) == 200, path


def test_a_broken_quotas_file_is_one_line_naming_it(tmp_path):
    import pytest

    from gateway.usage.quotas import QuotaFileError, Quotas

    bad = tmp_path / "quotas.yaml"
    bad.write_text("keys:\n  k-1: {tokens_per_day: -5}\n", encoding="utf-8")
    with pytest.raises(QuotaFileError, match=r"^quotas.yaml: ") as err:
        Quotas(bad)
    assert "\n" not in str(err.value)
    bad.write_text("keys: {k-1: {tokens_per_day: 100}}\n", encoding="utf-8")
    assert Quotas(bad).of("k-1").tokens_per_day == 100 and not Quotas(bad).of("k-2").any
