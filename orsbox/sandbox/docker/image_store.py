"""`DockerImages`: the image store of one Docker engine, the one its backend is configured
for (`DockerBackend.images`). Every call runs off the event loop through the backend's
`Engine`; a pull and a build, which may print nothing for minutes, get connections that
wait that long."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from orsbox.sandbox.docker import images as docker_images
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.docker.push import push_image
from orsbox.sandbox.images import BuildLog, ImageInfo, ImageRecipe, ImageStore

PULL_READ_TIMEOUT_S = 600.0  # a pull may print nothing this long (a big layer extracting)
PUSH_READ_TIMEOUT_S = 600.0  # likewise a push (a big layer compressing)
BUILD_READ_TIMEOUT_S = 300.0  # calls around a build (removing a failed build's images)
LOAD_READ_TIMEOUT_S = 600.0  # a load answers once its layers are in (843 MB: 20-50 s)


class DockerImages(ImageStore):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def has(self, ref: str) -> bool:
        return await self.engine.run(
            f"look up image {ref}", docker_images.has_image, self.engine.client, ref
        )

    async def pull(self, ref: str, progress: Callable[[str], None] | None = None) -> None:
        """`progress` is called from a worker thread."""

        def pull() -> None:
            with self.engine.patient_client(PULL_READ_TIMEOUT_S) as client:
                docker_images.pull_image(client, ref, progress)

        await anyio.to_thread.run_sync(pull)

    async def push(
        self, ref: str, target: str, progress: Callable[[str], None] | None = None
    ) -> int:
        """`progress` is called from a worker thread."""

        def push() -> int:
            with self.engine.patient_client(PUSH_READ_TIMEOUT_S) as client:
                return push_image(client, ref, target, progress)

        return await anyio.to_thread.run_sync(push)

    async def build(self, recipe: ImageRecipe, log: BuildLog) -> float:
        """`log` is called from a worker thread."""

        def build() -> float:
            with self.engine.patient_client(BUILD_READ_TIMEOUT_S) as client:
                return docker_images.build_image(client, recipe, log)

        return await anyio.to_thread.run_sync(build)

    async def offline_builds(self) -> str | None:
        return await self.engine.run(
            "inspect the default bridge",
            docker_images.offline_builds,
            self.engine.client,
            self.engine.address or "DOCKER_HOST",
        )

    async def copy_from(self, source: ImageStore, refs: Sequence[str]) -> None:
        """`docker save | docker load` from `source`'s engine, streamed."""
        if not isinstance(source, DockerImages):
            await super().copy_from(source, refs)
            return

        def copy() -> None:
            with (
                source.engine.patient_client(LOAD_READ_TIMEOUT_S) as sender,
                self.engine.patient_client(LOAD_READ_TIMEOUT_S) as receiver,
            ):
                docker_images.copy_images(sender, receiver, list(refs))

        await anyio.to_thread.run_sync(copy)

    async def make_local_base(self, log: BuildLog) -> None:
        make = functools.partial(docker_images.make_local_debian, log, self.engine.address)
        await anyio.to_thread.run_sync(make)

    async def remove(self, refs: Sequence[str]) -> int:
        removed = 0
        for ref in refs:
            removed += await self.engine.remove_image(ref)
        return removed

    async def list(self, labels: dict[str, str] | None = None) -> list[ImageInfo]:
        wanted = [f"{k}={v}" for k, v in (labels or {}).items()]
        api = self.engine.client.api
        listing = functools.partial(api.images, filters={"label": wanted} if wanted else None)
        return [to_info(image) for image in await self.engine.run("list images", listing)]

    async def labels(self, ref: str) -> dict[str, str]:
        found = await self.engine.inspect_image(ref)
        return dict((found.get("Config") or {}).get("Labels") or {})

    async def image_id(self, ref: str) -> str:
        return str((await self.engine.inspect_image(ref))["Id"])

    async def size(self, ref: str) -> int:
        return int((await self.engine.inspect_image(ref)).get("Size") or 0)

    async def in_use(self) -> set[str]:
        """The images any container (running or not, whoever made it) was created from,
        and every image another one was made from (`docker commit` records its parent:
        a setup snapshot's or a fork's image)."""

        def read() -> set[str]:
            api = self.engine.client.api
            used = {str(c.get("ImageID") or "") for c in api.containers(all=True)}
            used.update(str(i.get("ParentId") or "") for i in api.images(all=True))
            return used - {""}

        return await self.engine.run("list the images in use", read)

    async def read_folder(self, ref: str, path: str) -> bytes:
        return await self.engine.run(
            f"read {path} from image {ref}",
            docker_images.read_folder,
            self.engine.client,
            ref,
            path,
        )


def to_info(image: dict[str, Any]) -> ImageInfo:
    tags = tuple(t for t in image.get("RepoTags") or [] if t != "<none>:<none>")
    return ImageInfo(
        id=image["Id"],
        tags=tags,
        labels=dict(image.get("Labels") or {}),
        created=float(image.get("Created") or 0),
        size_bytes=int(image.get("Size") or 0),
    )
