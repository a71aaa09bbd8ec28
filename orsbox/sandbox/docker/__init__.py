"""The Docker sandbox backend: one container per session, commands through an
in-container guest on one attached exec socket (see `orsbox.sandbox.guest`)."""

from orsbox.sandbox.docker.backend import DockerBackend
from orsbox.sandbox.docker.images import BASE_IMAGE, ensure_base_image, image_exists
from orsbox.sandbox.docker.sandbox import DockerSandbox

__all__ = ["BASE_IMAGE", "DockerBackend", "DockerSandbox", "ensure_base_image", "image_exists"]
