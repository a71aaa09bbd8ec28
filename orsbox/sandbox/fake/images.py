"""`FakeImages`: the fake backend's image store, a record in memory.

Honest as far as it goes: a build needs its parent image present, reads the
Dockerfile's `LABEL`s, records the recipe (`built`) and makes the tag present; `has`,
`labels`, `list` and `remove` answer from that record. A pull finds its image in
`registry` (ref -> size; empty unless a test fills it), waiting on `gate` when a test
sets one; the images in `used` are in use (as a container's would be) and are not
removed. What it cannot do it refuses with `SandboxError` rather than pretend: an image
holds no files to read (the fake's sandboxes run on the host's).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shlex
import time
from collections.abc import Callable, Iterable, Sequence

from orsbox.errors import ImageBuildError, ImageNotFound, SandboxError
from orsbox.sandbox.images import (
    BASE_IMAGE,
    LOCAL_DEBIAN,
    BuildLog,
    ImageInfo,
    ImageRecipe,
    ImageStore,
)

FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)
ARG_DEFAULT = re.compile(r"^\s*ARG\s+BASE_IMAGE\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)
LABEL = re.compile(r"^\s*LABEL\s+(.+)$", re.IGNORECASE | re.MULTILINE)


class FakeImages(ImageStore):
    def __init__(
        self, present: Iterable[str] = (BASE_IMAGE,), registry: dict[str, int] | None = None
    ) -> None:
        self._images: dict[str, ImageInfo] = {}
        self.built: list[ImageRecipe] = []  # every recipe built, in order
        self.registry: dict[str, int] = dict(registry or {})  # what a pull finds: ref -> size
        self.pulled: list[str] = []  # every pull that ran, in order
        self.gate: asyncio.Event | None = None  # when set by a test, pulls wait on it
        self.used: set[str] = set()  # refs in use (a sandbox runs from them)
        for tag in present:
            self._add(tag, {})

    def _add(self, tag: str, labels: dict[str, str], size: int = 0) -> None:
        digest = hashlib.sha256(f"{tag}{sorted(labels.items())}{time.time()}".encode())
        info = ImageInfo(f"sha256:{digest.hexdigest()}", (tag,), labels, time.time(), size)
        self._images[tag] = info

    def _get(self, ref: str) -> ImageInfo:
        found = self._images.get(ref) or next(
            (i for i in self._images.values() if i.id == ref), None
        )
        if found is None:
            raise ImageNotFound(f"image {ref!r} not found in the fake backend's images")
        return found

    async def has(self, ref: str) -> bool:
        return ref in self._images or any(i.id == ref for i in self._images.values())

    async def pull(self, ref: str, progress: Callable[[str], None] | None = None) -> None:
        self.pulled.append(ref)
        if self.gate is not None:
            await self.gate.wait()
        if ref not in self.registry:
            raise SandboxError(f"pull {ref}: the fake registry has no such image")
        if progress is not None:
            progress(f"{ref}: pulled")
        self._add(ref, {}, self.registry[ref])

    async def build(self, recipe: ImageRecipe, log: BuildLog) -> float:
        started = time.monotonic()
        text = recipe.dockerfile.read_text()
        parent = parent_of(text, recipe.base_image)
        if parent is not None and not await self.has(parent):
            raise ImageBuildError(
                f"building {recipe.tag} ({recipe.origin}) failed:\nno image {parent} to build FROM"
            )
        log(f"fake build of {recipe.tag} FROM {parent}")
        self.built.append(recipe)
        inherited = self._images[parent].labels if parent in self._images else {}
        self._add(recipe.tag, {**inherited, **labels_in(text)})
        return time.monotonic() - started

    async def make_local_base(self, log: BuildLog) -> None:
        log(f"fake: made {LOCAL_DEBIAN}")
        self._add(LOCAL_DEBIAN, {})

    async def remove(self, refs: Sequence[str]) -> int:
        gone = [
            self._get(ref).tags[0] for ref in refs if await self.has(ref) and ref not in self.used
        ]
        for tag in gone:
            del self._images[tag]
        return len(gone)

    async def list(self, labels: dict[str, str] | None = None) -> list[ImageInfo]:
        wanted = (labels or {}).items()
        return [i for i in self._images.values() if wanted <= i.labels.items()]

    async def labels(self, ref: str) -> dict[str, str]:
        return dict(self._get(ref).labels)

    async def image_id(self, ref: str) -> str:
        return self._get(ref).id

    async def in_use(self) -> set[str]:
        return set(self.used)

    async def read_folder(self, ref: str, path: str) -> bytes:
        self._get(ref)
        raise SandboxError(f"read {path} from image {ref}: the fake backend's images hold no files")


def parent_of(dockerfile: str, base_image: str | None) -> str | None:
    """The first FROM's image, `${BASE_IMAGE}` resolved as the build would."""
    froms = FROM.findall(dockerfile)
    if not froms:
        return None
    default = ARG_DEFAULT.search(dockerfile)
    arg = base_image or (default.group(1) if default else "")
    return froms[0].replace("${BASE_IMAGE}", arg).replace("$BASE_IMAGE", arg)


def labels_in(dockerfile: str) -> dict[str, str]:
    """`LABEL key=value ...` lines (values may be quoted)."""
    found = {}
    for line in LABEL.findall(dockerfile):
        for pair in shlex.split(line):
            key, _, value = pair.partition("=")
            found[key] = value
    return found
