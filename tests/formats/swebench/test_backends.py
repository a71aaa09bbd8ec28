"""One SWE-bench row on every backend (docs/backends.md, "Every environment on every
backend"): the gold patch resolves it (1.0) and no change does not (0.0) under gVisor
and on Podman, played as `test_grading.py` plays it on runc. The instance image is
copied into each private engine for the module and removed after."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from orsbox.sandbox.docker import DockerBackend
from tests.formats.swebench import dataset, images
from tests.formats.swebench.conftest import load_one
from tests.runtimes import ENGINES, docker_backend, load_images, remove_images, runtime_available

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture(scope="module")
def copied(test_images: list[str]) -> Iterator[None]:
    """The instance image in every private engine, for this module."""
    load_images([images.OFFICIAL])
    yield
    remove_images([images.OFFICIAL])


@pytest.fixture(scope="module", params=list(ENGINES))
def engine(request: pytest.FixtureRequest, copied: None) -> str:
    runtime_available(request.param)
    return str(request.param)


@pytest.fixture
async def backend(engine: str) -> AsyncIterator[DockerBackend]:
    """Overrides conftest's (runc) `backend`, which `play` starts its episodes on."""
    backend = docker_backend(engine)
    yield backend
    assert await backend.list() == []  # every episode's sandbox removed at teardown
    await backend.close()


@pytest.fixture
def v4_env(tmp_path: Path) -> Any:
    return load_one(dataset.write_jsonl(tmp_path / "test.jsonl", [dataset.v4_row()]))


@pytest.mark.parametrize(("patch", "reward"), [("gold", 1.0), (None, 0.0)])
async def test_gold_resolves_and_no_change_does_not(
    v4_env: Any, play: Any, patch: str | None, reward: float
) -> None:
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        if patch is not None:
            await episode.apply(getattr(dataset.patches(), patch))
        out = await episode.submit()
    assert (out.reward, out.finished) == (reward, True), out.metadata
    assert out.metadata["FAIL_TO_PASS"]["total"] == 1
