"""`orsbox images push`: the images a deployment's cells will need, sent to its registry.

Which images: what the served environments run in (`orsbox.bundle.images_of`). Each
goes to the registry under the name an engine using it as a mirror asks for
(`orsbox.cluster.registry.mirrored_name`), from the image store of the backend this
command is configured for (`ORSBOX_BACKEND`; `ImageStore.push`), which must hold them
(built, loaded or pulled there). The store sends each as its backend does (Docker: an
alias tag pushed by the engine, removed afterwards; the image stays).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from orsbox.cluster.registry import RegistryError, mirrored_name
from orsbox.errors import ImageNotFound, SandboxError
from orsbox.sandbox.images import ImageStore

Progress = Callable[[str], None]


@dataclass
class PushReport:
    pushed: list[str] = field(default_factory=list)  # names in the registry
    failed: dict[str, str] = field(default_factory=dict)  # image -> why
    bytes_sent: int = 0


async def push(
    store: ImageStore, images: list[str], registry: str, progress: Progress
) -> PushReport:
    """Push `images` from `store` to `registry`, telling `progress` about each image
    and, every few seconds, its bytes (from a worker thread, as the store calls it). An
    image that fails is reported and the others still go."""
    report = PushReport()
    for n, image in enumerate(images, start=1):
        try:
            target = mirrored_name(image, registry)
        except RegistryError as e:
            report.failed[image] = str(e)
            progress(f"[{n}/{len(images)}] {image}: {e}")
            continue
        progress(f"[{n}/{len(images)}] {image} -> {target}")
        started = time.monotonic()
        try:
            sent = await store.push(image, target, progress)
        except ImageNotFound:
            why = f"not on this engine: build, load or pull {image} here first"
            report.failed[image] = why
            progress(f"[{n}/{len(images)}] {image}: failed: {why}")
            continue
        except SandboxError as e:
            report.failed[image] = str(e)
            progress(f"[{n}/{len(images)}] {image}: failed: {e}")
            continue
        report.pushed.append(target)
        report.bytes_sent += sent
        progress(
            f"[{n}/{len(images)}] {image}: pushed {sent / 1e6:.0f} MB in "
            f"{time.monotonic() - started:.1f} s"
        )
    return report
