"""`orsbox images list|push`: the images a deployment's environments run in, and sending
them to the registry its cells pull through (`orsbox.cluster.pushing`, docs/cluster.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from orsbox.cli.cluster import DEFAULT_STATE
from orsbox.cli.dataset_options import FormatOptions, with_dataset_options
from orsbox.errors import ManifestError
from orsbox.formats.registry import targets_help
from orsbox.settings import Settings

app = typer.Typer(
    help="The images environments run in, and pushing them to a cluster's registry.",
    no_args_is_help=True,
)
TargetsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help=f"environments as for `orsbox serve` ({targets_help()}, bundled names); "
        "default: the bundled ones",
        show_default=False,
    ),
]


def _images(targets: list[str] | None, dataset: FormatOptions | None) -> list[str]:
    from orsbox.bundle import images_of
    from orsbox.targets import resolve_targets

    try:
        return images_of(resolve_targets(targets or [], dataset or FormatOptions()))
    except ManifestError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


@app.command(name="list")
@with_dataset_options
def list_images(targets: TargetsArg = None, dataset: FormatOptions | None = None) -> None:
    """Print the images the environments' episodes run in, one a line."""
    for image in _images(targets, dataset):
        typer.echo(image)


def _registry_of(registry: str | None, state: Path) -> str:
    if registry:
        return registry
    from orsbox.cluster.local import STATE_FILE, ClusterState

    if (state / STATE_FILE).exists() and ClusterState.load(state).registry:
        return ClusterState.load(state).registry
    raise typer.BadParameter(
        f"no registry: name one (`--registry HOST:PORT`), or start a cluster with one "
        f"(`orsbox cluster up N --registry`; none in {state})",
        param_hint="--registry",
    )


@app.command()
@with_dataset_options
def push(
    targets: TargetsArg = None,
    registry: Annotated[
        str | None,
        typer.Option(
            help="the registry's HOST:PORT (default: the registry of the local cluster in --state)",
            show_default=False,
        ),
    ] = None,
    state: Annotated[
        Path, typer.Option("--state", help="the local cluster whose registry to use")
    ] = DEFAULT_STATE,
    dataset: FormatOptions | None = None,
) -> None:
    """Push the images the environments run in, from the configured backend's image
    store (ORSBOX_BACKEND: by default this machine's engine) to the registry the cells
    pull through, with progress. Exits 1 when any image could not be pushed (each is
    named with the reason)."""
    from orsbox.cluster.pushing import push as push_images
    from orsbox.cluster.registry import answers
    from orsbox.sandbox.config import with_backend

    address = _registry_of(registry, state)
    if not answers(address):
        raise typer.BadParameter(f"no registry answers on {address}", param_hint="--registry")
    images = _images(targets, dataset)
    report = with_backend(
        Settings().backend,
        lambda backend: push_images(backend.images, images, address, typer.echo),
        server_id=f"cli-{os.getpid()}",
    )
    typer.echo(
        f"pushed {len(report.pushed)} of {len(images)} images to {address} "
        f"({report.bytes_sent / 1e6:.0f} MB)"
    )
    if report.failed:
        raise typer.Exit(1)
