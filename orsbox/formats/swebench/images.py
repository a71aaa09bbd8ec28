"""Which image an instance runs in, and getting it when it is missing.

The name is the row's own (`image`, `image_name`, `docker_image`) when it has one, else
`--image-template` filled from the row, else the official convention
(`swebench/sweb.eval.x86_64.<id, "__" as "_1776_">:latest`; SWE-Gym's `xingyaoww/...`
with `_s_`). The image map (`--image-map`, `ORSBOX_IMAGE_MAP`) rewrites the result, so a
private registry or a machine with `docker load`ed images serves the same dataset.

Nothing is built or pulled at load: a dataset may name thousands of images. An image
missing when an episode starts is pulled then, when a registry answers; otherwise the
episode's setup fails with an error naming the image and the ways to provide it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from orsbox.errors import SandboxError, SetupFailed
from orsbox.formats.swebench import SWEBenchOptions
from orsbox.sandbox.image_cache import ImagePullFailed

if TYPE_CHECKING:
    from orsbox.formats.swebench.rows import Row
    from orsbox.sandbox.base import SandboxBackend

log = logging.getLogger("orsbox.formats.swebench")

IMAGE_FIELDS = ("image", "image_name", "docker_image")
PULL_LOG_EVERY_S = 2.0


def official_image(instance_id: str, family: str = "v4") -> str:
    """The name the official harness (or SWE-Gym's) gives an instance's image."""
    if family == "swe-gym":
        return f"xingyaoww/sweb.eval.x86_64.{instance_id.lower().replace('__', '_s_')}:latest"
    return f"swebench/sweb.eval.x86_64.{instance_id.lower().replace('__', '_1776_')}:latest"


def instance_image(row: Row, instance_id: str, family: str, options: SWEBenchOptions) -> str:
    own = next((row.data[f] for f in IMAGE_FIELDS if row.data.get(f)), None)
    if own is not None and not isinstance(own, str):
        raise row.error("the image field must be a string")
    name = own or _templated(row, instance_id, options) or official_image(instance_id, family)
    return options.image_map.rewrite(name)


def _templated(row: Row, instance_id: str, options: SWEBenchOptions) -> str | None:
    if not options.image_template:
        return None
    fields = {k: v for k, v in row.data.items() if isinstance(v, str | int)}
    fields.update(instance_id=instance_id, id_1776=instance_id.lower().replace("__", "_1776_"))
    try:
        return options.image_template.format_map(fields)
    except (KeyError, IndexError, ValueError) as e:
        raise row.error(f"--image-template {options.image_template!r}: {e!r}") from None


def missing_image_error(image: str, why: str) -> SetupFailed:
    return SetupFailed(str(ImagePullFailed(image, why)))


async def pull(backend: SandboxBackend, image: str) -> None:
    """Pull `image` into the engine `backend` starts sandboxes on, logging progress every
    few seconds. Raises `SetupFailed` naming the image and how to provide it when the
    pull fails."""
    last = [0.0]

    def logged(line: str) -> None:
        if time.monotonic() - last[0] > PULL_LOG_EVERY_S:
            last[0] = time.monotonic()
            log.info("pulling %s: %s", image, line)

    log.info("pulling %s", image)
    try:
        await backend.pull_image(image, logged)
    except ImagePullFailed as e:  # a server's shared pull: the same words for every waiter
        raise SetupFailed(str(e)) from None
    except SandboxError as e:
        raise missing_image_error(image, _short(e)) from None
    log.info("pulled %s", image)


def _short(error: Exception) -> str:
    text = str(error)
    return text if len(text) < 300 else text[:300] + "..."
