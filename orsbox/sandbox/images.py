"""Images, whatever engine holds them: how to build one, and the store a backend keeps.

An `ImageRecipe` names a tag and the Dockerfile (with its context folder) that builds
it, the parent passed as `ARG BASE_IMAGE`. An `ImageStore` is a backend's images
(`SandboxBackend.images`): is one there, pull it, build a recipe, read its labels or a
folder out of it, list and remove them. The Docker backend's store is the configured
engine's (`orsbox.sandbox.docker.image_store`), the fake's an honest record in memory
(`orsbox.sandbox.fake.images`). Images a sandbox was saved into are the backend's
`SnapshotStore` (`orsbox.sandbox.snapshots`), not this store's.

`ensure_built` is the one "build it unless it is there" every caller shares.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orsbox.errors import ImageNotFound, SandboxError

BASE_IMAGE = "orsbox/base:latest"  # what sandboxes run in unless an environment says
LOCAL_DEBIAN = "orsbox/debian:bookworm"  # made without a registry (make-local-base.sh)
BUILD_TIMEOUT_S = 1800

BuildLog = Callable[[str], None]  # called with each whole line of build output


@dataclass(frozen=True)
class ImageRecipe:
    """How to build one image: the Dockerfile in `context`, `--build-arg
    BASE_IMAGE=<base_image>`."""

    tag: str
    context: Path
    dockerfile: Path
    base_image: str | None = None  # None: the Dockerfile's own default
    origin: str = ""  # what declares it, for messages: a folder or a manifest
    timeout_s: float = BUILD_TIMEOUT_S  # a task may set its own (Harbor's build_timeout_sec)
    network_mode: str | None = None  # "none": the build's RUN steps get no network at all

    @classmethod
    def of_folder(cls, tag: str, folder: Path) -> ImageRecipe:
        """The recipe of a folder holding a `Dockerfile`, the folder as its context."""
        return cls(tag, folder, folder / "Dockerfile", origin=str(folder))


@dataclass(frozen=True)
class ImageInfo:
    """One image as a store lists it."""

    id: str
    tags: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    created: float = 0.0  # unix time
    size_bytes: int = 0


class ImageStore(abc.ABC):
    """The images a backend starts sandboxes from. Failures are `SandboxError`s (an
    unreachable engine, a registry's refusal), `ImageNotFound` for a missing image and
    `ImageBuildError` for a failed build."""

    @abc.abstractmethod
    async def has(self, ref: str) -> bool:
        """Whether the image is there; a string that is no image reference at all (a
        path, a module name) is simply not one."""

    @abc.abstractmethod
    async def pull(self, ref: str, progress: Callable[[str], None] | None = None) -> None:
        """Fetch `ref` from its registry, calling `progress` with a line now and then."""

    @abc.abstractmethod
    async def build(self, recipe: ImageRecipe, log: BuildLog) -> float:
        """Build `recipe`, each whole line of output (no terminal escapes) to `log`;
        return the seconds it took. A failed build leaves no image of its own making
        and raises `ImageBuildError` with its last lines."""

    @abc.abstractmethod
    async def make_local_base(self, log: BuildLog) -> None:
        """Make `LOCAL_DEBIAN` from Debian's mirror (no registry needed)."""

    @abc.abstractmethod
    async def remove(self, refs: Sequence[str]) -> int:
        """Remove these images (never forced); return how many went. One a sandbox
        still runs from stays."""

    @abc.abstractmethod
    async def list(self, labels: dict[str, str] | None = None) -> list[ImageInfo]:
        """The images carrying every one of `labels` (every tagged image when None)."""

    @abc.abstractmethod
    async def labels(self, ref: str) -> dict[str, str]:
        """The image's labels."""

    @abc.abstractmethod
    async def image_id(self, ref: str) -> str:
        """The immutable id of `ref` (a tag can be moved to a rebuilt image)."""

    @abc.abstractmethod
    async def read_folder(self, ref: str, path: str) -> bytes:
        """A tar of folder `path` in the image, read without running anything of it."""

    async def push(
        self, ref: str, target: str, progress: Callable[[str], None] | None = None
    ) -> int:
        """Send `ref` to a registry as `target` (`HOST:PORT/name:tag`), calling `progress`
        with a line now and then; return the bytes sent. `ImageNotFound` when the store
        lacks `ref`, `SandboxError` when the registry refuses it or the store cannot push."""
        raise SandboxError(f"{type(self).__name__} cannot push images to a registry")

    async def offline_builds(self) -> str | None:
        """Why this store's builds reach no network (a sentence naming the engine), or
        None when nothing says so; the caller may then build elsewhere and `copy_from`."""
        return None

    async def copy_from(self, source: ImageStore, refs: Sequence[str]) -> None:
        """Copy images `refs` from `source`, another store of the same kind."""
        raise SandboxError(f"{type(self).__name__} cannot copy images from another store")

    async def size(self, ref: str) -> int:
        """The bytes the image takes on disk (layers it shares with others included);
        `ImageNotFound` when it is not there."""
        found = [i for i in await self.list() if ref in i.tags or i.id == ref]
        if not found:
            raise ImageNotFound(f"image {ref!r} not found")
        return found[0].size_bytes

    async def in_use(self) -> set[str]:
        """Ids (or refs) of the images that must stay: a sandbox (of any state) runs
        from it, or another image is built on it (a snapshot). A store that cannot tell
        answers with every image it holds, so nothing is evicted."""
        return {i.id for i in await self.list()}


def provide_hint(image: str) -> str:
    """How an operator makes `image` available to a server that could not pull it."""
    return (
        f"Provide it: push it to a registry this server's engine pulls from, `docker pull "
        f"{image}` where a registry answers, `docker load -i FILE.tar` from a saved copy, a "
        f"`docker build -t {image} ...`, or map the name onto an image you have with "
        f"`--image-map {image}=LOCAL` (or ORSBOX_IMAGE_MAP)"
    )


async def ensure_built(
    images: ImageStore, recipe: ImageRecipe, log: BuildLog, *, force: bool = False
) -> bool:
    """Build `recipe` unless its tag is there (always with `force`); True when built."""
    if not force and await images.has(recipe.tag):
        return False
    await images.build(recipe, log)
    return True
