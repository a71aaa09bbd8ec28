"""What ships with orsbox, and the images environments need, in the order to build them.

The checkout holds `images/` (one folder per sandbox image, `orsbox/<folder>:latest`,
each Dockerfile taking its parent as `ARG BASE_IMAGE`) and `environments/` (the
bundled environments: folders with an `orsbox.toml`, or Python files). A manifest with
a `[build]` table adds a recipe for its own image. `build_plan` orders recipes so every
parent is built before its children; it is pure: a backend's image store builds them
(`orsbox.sandbox.images`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from orsbox.authoring.container import ContainerEnvironment
from orsbox.authoring.declarative import DeclarativeEnvironment, manifest_path
from orsbox.authoring.environment import Environment
from orsbox.authoring.manifest import MANIFEST_NAME
from orsbox.errors import ManifestError
from orsbox.sandbox.images import LOCAL_DEBIAN, ImageRecipe

CHECKOUT = Path(__file__).resolve().parent.parent
BASE_ARG = re.compile(r"^\s*ARG\s+BASE_IMAGE\s*=\s*(\S+)", re.MULTILINE)


def _shipped(folder: str) -> Path | None:
    """The checkout's `folder` (an editable install), else one in the current folder
    (an installed package run from a copy of the repository, as the server image is)."""
    for candidate in (CHECKOUT / folder, Path.cwd() / folder):
        if candidate.is_dir():
            return candidate
    return None


def environments_dir() -> Path:
    """`$ORSBOX_ENVIRONMENTS`, else the shipped `environments/`."""
    configured = os.environ.get("ORSBOX_ENVIRONMENTS")
    found = Path(configured) if configured else _shipped("environments")
    if found is None:
        raise ManifestError(
            "cannot find the bundled environments (no environments/ folder beside orsbox or "
            "in the current folder); name environments explicitly, or set ORSBOX_ENVIRONMENTS"
        )
    return found


def images_dir() -> Path | None:
    return _shipped("images")


# The order `orsbox serve` (no targets) serves them in; the first is the default for
# requests that name no environment. math first: it needs no container, so a first
# `curl /tools` or a client that names nothing gets the simplest one, and this is the
# order `serve --help` and the startup log name them in.
BUNDLED_ORDER = ("math", "coding", "swe", "terminal")


def bundled_targets() -> list[str]:
    """One target per bundled environment: its folder when it has a manifest, else
    its `environment.py`; in `BUNDLED_ORDER`, any others after them by name."""
    targets = []
    folders = [p for p in environments_dir().iterdir() if p.is_dir()]
    rank = {name: i for i, name in enumerate(BUNDLED_ORDER)}
    for folder in sorted(folders, key=lambda p: (rank.get(p.name, len(rank)), p.name)):
        if (folder / MANIFEST_NAME).is_file():
            targets.append(str(folder))
        elif (folder / "environment.py").is_file():
            targets.append(str(folder / "environment.py"))
    return targets


def bundled_target(name: str) -> str | None:
    """The target of the bundled environment called `name`, if there is one."""
    for target in bundled_targets():
        folder = Path(target) if Path(target).is_dir() else Path(target).parent
        if folder.name == name:
            return target
    return None


# -- recipes ----------------------------------------------------------------------------
def root_base() -> str:
    """The parent of images whose Dockerfile names a registry image: `$BASE_IMAGE`, or
    (no registry assumed) the Debian image made locally by make-local-base.sh."""
    return os.environ.get("BASE_IMAGE") or LOCAL_DEBIAN


def folder_recipe(folder: Path) -> ImageRecipe:
    """The recipe of an images/ folder: tag `orsbox/<folder>:latest`; its parent is the
    Dockerfile's BASE_IMAGE default when that is one of ours, else `root_base()`."""
    folder = folder.resolve()
    dockerfile = folder / "Dockerfile"
    match = BASE_ARG.search(dockerfile.read_text())
    parent = match.group(1) if match else None
    if parent is not None and not parent.startswith("orsbox/"):
        parent = root_base()
    return ImageRecipe(f"orsbox/{folder.name}:latest", folder, dockerfile, parent, str(folder))


def image_recipes() -> list[ImageRecipe]:
    """Every image in images/."""
    root = images_dir()
    folders = sorted(p for p in root.glob("*") if (p / "Dockerfile").is_file()) if root else []
    return [folder_recipe(folder) for folder in folders]


def environment_recipes(env_cls: type[Environment]) -> list[ImageRecipe]:
    """The recipes for an environment's own images: a manifest's `[build]`, or what a
    class that builds per-task images lists in its `image_recipes()` classmethod (a
    benchmark dataset, `orsbox.formats`)."""
    own = getattr(env_cls, "image_recipes", None)
    if callable(own):
        return list(own())
    if not issubclass(env_cls, DeclarativeEnvironment) or env_cls.manifest.build is None:
        return []
    build = env_cls.manifest.build
    folder = env_cls.folder
    return [
        ImageRecipe(
            env_cls.image,
            (folder / build.context).resolve(),
            (folder / build.dockerfile).resolve(),
            build.base_image,
            str(manifest_path(folder)),
        )
    ]


def needed_images(environments: Iterable[type[Environment]]) -> list[str]:
    """The images container environments run in, in order, without repeats."""
    images = [
        image
        for e in environments
        if issubclass(e, ContainerEnvironment)
        for image in e.needed_images()
    ]
    return list(dict.fromkeys(images))


def images_of(environments: Iterable[type[Environment]]) -> list[str]:
    """Every image the environments' episodes run in, in order, without repeats: the
    bundled environments' and Harbor tasks' (`needed_images`) and every SWE-bench
    instance's (`pulled_images`: pulled by a server when an episode needs one, so never
    built ahead, but what `orsbox images push` sends to a cluster's registry)."""
    environments = list(environments)
    found = needed_images(environments)
    for env in environments:
        if issubclass(env, ContainerEnvironment):
            found.extend(env.pulled_images())
    return list(dict.fromkeys(found))


def build_plan(
    wanted: Sequence[str],
    recipes: Sequence[ImageRecipe],
    exists: Callable[[str], bool],
    *,
    rebuild: bool = False,
) -> list[ImageRecipe]:
    """Recipes to build, parents first: the `wanted` tags that are missing (all of them
    with `rebuild`) and every missing ancestor. Tags without a recipe are skipped (the
    caller reports them); a cycle is a `ManifestError`."""
    by_tag = {r.tag: r for r in recipes}
    plan: list[ImageRecipe] = []

    def visit(tag: str, chain: tuple[str, ...], forced: bool) -> None:
        recipe = by_tag.get(tag)
        if recipe is None or recipe in plan or not (forced or not exists(tag)):
            return
        if tag in chain:
            raise ManifestError(f"images depend on each other: {' -> '.join((*chain, tag))}")
        if recipe.base_image:
            visit(recipe.base_image, (*chain, tag), False)
        plan.append(recipe)

    for tag in wanted:
        visit(tag, (), rebuild)
    return plan
