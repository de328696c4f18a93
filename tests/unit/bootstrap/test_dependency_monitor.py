"""DependencyMonitor and Requirement: state changes, logging once per change, waiting for a dependency."""

from __future__ import annotations

import asyncio
import logging

import pytest

from services.bootstrap.health import Dependency, DependencyMonitor, Requirement


class Switch:
    """A dependency whose reachability the test sets (the failure a real one cannot show on demand)."""

    def __init__(self, up: bool) -> None:
        self.up = up
        self.calls = 0

    async def probe(self) -> None:
        self.calls += 1
        if not self.up:
            raise ConnectionRefusedError("refused")


def test_down_after_must_be_positive():
    with pytest.raises(ValueError):
        DependencyMonitor([], down_after=0)


def test_requirement_all_and_any():
    up = {"a": True, "b": False}
    assert Requirement(()).met(up)
    assert Requirement(("a",)).met(up) and not Requirement(("a", "b")).met(up)
    assert Requirement(("a", "b"), "any").met(up) and not Requirement(("b",), "any").met(up)
    assert not Requirement(("missing",)).met(up)


async def test_changes_are_logged_once_and_listeners_called_per_change(caplog):
    redis = Switch(up=False)
    monitor = DependencyMonitor([Dependency("redis", redis.probe)], summary_every_s=3600)
    changes: list[dict[str, bool]] = []

    async def listener() -> None:
        changes.append(monitor.up())

    monitor.on_change(listener)
    caplog.set_level(logging.INFO, logger="services.bootstrap.health")
    for _ in range(5):
        await monitor.probe_all()
    redis.up = True
    for _ in range(3):
        await monitor.probe_all()
    redis.up = False
    await monitor.probe_all()
    assert monitor.is_up("redis")  # one failed probe of a dependency that was up is no outage yet
    redis.up = True
    await monitor.probe_all()  # and an answer clears the count
    redis.up = False
    await monitor.probe_all()
    assert monitor.is_up("redis")
    await monitor.probe_all()
    assert not monitor.is_up("redis")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[0].startswith("dependency redis is down: ConnectionRefusedError: refused")
    assert messages[1].startswith("dependency redis is back after ")
    assert messages[2].startswith("dependency redis is down")
    assert changes == [{"redis": False}, {"redis": True}, {"redis": False}]
    assert redis.calls == 12


async def test_summary_while_down_and_a_probe_that_hangs_is_bounded(caplog):
    async def hangs() -> None:
        await asyncio.Event().wait()

    monitor = DependencyMonitor([Dependency("llm", hangs)], summary_every_s=0.0, probe_timeout_s=0.05)
    caplog.set_level(logging.WARNING, logger="services.bootstrap.health")
    await monitor.probe_all()
    await monitor.probe_all()
    assert not monitor.is_up("llm")
    assert any(r.getMessage().startswith("still down: llm") for r in caplog.records)


async def test_wait_up_returns_when_the_background_loop_sees_it_back():
    dep = Switch(up=False)
    monitor = DependencyMonitor([Dependency("embedding", dep.probe)], interval_s=3600)
    await monitor.start()
    waiter = asyncio.create_task(monitor.wait_up("embedding"))
    await asyncio.sleep(0)
    assert not waiter.done()
    dep.up = True
    monitor.recheck()  # wakes the loop at once instead of after the hour-long interval
    await asyncio.wait_for(waiter, 5)
    await monitor.close()


@pytest.mark.parametrize("argv, env, expect", [
    (["--port", "70000"], {}, "invalid setting port (from --port, value '70000')"),
    ([], {"MESH_EMBEDDING_MAX_BATCH_SIZE": "lots"},
     "invalid setting max_batch_size (from MESH_EMBEDDING_MAX_BATCH_SIZE"),
    (["--log-level", "LOUD"], {}, "invalid setting log_level"),
])
def test_a_bad_setting_is_one_line_naming_it_and_exit_2(argv, env, expect, monkeypatch, capsys):
    from services.embedding.config import EmbeddingSettings
    from services.runtime.settings import settings_from_cli

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as info:
        settings_from_cli(EmbeddingSettings, "prog", argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("prog: error: ") and expect in err, err
    assert "Traceback" not in err


def test_debug_is_a_flag():
    from services.embedding.config import EmbeddingSettings
    from services.runtime.settings import settings_from_cli

    assert settings_from_cli(EmbeddingSettings, "prog", ["--debug"]).debug
    assert not settings_from_cli(EmbeddingSettings, "prog", []).debug


def test_secrets_are_never_flags_and_flags_are_never_abbreviated(monkeypatch, capsys):
    from services.retrieval.config import RetrievalSettings
    from services.runtime.settings import settings_from_cli

    for argv in (["--qdrant-api-key", "s3cret"], ["--qdrant-api"]):
        with pytest.raises(SystemExit) as info:
            settings_from_cli(RetrievalSettings, "prog", argv)
        assert info.value.code == 2
    monkeypatch.setenv("MESH_RETRIEVAL_QDRANT_API_KEY", "s3cret")
    assert settings_from_cli(RetrievalSettings, "prog", []).qdrant_api_key.get_secret_value() == "s3cret"
    assert "--no-qdrant-prefer-grpc" in _help(RetrievalSettings, capsys)  # a boolean can be turned off


def _help(cls, capsys) -> str:
    from services.runtime.settings import settings_from_cli

    with pytest.raises(SystemExit):
        settings_from_cli(cls, "prog", ["--help"])
    return capsys.readouterr().out


def test_every_setting_of_every_process_is_described():
    from gateway.config import GatewaySettings
    from services.embedding.config import EmbeddingSettings
    from services.ocr.config import OcrSettings
    from services.reasoning.config import ReasoningSettings
    from services.retrieval.config import RetrievalSettings

    missing = [f"{cls.__name__}.{name}" for cls in (EmbeddingSettings, RetrievalSettings, ReasoningSettings,
                                                    OcrSettings, GatewaySettings)
               for name, field in cls.model_fields.items() if not (field.description or "").strip()]
    assert not missing, missing


def test_every_key_of_every_process_is_a_secret_and_never_a_flag():
    from pydantic import SecretStr

    from gateway.config import GatewaySettings
    from services.embedding.config import EmbeddingSettings
    from services.ocr.config import OcrSettings
    from services.reasoning.config import ReasoningSettings
    from services.retrieval.config import RetrievalSettings

    keys = {f"{cls.__name__}.{name}": field.annotation for cls in (EmbeddingSettings, RetrievalSettings,
                                                                   ReasoningSettings, OcrSettings, GatewaySettings)
            for name, field in cls.model_fields.items() if name.endswith(("api_key", "api_keys"))}
    assert len(keys) >= 6, keys
    assert all(kind is SecretStr for kind in keys.values()), keys
