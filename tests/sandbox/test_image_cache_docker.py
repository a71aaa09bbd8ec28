"""The image cache (`orsbox.sandbox.image_cache`) over the real Docker backend and a
loopback registry (tests/registry.py): sessions that need one missing image together
cause one pull, as the metric counts it; a budget of two images with five used in turn
evicts in LRU order and never an image a live sandbox runs from; an image a setup
snapshot was committed from counts as in use.

The images are made here: FROM orsbox/base with a layer of 4 MB of random data and a
label of this run, pushed to the registry and removed from the engine, so each use is a
real pull. Everything labelled is removed at the end."""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from collections.abc import Iterator

import docker
import docker.errors
import pytest
from prometheus_client.parser import text_string_to_metric_families

from orsbox.errors import ImageNotFound
from orsbox.formats.swebench.images import pull
from orsbox.monitoring.metrics import Metrics
from orsbox.sandbox import Sandbox, SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.image_cache import ImageCachingBackend
from tests.registry import local_registry

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

LABEL = "orsbox.test.image-cache"
BLOB_MB = 4


@pytest.fixture(scope="module")
def run_label(docker_client: docker.DockerClient) -> Iterator[str]:
    token = uuid.uuid4().hex[:12]
    yield token
    for image in docker_client.images.list(filters={"label": f"{LABEL}={token}"}):
        for tag in image.tags or [image.id]:
            with contextlib.suppress(docker.errors.APIError):
                docker_client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def pushed(
    tmp_path_factory: pytest.TempPathFactory,
    base_image: str,
    docker_client: docker.DockerClient,
    run_label: str,
) -> Iterator[list[str]]:
    """Five images on the loopback registry, each its own random layer: built and
    pushed once for the module's tests."""
    with local_registry(tmp_path_factory.mktemp("registry")) as registry:
        names = []
        for n in range(5):
            name = f"{registry}/orsbox-test/cache-{run_label}-{n}:1"
            dockerfile = (
                f"FROM {base_image}\nLABEL {LABEL}={run_label}\n"
                f"USER root\nRUN head -c {BLOB_MB}M /dev/urandom > /blob-{n}\nUSER orsbox\n"
            )
            docker_client.images.build(
                fileobj=io.BytesIO(dockerfile.encode()), tag=name, rm=True, forcerm=True
            )
            for event in docker_client.api.push(name, stream=True, decode=True):
                assert "error" not in event, event
            names.append(name)
        yield names


@pytest.fixture
def registered(pushed: list[str], docker_client: docker.DockerClient) -> list[str]:
    """The five images on the registry only: gone from the engine (as pushed, or pulled
    by an earlier test), so each use is a real pull."""
    for name in pushed:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(name, force=True)
    return pushed


async def episode(backend: ImageCachingBackend, image: str, session: str) -> Sandbox:
    """A sandbox from `image` as a SWE-bench episode's setup gets one: a start, and when
    the image is missing a pull (`orsbox.formats.swebench.images.pull`) and a start."""
    spec = SandboxSpec(image=image, session_id=session)
    try:
        return await backend.start(spec)
    except ImageNotFound:
        await pull(backend, image)
        return await backend.start(spec)


def scraped(metrics: Metrics) -> dict[str, float]:
    text = metrics.render().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("orsbox_image")
    }


async def test_concurrent_sessions_of_one_missing_image_cause_one_pull(
    registered: list[str], docker_client: docker.DockerClient
) -> None:
    backend = ImageCachingBackend(DockerBackend(server_id=f"test-cache-{uuid.uuid4().hex[:8]}"))
    metrics = Metrics()
    metrics.watch_images(lambda: backend.cache.stats)
    image = registered[0]
    try:
        sandboxes = await asyncio.gather(*(episode(backend, image, f"s{n}") for n in range(4)))
        for sandbox in sandboxes:
            assert (await sandbox.exec(["test", "-f", "/blob-0"])).exit_code == 0
            await sandbox.close()
    finally:
        await backend.close()
    samples = scraped(metrics)
    assert samples["orsbox_image_pulls_total"] == 1, samples
    assert samples["orsbox_image_cache_misses_total"] == 4, samples
    assert samples["orsbox_image_pulled_bytes_total"] > BLOB_MB * 1024**2, samples
    assert samples["orsbox_images_pulled"] == 1, samples


async def test_a_budget_of_two_images_evicts_in_lru_order_never_one_in_use(
    registered: list[str], docker_client: docker.DockerClient
) -> None:
    size = max(sizes(docker_client, registered[:1]))  # each: the base and its own layer
    backend = ImageCachingBackend(
        DockerBackend(server_id=f"test-cache-{uuid.uuid4().hex[:8]}"), budget_bytes=int(2.5 * size)
    )
    i0, i1, i2, i3, i4 = registered
    try:
        live = await episode(backend, i0, "live")  # runs while the others come and go
        assert backend.cache.stats.disk_bytes == size
        for n, image in enumerate((i1, i2, i3, i4), start=1):
            sandbox = await episode(backend, image, f"turn-{n}")
            await sandbox.close()
        assert backend.cache.stats.evicted == [i1, i2, i3]  # i0 was LRU, but in use
        assert docker_client.images.get(i0) and (await live.exec(["true"])).exit_code == 0
        await live.close()
        sandbox = await episode(backend, i1, "again")  # i0 free now, least recently used
        await sandbox.close()
        assert backend.cache.stats.evicted == [i1, i2, i3, i0]
        assert backend.cache.lru_order() == [i4, i1]
        present = {n for n in registered if backend_has(docker_client, n)}
        assert present == {i4, i1}
    finally:
        await backend.close()


async def test_an_image_a_snapshot_was_committed_from_is_in_use(
    registered: list[str], docker_client: docker.DockerClient, run_label: str
) -> None:
    backend = ImageCachingBackend(DockerBackend(server_id=f"test-cache-{uuid.uuid4().hex[:8]}"))
    try:
        sandbox = await episode(backend, registered[2], "snap")
        snapshots = backend.snapshots
        assert snapshots is not None
        snapshot = await snapshots.commit(
            sandbox, kind="test", name="cache", labels={LABEL: run_label}
        )
        await sandbox.close()
        parent = docker_client.images.get(registered[2]).id
        assert parent in await backend.images.in_use()
        await snapshots.remove(snapshot.ref)
    finally:
        await backend.close()


def sizes(client: docker.DockerClient, names: list[str]) -> list[int]:
    """The images' sizes as the engine reports them (each is pulled to be measured, then
    removed again)."""
    found = []
    for name in names:
        client.images.pull(name)
        found.append(int(client.api.inspect_image(name)["Size"]))
        client.images.remove(name)
    return found


def backend_has(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True
