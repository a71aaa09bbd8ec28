"""The Docker sandbox backend: one container per session, commands through an
in-container guest on one attached exec socket (see `orsbox.sandbox.guest`).

Its names are imported when first used (PEP 562), so the factory can read its config
(`orsbox.sandbox.docker.config`) without loading the docker SDK."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orsbox.sandbox.docker.backend import DockerBackend
    from orsbox.sandbox.docker.images import BASE_IMAGE, ensure_base_image, image_exists
    from orsbox.sandbox.docker.sandbox import DockerSandbox

__all__ = ["BASE_IMAGE", "DockerBackend", "DockerSandbox", "ensure_base_image", "image_exists"]

_HOMES = {
    "DockerBackend": "backend",
    "DockerSandbox": "sandbox",
    "BASE_IMAGE": "images",
    "ensure_base_image": "images",
    "image_exists": "images",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
