"""Fixtures for the sandbox tests: a backend and a sandbox. The Docker client, the base
image and the no-leftover check live in tests/conftest.py.

The conformance modules (marked `conformance`: the persistent shell, exec and files,
parts of the lifecycle) run once per runtime in `tests/runtimes.py`: runc on the main
engine, runsc (gVisor) on the private engine scripts/start-runsc-engine.sh starts. A
test that cannot hold under one runtime calls `differs(backend, name)`, a skip naming
the documented difference (`GVISOR_DIFFERENCES`, docs/gvisor.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend, DockerSandbox
from tests.runtimes import RUNTIMES, docker_backend, runtime_available


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    conformance = metafunc.definition.get_closest_marker("conformance") is not None
    if conformance and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", RUNTIMES, indirect=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def backend(request: pytest.FixtureRequest, base_image: str) -> AsyncIterator[DockerBackend]:
    runtime = getattr(request, "param", "runc")
    runtime_available(runtime)
    backend = docker_backend(runtime)
    yield backend
    await backend.close()


@pytest.fixture
async def sandbox(backend: DockerBackend, base_image: str) -> DockerSandbox:
    return await backend.start(SandboxSpec(image=base_image, session_id="test"))
