"""The image store (`orsbox.sandbox.images`), one suite for every backend: the fake's
record in memory and each engine's own images (runc's main engine, the runsc and Podman
engines). A tiny recipe FROM the base image is built, found, read and removed through
`SandboxBackend.images` only; pulling is tests/formats/swebench/test_pull.py's (a
loopback registry, two engines)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orsbox.errors import ImageBuildError, ImageNotFound
from orsbox.sandbox import SandboxBackend, SandboxSpec
from orsbox.sandbox.base import BackendWrapper
from orsbox.sandbox.images import BASE_IMAGE, ImageRecipe, ImageStore, ensure_built
from tests.runtimes import BackendUnderTest

pytestmark = [pytest.mark.anyio, pytest.mark.conformance]


def tiny_recipe(folder: Path, *, parent: str = BASE_IMAGE, run: str = "") -> ImageRecipe:
    """A recipe FROM `parent` with a label of its own; a unique tag."""
    token = uuid.uuid4().hex[:12]
    steps = f"RUN {run}\n" if run else ""
    (folder / "Dockerfile").write_text(
        f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nLABEL orsbox.test.image={token}\n{steps}"
    )
    recipe = ImageRecipe.of_folder(f"orsbox-test/store:{token}", folder)
    return ImageRecipe(recipe.tag, folder, recipe.dockerfile, parent, "a test")


@pytest.fixture
async def built(backend: SandboxBackend, tmp_path: Path) -> AsyncIterator[ImageRecipe]:
    recipe = tiny_recipe(tmp_path)
    logged: list[str] = []
    await backend.images.build(recipe, logged.append)
    assert logged, "the build said nothing"
    yield recipe
    await backend.images.remove([recipe.tag])


async def test_the_base_image_is_there_and_a_non_reference_is_not_an_image(
    backend: SandboxBackend,
) -> None:
    assert await backend.images.has(BASE_IMAGE)
    assert not await backend.images.has(f"orsbox-test/absent:{uuid.uuid4().hex[:12]}")
    assert not await backend.images.has("Not An Image/../path")


async def test_a_built_image_is_there_with_its_labels(
    backend: SandboxBackend, built: ImageRecipe
) -> None:
    images: ImageStore = backend.images
    assert await images.has(built.tag)
    token = built.tag.rsplit(":", 1)[1]
    assert (await images.labels(built.tag))["orsbox.test.image"] == token
    listed = await images.list({"orsbox.test.image": token})
    assert [info.id for info in listed] == [await images.image_id(built.tag)]
    # Podman names it in full (docker.io/orsbox-test/store:...)
    assert [tag.endswith(built.tag) for tag in listed[0].tags] == [True]


async def test_a_sandbox_starts_from_a_built_image(
    backend: SandboxBackend, built: ImageRecipe
) -> None:
    sandbox = await backend.start(SandboxSpec(image=built.tag, session_id="images"))
    try:
        assert (await sandbox.exec("echo started")).output == "started\n"
    finally:
        await sandbox.close()


async def test_a_removed_image_is_gone(backend: SandboxBackend, tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path)
    await backend.images.build(recipe, lambda line: None)
    assert await backend.images.remove([recipe.tag]) == 1
    assert not await backend.images.has(recipe.tag)
    with pytest.raises(ImageNotFound):
        await backend.images.labels(recipe.tag)


async def test_ensure_built_builds_only_what_is_missing(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    recipe = tiny_recipe(tmp_path)
    try:
        assert await ensure_built(backend.images, recipe, lambda line: None)
        assert not await ensure_built(backend.images, recipe, lambda line: None)
    finally:
        await backend.images.remove([recipe.tag])


async def test_a_failed_build_raises_and_leaves_no_image(
    under_test: BackendUnderTest, backend: SandboxBackend, tmp_path: Path
) -> None:
    under_test.differs("image-steps")
    recipe = tiny_recipe(tmp_path, run="echo the-last-words && exit 3")
    with pytest.raises(ImageBuildError) as raised:
        await backend.images.build(recipe, lambda line: None)
    assert "the-last-words" in str(raised.value)
    assert not await backend.images.has(recipe.tag)


async def test_a_build_needs_its_parent(
    under_test: BackendUnderTest, backend: SandboxBackend, tmp_path: Path
) -> None:
    """The fake's one way to fail a build (an engine would look for the parent in a
    registry, which this machine has none of)."""
    under_test.differs("no-registry")
    recipe = tiny_recipe(tmp_path, parent=f"orsbox-test/no-parent:{uuid.uuid4().hex[:12]}")
    with pytest.raises(ImageBuildError, match="no-parent"):
        await backend.images.build(recipe, lambda line: None)
    assert not await backend.images.has(recipe.tag)


async def test_a_wrapped_backend_has_the_same_store_and_engine(backend: SandboxBackend) -> None:
    """The warm pool and the metered backend pass the store and the engine through."""
    wrapped = BackendWrapper(backend)
    assert wrapped.images is backend.images
    described = await wrapped.describe()
    assert described == await backend.describe() and described
