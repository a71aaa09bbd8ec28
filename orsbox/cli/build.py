"""`orsbox build`: build sandbox images, parents first, with live progress.

Also `ensure_images`, which `serve` and `run` call to build only what is missing.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from orsbox.authoring.environment import Environment
from orsbox.authoring.manifest import MANIFEST_NAME
from orsbox.bundle import (
    build_plan,
    bundled_targets,
    environment_recipes,
    folder_recipe,
    image_recipes,
    needed_images,
)
from orsbox.cli.dataset_options import with_dataset_options
from orsbox.errors import ManifestError, OrsboxError, SandboxError
from orsbox.formats import FormatOptions
from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.config import with_backend
from orsbox.sandbox.images import LOCAL_DEBIAN, BuildLog, ImageRecipe, ImageStore

console = Console(stderr=True, highlight=False)
T = TypeVar("T")


def backend_config() -> BackendConfig:
    """The configured backend (`ORSBOX_BACKEND`): its engine holds the images."""
    from orsbox.settings import Settings

    return Settings().backend


def engine_answers(*, required: bool = True, config: BackendConfig | None = None) -> bool:
    """Whether the engine of `config` (None: the configured backend's) answers. Without
    one: a clear exit saying how to get one, or (not `required`) a warning and False."""
    try:
        why = with_backend(config or backend_config(), lambda backend: backend.health())
    except SandboxError as e:
        why = str(e)
    if why is None:
        return True
    if required:
        console.print(f"[red]No Docker engine answers[/red] ({why}).")
    else:
        console.print(
            f"[yellow]warning:[/yellow] no Docker engine answers ({why}); container "
            "environments will fail until one runs."
        )
    console.print("Start one with `bash scripts/start-docker.sh`; `orsbox doctor` checks more.")
    if required:
        raise typer.Exit(1)
    return False


def on_images(work: Callable[[ImageStore], Awaitable[T]], config: BackendConfig | None = None) -> T:
    """`await work(store)` on the image store of `config` (None: the configured backend)."""
    return with_backend(config or backend_config(), lambda backend: work(backend.images))


async def present(images: ImageStore, tags: Iterable[str | None]) -> set[str]:
    """Which of `tags` the store has (one engine call each)."""
    return {tag for tag in dict.fromkeys(tags) if tag is not None and await images.has(tag)}


def all_recipes(
    environments: Sequence[type[Environment]], extra: Sequence[ImageRecipe] = ()
) -> list[ImageRecipe]:
    own = [r for env_cls in environments for r in environment_recipes(env_cls)]
    return [*image_recipes(), *extra, *own]


async def run_plan(
    images: ImageStore,
    plan: Sequence[ImageRecipe],
    *,
    keep_going: bool = False,
    offline: str | None = None,
) -> dict[str, str]:
    """Build `plan` in order, one spinner per image showing its latest build line. A
    failed build ends the command, or (`keep_going`: a dataset whose other tasks can
    still be served) is printed and returned as {tag: error}. `offline`: why this
    engine's builds reach no network, which a failure's last line then names."""
    failed: dict[str, str] = {}
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        for recipe in plan:
            if recipe.base_image in failed:
                failed[recipe.tag] = f"its base image {recipe.base_image} failed to build"
                continue
            if recipe.base_image == LOCAL_DEBIAN and not await images.has(LOCAL_DEBIAN):
                await _step(progress, LOCAL_DEBIAN, images.make_local_base)
            error = await _step(progress, recipe.tag, functools.partial(images.build, recipe))
            if error is not None:
                if not keep_going:
                    progress.stop()
                    console.print(escape(error))
                    if offline is not None:
                        why = escape(offline_failure(recipe.tag, offline))
                        console.print(f"[red]error:[/red] {why}", soft_wrap=True)
                    raise typer.Exit(1)
                failed[recipe.tag] = error
    for error in failed.values():
        console.print(f"[red]error:[/red] {escape(error)}")
    return failed


def offline_failure(tag: str, offline: str) -> str:
    """The one line that says why `tag` could not be built on an engine whose builds
    reach no network (`offline`), and what to do."""
    return (
        f"{tag} could not be built: {offline}; and no local engine answers to build it on: "
        "start one (bash scripts/start-docker.sh) and run this again"
    )


async def _step(
    progress: Progress, tag: str, work: Callable[[BuildLog], Awaitable[object]]
) -> str | None:
    task = progress.add_task(f"[bold]{tag}[/bold]", total=1)

    def log(line: str) -> None:
        line = escape(line.strip()[:70])
        progress.update(task, description=f"[bold]{tag}[/bold] [dim]{line}[/dim]")

    try:
        await work(log)
    except OrsboxError as e:
        progress.update(task, description=f"[red]{tag} failed[/red]")
        return str(e)
    progress.update(task, completed=1, description=f"[green]{tag}[/green] built")
    return None


def ensure_images(
    environments: Sequence[type[Environment]], config: BackendConfig | None = None
) -> None:
    """Build the images these environments need that are missing (and their parents), on
    the engine of `config` (None: the configured backend's): where their sandboxes run.
    An engine whose builds reach no network (a private gVisor engine:
    `ImageStore.offline_builds`) gets them built on the local engine and copied in."""
    wanted = needed_images(environments)
    config = config or backend_config()
    if wanted and engine_answers(required=False, config=config):
        on_images(lambda images: _ensure(images, environments, wanted, config), config)


async def _ensure(
    images: ImageStore,
    environments: Sequence[type[Environment]],
    wanted: list[str],
    config: BackendConfig,
) -> None:
    recipes = all_recipes(environments)
    there = await present(images, [*wanted, *(r.tag for r in recipes), *_bases(recipes)])
    plan = build_plan(wanted, recipes, there.__contains__)
    # an environment that serves without some of its images says so (Harbor's tasks)
    hooks = [getattr(e, "image_build_failed", None) for e in environments]
    tolerant = [hook for hook in hooks if callable(hook)]
    failed: dict[str, str] = {}
    if plan:
        offline = await images.offline_builds()
        builder = config.builder() if offline else None
        if offline is not None and builder is not None:
            missing = [tag for tag in wanted if tag not in there]
            failed = await _build_elsewhere(
                images, builder, offline, missing, recipes, plan, tolerant
            )
        else:
            console.print(
                f"Building {len(plan)} missing image(s): {', '.join(r.tag for r in plan)}"
            )
            failed = await run_plan(images, plan, keep_going=bool(tolerant), offline=offline)
    for hook in tolerant:
        for tag, error in failed.items():
            hook(tag, error)
    known = {r.tag for r in recipes}
    for tag in wanted:
        if tag not in known and not await images.has(tag):
            console.print(
                f"[yellow]warning:[/yellow] image {tag} is missing and orsbox has no "
                "recipe for it; episodes that need it will fail until you build it or "
                "map it onto an image you have (--image-map NAME=IMAGE; a Harbor task "
                "with environment/Dockerfile: --build-missing)"
            )


async def _build_elsewhere(
    images: ImageStore,
    builder: BackendConfig,
    offline: str,
    missing: list[str],
    recipes: Sequence[ImageRecipe],
    plan: Sequence[ImageRecipe],
    tolerant: list[Callable[[str, str], None]],
) -> dict[str, str]:
    """The `missing` images built (where missing there too) on the engine of `builder`
    and copied into `images`' engine, whose own builds reach no network (`offline`
    says why). Without an engine to build on, `plan` is built in place after all (a
    recipe may need no network), a failure naming the cause."""
    from orsbox.sandbox.config import create_backend

    backend = create_backend(builder)
    try:
        why = await backend.health()
        if why is not None:
            console.print(
                f"[yellow]warning:[/yellow] {offline}, and no engine to build on answers "
                f"({why}): building {len(plan)} missing image(s) there all the same",
                soft_wrap=True,
            )
            return await run_plan(images, plan, keep_going=bool(tolerant), offline=offline)
        source = backend.images
        found = await present(source, [*missing, *(r.tag for r in recipes), *_bases(recipes)])
        local_plan = build_plan(missing, recipes, found.__contains__)
        where = getattr(builder, "engine", None) or "the local engine"
        console.print(f"{offline}: the images are built on {where} and copied in.", soft_wrap=True)
        failed: dict[str, str] = {}
        if local_plan:
            tags = ", ".join(r.tag for r in local_plan)
            console.print(f"Building {len(local_plan)} missing image(s) there: {tags}")
            failed = await run_plan(source, local_plan, keep_going=bool(tolerant))
        copied = [tag for tag in missing if tag not in failed and await source.has(tag)]
        if copied:
            with console.status(f"copying {', '.join(copied)} into the sandboxes' engine"):
                started = time.monotonic()
                try:
                    await images.copy_from(source, copied)
                except OrsboxError as e:
                    console.print(f"[red]error:[/red] {escape(str(e))}")
                    raise typer.Exit(1) from None
            console.print(f"Copied {', '.join(copied)} in {time.monotonic() - started:.0f} s.")
        return failed
    finally:
        await backend.close()


def _bases(recipes: Iterable[ImageRecipe]) -> list[str | None]:
    return [r.base_image for r in recipes]


def _requested(paths: Sequence[str], dataset: FormatOptions) -> tuple[list[str], list[ImageRecipe]]:
    """Tags to build and the recipes that may build them, for `orsbox build PATH...`."""
    from orsbox.targets import resolve_targets

    tags: list[str] = []
    envs: list[type[Environment]] = []
    folders: list[ImageRecipe] = []
    for path in paths:
        folder = Path(path)
        if (folder / "Dockerfile").is_file() and not (folder / MANIFEST_NAME).is_file():
            folders.append(folder_recipe(folder))
            tags.append(folders[-1].tag)
        else:
            found = resolve_targets([path], dataset)
            envs += found
            tags += needed_images(found)
    return tags, all_recipes(envs, folders)


@with_dataset_options
def build(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="images/ folders (with a Dockerfile) or environments (folders, files); "
            "default: every image in images/ and every bundled environment's image",
            show_default=False,
        ),
    ] = None,
    missing_only: Annotated[
        bool, typer.Option("--missing-only", help="skip images that already exist")
    ] = False,
    server: Annotated[
        bool,
        typer.Option(
            "--server",
            help="build the deployment's images instead: orsbox/server:latest (the "
            "top-level Dockerfile, from wheels made here: no network inside the build), "
            "orsbox/router:latest (deploy/router) and orsbox/registry:latest "
            "(deploy/registry)",
        ),
    ] = False,
    dataset: FormatOptions | None = None,
) -> None:
    """Build sandbox images, parents first.

    orsbox/base comes before orsbox/swe, which comes before the environments built on
    it. Builds use the engine's cache, so rebuilding an unchanged image takes seconds.
    Without a registry the root image starts from a Debian base made locally with
    mmdebstrap; set BASE_IMAGE=debian:bookworm-slim to start from the registry's.
    `--server` builds the server's image the same way (BASE_IMAGE=python:3.11-slim for
    the registry's base)."""
    if server:
        engine_answers()
        on_images(build_server_image)
        return
    try:  # a task or manifest orsbox refuses (one wanting the network, say): one line
        if paths:
            tags, recipes = _requested(paths, dataset or FormatOptions())
        else:
            from orsbox.targets import resolve_targets

            envs = resolve_targets(bundled_targets())
            recipes = all_recipes(envs)
            tags = [r.tag for r in recipes]
    except ManifestError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    engine_answers()
    on_images(lambda images: _build(images, tags, recipes, rebuild=not missing_only))


async def _build(
    images: ImageStore, tags: list[str], recipes: list[ImageRecipe], *, rebuild: bool
) -> None:
    """`orsbox build`: every tag with a recipe (only the missing ones without `rebuild`);
    a tag without one must already be there."""
    known = {r.tag for r in recipes}
    there = await present(images, [*tags, *known, *_bases(recipes)])
    missing = [t for t in tags if t not in known and t not in there]
    if missing:
        console.print(
            f"[red]No recipe for[/red] {', '.join(missing)}, and the engine does not have "
            "it: build it yourself, or map it onto an image you have with --image-map "
            "NAME=IMAGE."
        )
        raise typer.Exit(1)
    plan = build_plan(tags, recipes, there.__contains__, rebuild=rebuild)
    if not plan:
        console.print("Every image is there.")
        return
    await run_plan(images, plan)


async def build_server_image(images: ImageStore) -> None:
    """orsbox/server:latest from a throw-away context holding the wheels made here, and
    the router and the registry beside it (orsbox.cluster.images)."""
    from orsbox.cluster.images import (
        registry_recipe,
        router_recipe,
        server_recipe,
        wheel_ships_sleeper,
    )

    with tempfile.TemporaryDirectory(prefix="orsbox-server-") as folder:
        with console.status("orsbox/server: pip wheel on the host (orsbox and its dependencies)"):
            try:
                server = server_recipe(Path(folder), lambda line: None)
            except OrsboxError as e:
                console.print(f"[red]error:[/red] {escape(str(e))}")
                raise typer.Exit(1) from None
        if not wheel_ships_sleeper(Path(folder) / "wheels"):
            console.print(
                "[yellow]warning:[/yellow] orsbox's wheel has no native sleeper (no musl-gcc "
                "here: apt-get install musl-tools gcc), so the image's idle guests will sleep as "
                "bash (docs/operating/sizing.md)"
            )
        await run_plan(images, [server, router_recipe(), registry_recipe()])
