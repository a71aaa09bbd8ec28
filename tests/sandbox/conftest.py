"""Fixtures for the Docker sandbox tests: a backend and a sandbox. The Docker client,
the base image and the no-leftover check live in tests/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend, DockerSandbox


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def backend(base_image: str) -> AsyncIterator[DockerBackend]:
    backend = DockerBackend()
    yield backend
    await backend.close()


@pytest.fixture
async def sandbox(backend: DockerBackend, base_image: str) -> DockerSandbox:
    return await backend.start(SandboxSpec(image=base_image, session_id="test"))
