"""Fixtures for the sandbox tests: the backend under test, a backend and a sandbox. The
Docker client, the base image and the no-leftover check live in tests/conftest.py.

The conformance modules (marked `conformance`: the contract, the persistent shell, exec
and files, images, capabilities) run once per backend declared in tests/under_test/
(`BACKENDS`): the fake, runc on the main engine, runsc (gVisor) and Podman on private
engines, and any backend that adds a module of its own there. Each test gets the one it runs on as `under_test` and never asks which it is:
a test that cannot hold on one calls `under_test.differs(name)`, a skip naming the
documented difference (docs/gvisor.md, docs/backends.md). Other modules get runc."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orsbox.sandbox import Sandbox, SandboxBackend, SandboxSpec
from tests.runtimes import BackendUnderTest
from tests.under_test import BACKENDS, UNDER_TEST

BASE_IMAGE = "orsbox/base:latest"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    conformance = metafunc.definition.get_closest_marker("conformance") is not None
    if conformance and "under_test" in metafunc.fixturenames:
        params = [pytest.param(name, marks=UNDER_TEST[name].marks) for name in BACKENDS]
        metafunc.parametrize("under_test", params, indirect=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def under_test(request: pytest.FixtureRequest) -> BackendUnderTest:
    return UNDER_TEST[getattr(request, "param", "runc")]


@pytest.fixture
async def backend(
    request: pytest.FixtureRequest, under_test: BackendUnderTest
) -> AsyncIterator[SandboxBackend]:
    for fixture in under_test.fixtures:
        request.getfixturevalue(fixture)
    backend = under_test.make()
    # As a server has it: its start-up sweep reached the engine, which says what it is
    # (`capabilities` on Podman are exact from then on: orsbox/sandbox/docker/podman.py)
    assert await backend.health() is None
    yield backend
    await backend.close()


@pytest.fixture
async def sandbox(backend: SandboxBackend, under_test: BackendUnderTest) -> AsyncIterator[Sandbox]:
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, session_id="test"))
    yield sandbox
    await sandbox.close()
    assert under_test.outside.left_behind(sandbox) == [], "processes left behind"
