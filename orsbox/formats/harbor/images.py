"""A task's image: built from its Dockerfile with orsbox's builder, or used as given.

In order, a task's image comes from:
  1. `[environment].docker_image`: used as given, after the image map; with
     `--build-missing` and an `environment/Dockerfile` (as Terminal-Bench 2.0 tasks
     ship both), that Dockerfile builds it under the image's name when the engine
     lacks it. A missing image's error says which of the two ways applies
     (`TaskImage.missing_hint`);
  2. `environment/docker-compose.yaml`: its one service (`main`; Terminal-Bench 1
     calls it `client`), with that service's `build` or `image`; more than one
     service is refused;
  3. `environment/Dockerfile` (Terminal-Bench 1: `Dockerfile` beside `task.yaml`).

A built image is tagged `orsbox-harbor/<task>:<hash>`, the hash over the rewritten
Dockerfile and every file of the build context, so an edited task builds again and an
unchanged one is found in the engine. The image map rewrites `FROM` lines; the user's
folder is never written to: the rewritten Dockerfile lives in orsbox's cache folder and
the docker SDK sends it along with the context.

The image runs as Harbor's Docker environment runs it: its root filesystem writable,
its own user, `/logs` made by the environment at setup (`environment.py`); nothing is
added to it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbox.errors import ManifestError
from orsbox.sandbox.image_map import ImageMap
from orsbox.sandbox.images import LOCAL_DEBIAN, ImageRecipe

TAG_PREFIX = "orsbox-harbor/"
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
SERVICE_NAMES = ("main", "client")
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)
_USER = re.compile(r"^\s*USER\s+(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class TaskImage:
    """The image a task runs in, the recipe that builds it (None: used as given), the
    image's own default user when it can be read from the Dockerfile, and what to do
    when the engine does not have it."""

    tag: str
    recipe: ImageRecipe | None
    default_user: str | None = None
    missing_hint: str = ""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "orsbox" / "harbor"


def task_image(
    task: str,
    env_dir: Path,
    *,
    docker_image: str | None,
    image_map: ImageMap,
    build_timeout_s: float,
    build_missing: bool = False,
) -> TaskImage:
    """The task's image; a `ManifestError` naming the task when it has none.
    `build_missing`: a `docker_image` the engine lacks is built from the task's
    Dockerfile, under the image's own name (built only when missing)."""
    if docker_image:
        dockerfile = env_dir / "Dockerfile"
        if build_missing and dockerfile.is_file():
            text = image_map.rewrite_dockerfile(dockerfile.read_text())
            tag = image_map.rewrite(docker_image)
            return _built(task, env_dir, text, build_timeout_s, tag=tag)
        return _given(image_map.rewrite(docker_image), docker_image, dockerfile)
    build = _compose_build(task, env_dir)
    if isinstance(build, str):
        return _given(image_map.rewrite(build), build, None)
    context, dockerfile = build or (env_dir, env_dir / "Dockerfile")
    if not dockerfile.is_file():
        raise ManifestError(
            f"task {task}: no image: {dockerfile} is missing and task.toml names no "
            "[environment].docker_image"
        )
    text = image_map.rewrite_dockerfile(dockerfile.read_text())
    return _built(task, context, text, build_timeout_s)


def _given(tag: str, named: str, dockerfile: Path | None) -> TaskImage:
    """An image used as given; the hint says how to get it when it is missing."""
    hint = f"map it onto an image you have with --image-map {named}=IMAGE"
    if dockerfile is not None and dockerfile.is_file():
        hint = f"build it from {dockerfile} with --build-missing, or {hint}"
    return TaskImage(tag, None, missing_hint=hint)


def _built(
    task: str, context: Path, dockerfile: str, timeout_s: float, tag: str | None = None
) -> TaskImage:
    """`tag` None: `orsbox-harbor/<task>:<content hash>`."""
    digest = _content_hash(context, dockerfile)
    tag = tag or f"{TAG_PREFIX}{_tag_name(task)}:{digest[:12]}"
    folder = cache_dir() / "build"
    folder.mkdir(parents=True, exist_ok=True)
    written = folder / f"{digest}.Dockerfile"
    if not written.is_file():
        written.write_text(dockerfile)
    froms = _FROM.findall(dockerfile)
    parent = froms[0] if froms else None
    base = parent if parent and (parent.startswith("orsbox/") or parent == LOCAL_DEBIAN) else None
    users = _USER.findall(dockerfile)
    user = users[-1] if users else None  # None: the base image's, unknown here
    recipe = ImageRecipe(tag, context.resolve(), written, base, f"task {task}", timeout_s)
    return TaskImage(tag, recipe, user)


def _tag_name(task: str) -> str:
    """A task's folder name as a repository name docker accepts."""
    return re.sub(r"[^a-z0-9._-]+", "-", task.lower()).strip("-._") or "task"


def _content_hash(context: Path, dockerfile: str) -> str:
    digest = hashlib.sha256(dockerfile.encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(context)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# -- docker-compose.yaml ---------------------------------------------------------------
def _compose_build(task: str, env_dir: Path) -> tuple[Path, Path] | str | None:
    """(context, Dockerfile) or an image name from the compose file; None without one."""
    found = [env_dir / n for n in COMPOSE_NAMES if (env_dir / n).is_file()]
    if not found:
        return None
    services = _services(task, found[0])
    if len(services) != 1:
        raise ManifestError(
            f"task {task}: {found[0]} defines {len(services)} services "
            f"({', '.join(services) or 'none'}); orsbox runs one container per task, "
            "so only a single service (main) is supported"
        )
    name, service = next(iter(services.items()))
    if name not in SERVICE_NAMES:
        raise ManifestError(
            f"task {task}: {found[0]}: the service must be called main, not {name!r}"
        )
    return _service_image(task, found[0], service)


def _services(task: str, path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ManifestError(f"task {task}: {path}: not valid YAML: {e}") from None
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict):
        raise ManifestError(f"task {task}: {path}: no services mapping")
    return services


def _service_image(task: str, path: Path, service: Any) -> tuple[Path, Path] | str:
    service = service if isinstance(service, dict) else {}
    build = service.get("build")
    if build is not None:
        spec = {"context": build} if isinstance(build, str) else build
        context = (path.parent / str(spec.get("context", "."))).resolve()
        return context, context / str(spec.get("dockerfile", "Dockerfile"))
    image = service.get("image")
    if isinstance(image, str) and image and "$" not in image:
        return image
    raise ManifestError(f"task {task}: {path}: the service has neither a build nor an image")
