"""Fixtures for the SWE-bench format: the test images (built once, removed after the
session), a dataset file per family, and episodes played in-process on a real Docker
backend (the server and CLI tests play them over HTTP)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orsbox.authoring.environment import EnvironmentContext
from orsbox.authoring.standard_tools import BashParams, WriteFileParams
from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.formats.options import FormatOptions
from orsbox.formats.swebench import load
from orsbox.formats.swebench.environment import SWEDatasetEnvironment
from orsbox.protocol.types import ToolOutput
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.image_map import ImageMap
from tests.formats.swebench import images

# image/repo is the instance images' repository: its tests run inside them, not here
collect_ignore = ["image"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def options(**changes: Any) -> FormatOptions:
    return FormatOptions(image_map=ImageMap.parse(images.IMAGE_MAP), **changes)


def load_one(path: Path, **changes: Any) -> type[SWEDatasetEnvironment]:
    (env,) = load(path, options(**changes))
    assert issubclass(env, SWEDatasetEnvironment)
    return env


class Episode:
    """One episode of a dataset environment, driven the way the server drives it."""

    def __init__(self, env: SWEDatasetEnvironment) -> None:
        self.env = env

    async def bash(self, command: str) -> str:
        out = await self.env.bash(BashParams(command=command))  # type: ignore[attr-defined]
        return str(out.blocks[0].text)

    async def write(self, path: str, content: str) -> None:
        await self.env.write_file(WriteFileParams(path=path, content=content))  # type: ignore[attr-defined]

    async def apply(self, patch: str) -> None:
        await self.write("/tmp/agent.diff", patch)
        out = await self.bash("cd /testbed 2>/dev/null; git apply /tmp/agent.diff && echo APPLIED")
        assert "APPLIED" in out, out

    async def submit(self) -> ToolOutput:
        return await self.env.submit()  # type: ignore[no-any-return]


@pytest.fixture
async def backend(test_images: list[str]) -> AsyncIterator[DockerBackend]:
    backend = DockerBackend()
    yield backend
    await backend.close()


@pytest.fixture
def play(backend: DockerBackend) -> Any:
    """`async with play(env_cls, instance_id) as episode:` a set-up episode, torn down after;
    `clock`: the host's clock, which the episode's time limit reads."""
    import contextlib

    @contextlib.asynccontextmanager
    async def episode(
        env_cls: type[SWEDatasetEnvironment], instance_id: str, clock: Clock = SYSTEM_CLOCK
    ) -> Any:
        env = env_cls({"instance_id": instance_id})
        session = uuid.uuid4().hex[:12]
        env.orsbox_context = EnvironmentContext(session, sandbox_backend=backend, clock=clock)
        try:
            await env.setup()
            yield Episode(env)
        finally:
            await env.teardown()

    return episode
