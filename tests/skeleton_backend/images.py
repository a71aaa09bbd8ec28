"""The skeleton's images: a registry, as an `ImageStore` (none answers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from orsbox.sandbox.images import BuildLog, ImageInfo, ImageRecipe, ImageStore


class SkeletonImages(ImageStore):
    async def has(self, ref: str) -> bool:
        raise NotImplementedError("HEAD the manifest in the registry")

    async def pull(self, ref: str, progress: Callable[[str], None] | None = None) -> None:
        raise NotImplementedError("nothing to do: the kubelet pulls")

    async def build(self, recipe: ImageRecipe, log: BuildLog) -> float:
        raise NotImplementedError("refused: build on a workstation and push")

    async def make_local_base(self, log: BuildLog) -> None:
        raise NotImplementedError("refused: push orsbox/debian:bookworm to the registry")

    async def remove(self, refs: Sequence[str]) -> int:
        raise NotImplementedError("the registry's delete API, where it allows one")

    async def list(self, labels: dict[str, str] | None = None) -> list[ImageInfo]:
        raise NotImplementedError("the registry's catalog")

    async def labels(self, ref: str) -> dict[str, str]:
        raise NotImplementedError("the image config's labels")

    async def image_id(self, ref: str) -> str:
        raise NotImplementedError("the manifest's digest")

    async def read_folder(self, ref: str, path: str) -> bytes:
        raise NotImplementedError("a pod that tars the folder")
