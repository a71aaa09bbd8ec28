"""Harbor datasets written, built and served for the Docker tests; every image they
build and every file they write is removed at the end of the session."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from orsbox.formats import FormatOptions
from orsbox.formats.harbor import load
from orsbox.sandbox.image_map import ImageMap
from tests.environments.conftest import orsbox
from tests.formats.harbor.tasks import IMAGE_MAP, broken_dataset, episodes_dataset, harbor_dataset
from tests.formats.harbor.tb2 import TB2_IMAGE_MAP, tb2_dataset
from tests.servers import LiveServer, start_server

BUILD_TIMEOUT_S = 900
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/formats/harbor" in str(item.fspath) and "test_loading" not in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def harbor_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """This run's environment for orsbox commands: the network allowed (Terminal-Bench
    1 tasks and Harbor's template task want it; passed to commands only, so no other
    test sees it) and a cache folder of its own (for the servers too: set here)."""
    cache = str(tmp_path_factory.mktemp("harbor-cache"))
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", cache)
    yield {**os.environ, "XDG_CACHE_HOME": cache, "ORSBOX_ALLOW_NETWORK": "1"}
    patch.undo()


@pytest.fixture(scope="session")
def datasets(
    tmp_path_factory: pytest.TempPathFactory,
    harbor_env: dict[str, str],
    docker_client: docker.DockerClient,
    base_image: str,
) -> Iterator[dict[str, Path]]:
    """Task folders, their images built with `orsbox build` (removed afterwards)."""
    root = tmp_path_factory.mktemp("harbor")
    paths = {
        "check": harbor_dataset(root / "check"),
        "episodes": episodes_dataset(root / "episodes"),
        "broken": broken_dataset(root / "broken"),
        "template": FIXTURES / "template-task",
        "tb2": tb2_dataset(root / "tb2"),
    }
    tags = {tag for name, path in paths.items() for tag in _tags(path, name)}
    try:
        for name in ("episodes", "template", "tb2"):
            done = orsbox(
                "build", str(paths[name]), "--missing-only", *dataset_args(name),
                env=harbor_env, timeout=BUILD_TIMEOUT_S,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
        yield paths
    finally:
        for tag in sorted(tags):
            with contextlib.suppress(docker.errors.ImageNotFound):
                docker_client.images.remove(tag)


def dataset_args(dataset: str) -> list[str]:
    """A dataset's options: TB2-shaped tasks start from an official Python image and name
    a `docker_image` built from their Dockerfile (`--build-missing`)."""
    if dataset == "tb2":
        return ["--image-map", TB2_IMAGE_MAP, "--build-missing"]
    return ["--image-map", IMAGE_MAP]


def _tags(path: Path, dataset: str) -> list[str]:
    """The images orsbox builds for a dataset (content-hash tags: known before building)."""
    mapping = TB2_IMAGE_MAP if dataset == "tb2" else IMAGE_MAP
    options = FormatOptions(image_map=ImageMap.parse([mapping]), build_missing=dataset == "tb2")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORSBOX_ALLOW_NETWORK", "1")
        (env_cls,) = load(path, options)
    return [r.tag for r in env_cls.image_recipes()]  # type: ignore[attr-defined]


def serve_dataset(
    datasets: dict[str, Path], dataset: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """`orsbox serve` of one of the datasets as environment `name`, the network allowed."""
    server = start_server(
        [str(datasets[dataset]), *dataset_args(dataset), "--name", name],
        tmp_path_factory.mktemp(f"{dataset}-server"),
        allow_network=1,
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def episodes_server(
    tmp_path_factory: pytest.TempPathFactory, datasets: dict[str, Path]
) -> Iterator[LiveServer]:
    yield from serve_dataset(datasets, "episodes", "tb", tmp_path_factory)


@pytest.fixture(scope="module")
def tb2_server(
    tmp_path_factory: pytest.TempPathFactory, datasets: dict[str, Path]
) -> Iterator[LiveServer]:
    yield from serve_dataset(datasets, "tb2", "tb2", tmp_path_factory)
