"""The image cache (`orsbox.sandbox.image_cache`) on the fake backend's store: one pull
per image however many sessions want it, a failed pull fails them all with the image's
name and the way to provide it, and the disk budget evicts the least recently used
pulled image, never one in use nor one the server did not pull. The same against a real
engine and registry: tests/containers/test_image_cache_docker.py."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from orsbox.cli.main import app
from orsbox.errors import ImageNotFound
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.fake import FakeBackend, FakeSandbox
from orsbox.sandbox.image_cache import ImageCachingBackend, ImagePullFailed
from orsbox.sandbox.images import BASE_IMAGE
from orsbox.server import create_app
from orsbox.settings import Settings
from tests.fixture_envs.protocol_envs import Protocol

pytestmark = pytest.mark.anyio

MB = 1024**2


def cached(registry: dict[str, int], budget: int | None = None) -> ImageCachingBackend:
    fake = FakeBackend()
    fake.images.registry.update(registry)
    return ImageCachingBackend(fake, budget_bytes=budget)


async def until_pulling(backend: ImageCachingBackend, count: int) -> None:
    """Until the fake store has been asked for `count` pulls (polling the loop)."""
    for _ in range(1000):
        if len(backend.backend.images.pulled) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"pulls asked for: {backend.backend.images.pulled}")


async def test_concurrent_pulls_of_one_image_share_one_pull() -> None:
    backend = cached({"reg/a:1": 10 * MB})
    backend.backend.images.gate = gate = asyncio.Event()
    waiters = [asyncio.create_task(backend.pull_image("reg/a:1")) for _ in range(8)]
    await until_pulling(backend, 1)
    for _ in range(10):  # every waiter has reached the shared pull, none started another
        await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    gate.set()
    await asyncio.gather(*waiters)
    assert backend.backend.images.pulled == ["reg/a:1"]
    stats = backend.cache.stats
    assert (stats.pulls, stats.bytes_pulled, stats.images) == (1, 10 * MB, 1)
    assert await backend.images.has("reg/a:1")


async def test_a_pull_asked_for_once_the_image_is_there_pulls_nothing() -> None:
    """A session whose start missed the image just before another's pull ended."""
    backend = cached({"reg/a:1": MB})
    await backend.pull_image("reg/a:1")
    await backend.pull_image("reg/a:1")
    assert backend.backend.images.pulled == ["reg/a:1"] and backend.cache.stats.pulls == 1


async def test_a_waiter_cancelled_does_not_stop_the_others_pull() -> None:
    backend = cached({"reg/a:1": MB})
    backend.backend.images.gate = gate = asyncio.Event()
    first = asyncio.create_task(backend.pull_image("reg/a:1"))
    second = asyncio.create_task(backend.pull_image("reg/a:1"))
    await until_pulling(backend, 1)
    first.cancel()
    gate.set()
    await second
    assert first.cancelled() and await backend.images.has("reg/a:1")


async def test_a_failed_pull_fails_every_waiter_with_the_name_and_the_hint() -> None:
    backend = cached({})
    backend.backend.images.gate = gate = asyncio.Event()
    waiters = [asyncio.create_task(backend.pull_image("reg/gone:1")) for _ in range(5)]
    await until_pulling(backend, 1)
    gate.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert backend.backend.images.pulled == ["reg/gone:1"]
    for error in results:
        assert isinstance(error, ImagePullFailed), error
        text = str(error)
        assert "image reg/gone:1 is not on this machine and could not be pulled" in text
        assert "no such image" in text  # the registry's own words
        assert "--image-map reg/gone:1=LOCAL" in text and "docker load" in text
    assert backend.cache.stats.pull_failures == 1
    backend.backend.images.registry["reg/gone:1"] = MB  # pushed meanwhile: the next one pulls
    await backend.pull_image("reg/gone:1")
    assert backend.backend.images.pulled == ["reg/gone:1", "reg/gone:1"]


async def use(backend: ImageCachingBackend, image: str, *, pull: bool = True) -> None:
    """One episode of `image`: its pull (when missing), its sandbox started and closed."""
    if pull:
        await backend.pull_image(image)
    await (await backend.start(SandboxSpec(image=image, session_id=image))).close()


async def test_past_the_budget_the_least_recently_used_pulled_image_goes() -> None:
    images = {f"reg/i{n}:1": 10 * MB for n in range(5)}
    backend = cached(images, budget=20 * MB)  # two images
    evicted = []
    for n in (0, 1):
        await use(backend, f"reg/i{n}:1")
    await use(backend, "reg/i0:1", pull=False)  # i0 used again: i1 is the older
    await use(backend, "reg/i2:1")
    evicted.append(list(backend.cache.stats.evicted))
    await use(backend, "reg/i3:1")  # then i0
    evicted.append(list(backend.cache.stats.evicted))
    assert evicted == [["reg/i1:1"], ["reg/i1:1", "reg/i0:1"]]
    assert backend.cache.lru_order() == ["reg/i2:1", "reg/i3:1"]
    assert backend.cache.stats.disk_bytes == 20 * MB and backend.cache.stats.evictions == 2
    assert not await backend.images.has("reg/i1:1") and not await backend.images.has("reg/i0:1")
    assert await backend.images.has(BASE_IMAGE), "an image the server did not pull went"


