"""Sandbox images: is one present, and how does a user get the base image.

There is no registry to pull from here, so a missing image is an error that says how
to build it rather than something to fetch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import docker
import docker.errors

BASE_IMAGE = "orsbox/base:latest"
BUILD_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "build-images.sh"
BUILD_TIMEOUT_S = 900


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_hint(image: str) -> str:
    if image == BASE_IMAGE:
        return f"build it with `scripts/build-images.sh` (or `docker build -t {image} images/base`)"
    return f"build it with `docker build -t {image} <folder with its Dockerfile>`"


def ensure_base_image(client: docker.DockerClient | None = None, tag: str = BASE_IMAGE) -> None:
    """Build `orsbox/base:latest` with scripts/build-images.sh unless it exists.
    Blocking (a first build takes about a minute); meant for tests and setup commands."""
    client = client or docker.from_env()
    if image_exists(client, tag):
        return
    if not BUILD_SCRIPT.exists():
        raise RuntimeError(f"image {tag!r} is missing and {BUILD_SCRIPT} is not there")
    env = {**os.environ, "IMAGE_TAG": tag}
    subprocess.run([str(BUILD_SCRIPT)], check=True, timeout=BUILD_TIMEOUT_S, env=env)
