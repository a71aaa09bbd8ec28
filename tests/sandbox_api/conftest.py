"""A real orsbox server with the sandbox API on, and `openreward` clients pointed at it.

Two client tokens, so tests can play two clients; the image allow-list is the default
(orsbox's own images). Every test here needs Docker."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from openreward import OpenReward
from openreward.api.sandboxes.types import SandboxSettings

from tests.servers import LiveServer, start_server

TOKEN_A = "client-a-token-0123456789"
TOKEN_B = "client-b-token-9876543210"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/sandbox_api" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


def sandbox_settings(image: str, **fields: object) -> SandboxSettings:
    values: dict[str, object] = {
        "environment": "orsbox/tests",
        "image": image,
        "machine_size": "1:1",
        "block_network": True,
    }
    values.update(fields)
    return SandboxSettings(**values)  # type: ignore[arg-type]


def api_server_settings(**more: object) -> dict[str, object]:
    settings: dict[str, object] = {
        "sandbox_api": 1,
        "sandbox_tokens": json.dumps([TOKEN_A, TOKEN_B]),
        "reap_interval_s": 0.5,
    }
    settings.update(more)
    return settings


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("sandbox-api")
    server = start_server(
        ["tests/fixture_envs/protocol_envs.py:Protocol"], tmp, **api_server_settings()
    )
    yield server
    server.stop()


@pytest.fixture
def session_url(api_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", api_server.url)
    os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    return api_server.url


@pytest.fixture
def client(session_url: str) -> OpenReward:
    return OpenReward(api_key=TOKEN_A)


@pytest.fixture
def other_client(session_url: str) -> OpenReward:
    return OpenReward(api_key=TOKEN_B)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the openreward client is aiohttp, asyncio only
