"""A task's image: built from its Dockerfile with orsbox's builder, or used as given.

In order, a task's image comes from:
  1. `[environment].docker_image`: used as given, after the image map;
  2. `environment/docker-compose.yaml`: its one service (`main`; Terminal-Bench 1
     calls it `client`), with that service's `build` or `image`; more than one
     service is refused;
  3. `environment/Dockerfile` (Terminal-Bench 1: `Dockerfile` beside `task.yaml`).

A built image is tagged `orsbox-harbor/<task>:<hash>`, the hash over the rewritten
Dockerfile and every file of the build context, so an edited task builds again and an
unchanged one is found in the engine. The image map rewrites `FROM` lines; the user's
folder is never written to: the rewritten Dockerfile lives in orsbox's cache folder and
the docker SDK sends it along with the context.

A task with `storage_mb` runs with a read-only root filesystem and bounded in-memory
folders (how orsbox bounds disk, `SandboxLimits.disk_bytes`), where Harbor's `/tests`
and `/logs` could not be written. So its image gets one more layer that points them
into `/tmp` (`WRITABLE_LAYER`; the Dockerfile's last `USER` is restored after it), and
a `docker_image` is then built into a thin image of its own (whose user is root: its
own default user is not known without asking the engine).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbox.errors import ManifestError
from orsbox.sandbox.docker.images import LOCAL_DEBIAN, ImageRecipe
from orsbox.sandbox.image_map import ImageMap

TAG_PREFIX = "orsbox-harbor/"
SCRATCH_ROOT = "/tmp/.harbor"
MOVED_FOLDERS = ("/tests", "/logs", "/solution")
WRITABLE_LAYER = (
    "\n# orsbox: a read-only root (storage_mb) keeps Harbor's folders in /tmp\n"
    "USER root\n"
    f'RUN for d in {" ".join(MOVED_FOLDERS)}; do rm -rf "$d" && '
    f'ln -s "{SCRATCH_ROOT}$d" "$d"; done\n'
)
# Run as root before using those folders: a moved folder's target exists.
MAKE_SCRATCH = (
    f"for d in {' '.join(MOVED_FOLDERS)}; do "
    f'if [ -L "$d" ]; then mkdir -p "{SCRATCH_ROOT}$d"; fi; done'
)
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
SERVICE_NAMES = ("main", "client")
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)
_USER = re.compile(r"^\s*USER\s+(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class TaskImage:
    """The image a task runs in, the recipe that builds it (None: used as given) and
    the image's own default user when it can be read from the Dockerfile."""

    tag: str
    recipe: ImageRecipe | None
    default_user: str | None = None


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
    writable_layer: bool,
) -> TaskImage:
    """The task's image; a `ManifestError` naming the task when it has none."""
    if docker_image:
        return _given(task, image_map.rewrite(docker_image), build_timeout_s, writable_layer)
    build = _compose_build(task, env_dir)
    if isinstance(build, str):
        return _given(task, image_map.rewrite(build), build_timeout_s, writable_layer)
    context, dockerfile = build or (env_dir, env_dir / "Dockerfile")
    if not dockerfile.is_file():
        raise ManifestError(
            f"task {task}: no image: {dockerfile} is missing and task.toml names no "
            "[environment].docker_image"
        )
    text = image_map.rewrite_dockerfile(dockerfile.read_text())
    if writable_layer:
        users = _USER.findall(text)
        text += WRITABLE_LAYER + (f"USER {users[-1]}\n" if users else "")
    return _built(task, context, text, build_timeout_s)


def _given(task: str, image: str, timeout_s: float, layer: bool) -> TaskImage:
    if not layer:
        return TaskImage(image, None)
    return _built(task, None, f"FROM {image}\n{WRITABLE_LAYER}", timeout_s)


def _built(task: str, context: Path | None, dockerfile: str, timeout_s: float) -> TaskImage:
    digest = _content_hash(context, dockerfile)
    tag = f"{TAG_PREFIX}{_tag_name(task)}:{digest[:12]}"
    folder = cache_dir() / "build"
    folder.mkdir(parents=True, exist_ok=True)
    written = folder / f"{digest}.Dockerfile"
    if not written.is_file():
        written.write_text(dockerfile)
    if context is None:  # a thin layer over a given image: an empty context
        context = folder / "empty"
        context.mkdir(exist_ok=True)
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


def _content_hash(context: Path | None, dockerfile: str) -> str:
    digest = hashlib.sha256(dockerfile.encode())
    if context is not None:
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
