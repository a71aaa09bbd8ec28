"""`orsbox images push`: the images a deployment's cells will need, sent to its registry.

Which images: what the served environments run in (`orsbox.bundle.images_of`). Each
goes to the registry under the name an engine using it as a mirror asks for
(`orsbox.cluster.registry.mirrored_name`), from the engine this command talks to
(`DOCKER_HOST`), which must hold them (built, loaded or pulled there). The alias tag
made for the push is removed afterwards; the image stays.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from orsbox.cluster.registry import RegistryError, mirrored_name

Progress = Callable[[str], None]
PROGRESS_EVERY_S = 2.0


@dataclass
class PushReport:
    pushed: list[str] = field(default_factory=list)  # names in the registry
    failed: dict[str, str] = field(default_factory=dict)  # image -> why
    bytes_sent: int = 0


def push(client: Any, images: list[str], registry: str, progress: Progress) -> PushReport:
    """Push `images` from the engine of `client` (a `docker.DockerClient`) to
    `registry`, telling `progress` about each image and, every few seconds, its bytes.
    An image that fails is reported and the others still go."""
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
            sent = _push_one(client, image, target, progress)
        except RegistryError as e:
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


def _push_one(client: Any, image: str, target: str, progress: Progress) -> int:
    import docker.errors

    repository, tag = target.rsplit(":", 1)
    try:
        client.api.tag(image, repository, tag)
    except docker.errors.ImageNotFound:
        raise RegistryError(f"not on this engine: build, load or pull {image} here first") from None
    try:
        return _follow(client.api.push(repository, tag=tag, stream=True, decode=True), progress)
    except docker.errors.APIError as e:
        raise RegistryError(str(e.explanation or e)) from None
    finally:
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(target)


def _follow(events: Iterator[dict[str, Any]], progress: Progress) -> int:
    """Read the engine's push events to their end; return the bytes the pushed layers
    held. Raises `RegistryError` on the engine's error event."""
    layers: dict[str, int] = {}  # layer id -> bytes sent so far (its size once pushed)
    last = time.monotonic()
    for event in events:
        if "error" in event:
            raise RegistryError(str(event["error"]))
        detail = event.get("progressDetail") or {}
        if event.get("id") and detail.get("current"):
            layers[event["id"]] = int(detail["current"])
        if time.monotonic() - last > PROGRESS_EVERY_S:
            last = time.monotonic()
            progress(f"    {sum(layers.values()) / 1e6:.0f} MB sent")
    return sum(layers.values())
