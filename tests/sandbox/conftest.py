"""Fixtures for the sandbox tests: a backend and a sandbox. The Docker client, the base
image and the no-leftover check live in tests/conftest.py.

The conformance modules (marked `conformance`: the contract, the persistent shell, exec
and files) run once per backend in `tests/runtimes.py` (`BACKENDS`): the fake, runc on
the main engine, runsc (gVisor) and Podman on private engines. A test that cannot hold
on one of them calls `differs(backend, name)`, a skip naming the documented difference
(docs/gvisor.md, docs/backends.md). Other modules get runc."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orsbox.sandbox import Sandbox, SandboxBackend, SandboxSpec
from orsbox.sandbox.fake import MARKER, FakeSandbox, marked
from tests.runtimes import BACKENDS, conformance_backend

BASE_IMAGE = "orsbox/base:latest"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    conformance = metafunc.definition.get_closest_marker("conformance") is not None
    if conformance and "backend" in metafunc.fixturenames:
        params = [
            pytest.param(name, marks=pytest.mark.fake if name == "fake" else pytest.mark.docker)
            for name in BACKENDS
        ]
        metafunc.parametrize("backend", params, indirect=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[SandboxBackend]:
    name = getattr(request, "param", "runc")
    if name != "fake":
        request.getfixturevalue("base_image")
    backend = conformance_backend(name)
    # As a server has it: its start-up sweep reached the engine, which says what it is
    # (`capabilities` on Podman are exact from then on: orsbox/sandbox/docker/podman.py)
    assert await backend.health() is None
    yield backend
    await backend.close()


@pytest.fixture
async def sandbox(backend: SandboxBackend) -> AsyncIterator[Sandbox]:
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, session_id="test"))
    yield sandbox
    await sandbox.close()
    if isinstance(sandbox, FakeSandbox):
        assert marked(MARKER, sandbox.id) == [], "the fake left processes behind"
