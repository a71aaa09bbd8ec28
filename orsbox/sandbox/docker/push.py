"""Sending an image from the engine to a registry (`DockerImages.push`): tag it with the
registry's name, push that tag following the engine's events, remove the tag again (the
image stays)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
import docker.errors

from orsbox.errors import ImageNotFound, SandboxError

PROGRESS_EVERY_S = 2.0


def push_image(
    client: docker.DockerClient, ref: str, target: str, progress: Callable[[str], None] | None
) -> int:
    """Push `ref` as `target` (`HOST:PORT/name:tag`); return the bytes the pushed layers
    held. `ImageNotFound` when the engine lacks `ref`, `SandboxError` for the registry's
    refusal."""
    repository, tag = target.rsplit(":", 1)
    try:
        client.api.tag(ref, repository, tag)
    except docker.errors.ImageNotFound:
        raise ImageNotFound(f"image {ref!r} not found on this engine") from None
    try:
        events = client.api.push(repository, tag=tag, stream=True, decode=True)
        return _follow(events, progress or (lambda line: None))
    except docker.errors.APIError as e:
        raise SandboxError(str(e.explanation or e)) from None
    finally:
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(target)


def _follow(events: Iterator[dict[str, Any]], progress: Callable[[str], None]) -> int:
    """Read the engine's push events to their end; return the bytes the pushed layers
    held. Raises `SandboxError` on the engine's error event."""
    layers: dict[str, int] = {}  # layer id -> bytes sent so far (its size once pushed)
    last = time.monotonic()
    for event in events:
        if "error" in event:
            raise SandboxError(str(event["error"]))
        detail = event.get("progressDetail") or {}
        if event.get("id") and detail.get("current"):
            layers[event["id"]] = int(detail["current"])
        if time.monotonic() - last > PROGRESS_EVERY_S:
            last = time.monotonic()
            progress(f"    {sum(layers.values()) / 1e6:.0f} MB sent")
    return sum(layers.values())