async def test_an_image_a_live_sandbox_runs_from_is_never_evicted() -> None:
    backend = cached({f"reg/i{n}:1": 10 * MB for n in range(5)}, budget=20 * MB)
    await backend.pull_image("reg/i0:1")
    live = await backend.start(SandboxSpec(image="reg/i0:1", session_id="live"))
    for n in (1, 2, 3):
        await use(backend, f"reg/i{n}:1")
    assert await backend.images.has("reg/i0:1")
    assert backend.cache.stats.evicted == ["reg/i1:1", "reg/i2:1"]  # i0 was older: in use
    await live.close()
    await use(backend, "reg/i4:1")  # free now, and the least recently used: it goes
    assert backend.cache.stats.evicted[-1] == "reg/i0:1"
    assert backend.cache.lru_order() == ["reg/i3:1", "reg/i4:1"]


async def test_an_image_the_store_says_is_in_use_stays_over_the_budget() -> None:
    """A snapshot built on it, as the store answers (`ImageStore.in_use`)."""
    backend = cached({"reg/a:1": 30 * MB, "reg/b:1": 30 * MB}, budget=40 * MB)
    await use(backend, "reg/a:1")
    backend.backend.images.used.add("reg/a:1")
    await use(backend, "reg/b:1")  # over the budget: a is used, b is being pulled
    assert backend.cache.stats.evicted == [] and await backend.images.has("reg/a:1")
    assert backend.cache.stats.disk_bytes == 60 * MB  # over, and said so in the log


class FakeEngine(FakeBackend):
    """The fake backend, its starts refused for an image its store lacks (as an
    engine's are)."""

    async def start(self, spec: SandboxSpec) -> FakeSandbox:
        if not await self.images.has(spec.image):
            raise ImageNotFound(f"image {spec.image!r} not found")
        return await super().start(spec)


async def test_hits_and_misses_count_sandbox_starts() -> None:
    fake = FakeEngine()
    fake.images.registry["reg/a:1"] = MB
    backend = ImageCachingBackend(fake)

    async def episode(session: str) -> None:  # as a SWE-bench episode's setup does
        spec = SandboxSpec(image="reg/a:1", session_id=session)
        try:
            sandbox = await backend.start(spec)
        except ImageNotFound:
            await backend.pull_image(spec.image)
            sandbox = await backend.start(spec)
        await sandbox.close()

    await asyncio.gather(*(episode(f"s{n}") for n in range(3)))
    await episode("later")
    stats = backend.cache.stats
    assert (stats.pulls, stats.misses, stats.hits) == (1, 3, 1)


def test_the_budget_setting_reads_sizes_as_docker_writes_them() -> None:
    assert Settings(image_disk_budget="40G").image_disk_budget == 40 * 1024**3
    assert Settings(image_disk_budget="850m").image_disk_budget == 850 * MB
    assert Settings().image_disk_budget is None
    with pytest.raises(ValueError, match="not a size"):
        Settings(image_disk_budget="lots")


def test_a_server_reports_its_pulled_images_in_metrics_and_on_its_status_page() -> None:
    fake = FakeBackend()
    fake.images.registry.update({"reg/a:1": 300 * MB, "reg/b:1": 300 * MB})
    settings = Settings(image_disk_budget="500M", record_episodes=False)
    app = create_app([Protocol], settings, sandbox_backend=fake)
    with TestClient(app) as client:
        backend = app.state.sessions.sandbox_backend  # the one every session's start uses
        for image in ("reg/a:1", "reg/b:1"):
            client.portal.call(use, backend, image)
        samples = {
            s.name: s.value
            for family in text_string_to_metric_families(client.get("/metrics").text)
            for s in family.samples
        }
        page = client.get("/").text
    assert samples["orsbox_image_pulls_total"] == 2
    assert samples["orsbox_image_pulled_bytes_total"] == 600 * MB
    assert samples["orsbox_image_evictions_total"] == 1
    assert samples["orsbox_image_disk_bytes"] == 300 * MB
    assert samples["orsbox_image_disk_budget_bytes"] == 500 * MB
    assert '<table id="images">' in page and "reg/a:1" in page  # the last evicted
    assert "300.0 MiB / 500.0 MiB" in page


async def test_an_image_pulled_for_sessions_not_yet_started_is_not_evicted() -> None:
    """Two images pulled at once past a budget of one: each stays until its session's
    sandbox has started from it (an engine's start would fail without it)."""
    fake = FakeEngine()
    fake.images.registry.update({"reg/a:1": 10 * MB, "reg/b:1": 10 * MB, "reg/c:1": 10 * MB})
    backend = ImageCachingBackend(fake, budget_bytes=10 * MB)
    await asyncio.gather(backend.pull_image("reg/a:1"), backend.pull_image("reg/b:1"))
    assert backend.cache.stats.evicted == []
    for image in ("reg/a:1", "reg/b:1"):
        await (await backend.start(SandboxSpec(image=image, session_id=image))).close()
    await backend.pull_image("reg/c:1")
    assert backend.cache.stats.evicted == ["reg/a:1", "reg/b:1"]


def test_serve_refuses_a_budget_that_is_no_size() -> None:
    result = CliRunner().invoke(app, ["serve", "--image-disk-budget", "lots"])
    assert result.exit_code == 2 and "not a size" in result.output, result.output
