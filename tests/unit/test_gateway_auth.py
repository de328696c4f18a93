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


def test_a_scoped_keys_file_gives_each_key_its_id_groups_collections_and_models(tmp_path):
    import hashlib

    from gateway.access.keys import KeyFileError, key_id

    file = tmp_path / "keys.yaml"
    file.write_text(f"""keys:
  - sha256: {hashlib.sha256(b"books-key-000001").hexdigest()}
    id: books
    groups: [search, llm]
    collections: {{read: [books, "shared-*"], write: ["books-*"]}}
    models: [local]
  - key: admin-key-000002
""", encoding="utf-8")
    keys = ApiKeys.load("", file)
    books = keys.identify({"x-api-key": "books-key-000001"})
    assert books is not None and books.id == "books"
    assert books.may_call("search") and not books.may_call("admin") and not books.may_call("files")
    assert books.may_read("books") and books.may_read("shared-faq") and books.may_read("books-v2")  # write: read too
    assert not books.may_read("gifts") and not books.may_write("books") and books.may_write("books-v2")
    assert books.may_use("local") and not books.may_use("big")
    admin = keys.identify({"authorization": "Bearer admin-key-000002"})
    assert admin is not None and admin.id == key_id("admin-key-000002")
    assert admin.may_call("admin") and admin.may_write("anything") and admin.may_use("big")  # no limits: all
    assert keys.by_id("books") == books and keys.by_id("nobody") is None
    assert "books-key-000001" not in repr(vars(keys)) and "admin-key-000002" not in repr(vars(keys))
    for bad, why in [("keys:\n  - id: x\n", "exactly one of key or sha256"),
                     ("keys:\n  - key: short\n", "at least 8"),
                     ("keys:\n  - {key: abcdefgh1, groups: [everything]}\n", "keys.0.groups.0"),
                     ("keys:\n  - {key: abcdefgh1, id: a}\n  - {key: abcdefgh2, id: a}\n", "share one id")]:
        file.write_text(bad, encoding="utf-8")
        with pytest.raises(KeyFileError, match=r"^keys.yaml: ") as err:
            ApiKeys.load("", file)
        assert why in str(err.value), (bad, str(err.value))
