"""Inspect's own conformance suite for sandbox providers, run against `sandbox="orsbox"`.

`inspect_ai.util._sandbox.self_check` is the suite Inspect runs against its Docker and
local providers; its module docstring asks a provider to import the checks and supply a
`sandbox_env` fixture, marking what it cannot satisfy as xfails named in that fixture.
Here every check runs twice: sandboxes started in-process on the local engine, and API
sandboxes of a real orsbox server reached by URL and token. (Its exec checks under
gVisor and on Podman: test_inspect_private_engines.py.)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="pip install -e '.[inspect]'")

from inspect_ai.util._sandbox.self_check import *  # noqa: F403

from orsbox.integrations.inspect import OrsboxSandboxConfig
from orsbox.integrations.inspect.provider import OrsboxSandboxEnvironment
from tests.servers import start_server

pytestmark = pytest.mark.anyio
TOKEN = "inspect-self-check-token-0123456789"

# Checks orsbox does not satisfy on purpose, with the reason.
HARDENED_ROOT = (
    "adding a user needs root's capabilities, which orsbox's hardened sandboxes drop "
    "(CapEff 0: groupadd cannot write /etc/gshadow); exec as an existing user works"
)
KNOWN_GAPS: dict[str, dict[str, str]] = {
    "in-process": {"test_exec_as_user": HARDENED_ROOT},
    "server": {"test_exec_as_user": HARDENED_ROOT},
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=["in-process", "server"])
async def provider_env(
    request: pytest.FixtureRequest, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[str, OrsboxSandboxEnvironment]]:
    server = None
    config = OrsboxSandboxConfig()
    if request.param == "server":
        tmp: Path = tmp_path_factory.mktemp("inspect-server")
        server = start_server(
            ["tests/fixture_envs/protocol_envs.py:Protocol"],
            tmp,
            sandbox_api=1,
            sandbox_tokens=json.dumps([TOKEN]),
            max_body_bytes=16 * 1024 * 1024,
        )
        config = OrsboxSandboxConfig(url=server.url, token=TOKEN)
    try:
        async with provider(config) as environment:
            yield request.param, environment
    finally:
        if server is not None:
            server.stop()


@contextlib.asynccontextmanager
async def provider(config: OrsboxSandboxConfig) -> AsyncIterator[OrsboxSandboxEnvironment]:
    """One sample's sandbox as Inspect starts and cleans it up."""
    environments = await OrsboxSandboxEnvironment.sample_init("self-check", config, {})
    environment = environments["default"]
    assert isinstance(environment, OrsboxSandboxEnvironment)
    try:
        yield environment
    finally:
        await OrsboxSandboxEnvironment.sample_cleanup("self-check", config, environments, False)
        await OrsboxSandboxEnvironment.task_cleanup("self-check", config, True)


@pytest.fixture
async def sandbox_env(
    request: pytest.FixtureRequest, provider_env: tuple[str, OrsboxSandboxEnvironment]
) -> AsyncIterator[OrsboxSandboxEnvironment]:
    mode, environment = provider_env
    reason = KNOWN_GAPS[mode].get(request.node.originalname)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    yield environment
