"""From what a user types to environment classes: `orsbox serve` and `orsbox run` targets.

In order, a target is:
  0. a benchmark dataset: `swebench:PATH` (rows in the SWE-bench schema), `harbor:PATH`
     or a folder holding Harbor / Terminal-Bench task folders: a format's prefix, or a
     path a format recognises (`orsbox.formats.registry`);
  1. a path: a folder with an `orsbox.toml`, a manifest, a `.py` file (`file.py:Class`);
  2. the name of a bundled environment (`coding`), for `orsbox run`;
  3. a local image whose manifest is inside it (`orsbox serve me/env:latest`), on the
     default engine's image store (`orsbox.sandbox.images`);
  4. a Python module, `module` or `module:Class`.
Images come before modules because `name:tag` reads as both; a module name is never a
valid image reference once it has a capital letter, and rarely otherwise.

An image environment's manifest lives at `/orsbox/orsbox.toml`, or wherever the image's
`orsbox.manifest` label says. Its folder (manifest, task files, grader files) is copied
out of a created, never started, container into a cache folder named by the image's id
(`~/.cache/orsbox/images/`; a rebuilt image gets a new one, and a server killed by a
signal leaves no temporary folder behind), and the environment runs in that image
whatever the manifest's `image` says.
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from orsbox.authoring.declarative import DeclarativeEnvironment, manifest_environment
from orsbox.authoring.environment import Environment
from orsbox.authoring.loading import is_manifest, load_environment
from orsbox.bundle import bundled_target, bundled_targets
from orsbox.errors import ManifestError, SandboxError
from orsbox.formats import FormatOptions
from orsbox.formats.registry import find_format
from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.base import SandboxBackend
from orsbox.sandbox.config import with_backend
from orsbox.sandbox.images import ImageStore

log = logging.getLogger("orsbox.targets")

IMAGE_MANIFEST = "/orsbox/orsbox.toml"
MANIFEST_LABEL = "orsbox.manifest"


def resolve_targets(
    targets: Sequence[str],
    options: FormatOptions | None = None,
    backend: BackendConfig | None = None,
) -> list[type[Environment]]:
    """The environments `targets` name; no targets: every bundled environment.
    `options` apply to benchmark datasets (`orsbox.formats`); image targets are looked
    up in the image store of `backend` (None: the configured one), the engine the
    server will start their sandboxes on."""
    refs = list(targets) or bundled_targets()
    return [cls for ref in refs for cls in resolve_target(ref, options, backend)]


def resolve_target(
    target: str, options: FormatOptions | None = None, backend: BackendConfig | None = None
) -> list[type[Environment]]:
    dataset = find_format(target)
    if dataset is not None:
        benchmark, path = dataset
        return benchmark.load(path, options or FormatOptions())
    if _is_path(target):
        return load_environment(target)
    bundled = bundled_target(target) if "/" not in target and ":" not in target else None
    if bundled is not None:
        return load_environment(bundled)
    found = _image_target(target, backend)
    return [found] if found is not None else load_environment(target)


def _is_path(target: str) -> bool:
    file_part = target.partition(".py:")[0] + ".py" if ".py:" in target else target
    return is_manifest(target) or target.endswith(".py") or Path(file_part).exists()


def _image_target(target: str, config: BackendConfig | None) -> type[DeclarativeEnvironment] | None:
    """The environment inside the local image `target`; None when there is no such
    image, or no engine answers (the error comes later if it was meant as one)."""

    async def from_image(backend: SandboxBackend) -> type[DeclarativeEnvironment] | None:
        if not await backend.images.has(target):
            return None
        return await image_environment(backend.images, target)

    try:
        return with_backend(config, from_image)
    except SandboxError:
        return None


# -- environments that are nothing but an image ------------------------------------------
async def image_environment(images: ImageStore, image: str) -> type[DeclarativeEnvironment]:
    """The environment whose manifest lives inside `image`; `ManifestError` when it
    cannot be read from there."""
    try:
        labels = await images.labels(image)
    except SandboxError as e:
        raise ManifestError(f"image {image}: {e}") from None
    manifest_in_image = labels.get(MANIFEST_LABEL, IMAGE_MANIFEST)
    folder_in_image = posixpath.dirname(manifest_in_image)
    local = await _cached_folder(images, image, folder_in_image)
    _warn_if_readable(local, image, folder_in_image)
    try:
        return manifest_environment(local / posixpath.basename(manifest_in_image), image=image)
    except ManifestError as e:
        raise ManifestError(str(e).replace(str(local), f"{image}:{folder_in_image}")) from None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "orsbox" / "images"


async def _cached_folder(images: ImageStore, image: str, folder: str) -> Path:
    """`folder` of `image` on the host, unpacked once per image id."""
    cached = cache_dir() / (await images.image_id(image)).split(":")[-1][:16]
    if not cached.is_dir():
        try:
            archive = await images.read_folder(image, folder)
        except SandboxError as e:
            raise ManifestError(
                f"image {image} has no {folder} folder for its manifest (set the "
                f"{MANIFEST_LABEL} label to the manifest's path): {e}"
            ) from None
        _unpack(archive, cached)
    return cached / posixpath.basename(folder)


def _unpack(archive: bytes, destination: Path) -> None:
    """Unpack next to `destination`, then rename: a concurrent reader never sees half."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=destination.parent))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(staging, filter="data")
    try:
        staging.rename(destination)
    except OSError:  # another process unpacked the same image first
        shutil.rmtree(staging, ignore_errors=True)


def _warn_if_readable(local: Path, image: str, folder: str) -> None:
    """Tasks and grader files in an image are the agent's to read unless root-only.
    (Files only: unpacking with the "data" filter does not keep folders' modes.)"""
    files = [p for p in local.rglob("*") if p.is_file() and not p.is_symlink()]
    readable = [p for p in files if p.stat().st_mode & 0o004]
    if readable:
        log.warning(
            "%s:%s is readable by the agent (%s ...): make it root-only in the image, "
            "e.g. RUN chmod -R go= %s",
            image,
            folder,
            posixpath.join(folder, str(readable[0].relative_to(local))),
            folder,
        )
