"""`orsbox cluster up N --port P` / `orsbox cluster down`: a local cluster of cells behind
HAProxy, each cell on its own private Docker engine (`orsbox.cluster.local`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_STATE = Path("/tmp/orsbox-cluster")  # short: engine sockets live under it

app = typer.Typer(
    help="A local cluster: N orsbox cells behind one HAProxy router (docs/cluster.md).",
    no_args_is_help=True,
)
StateOption = Annotated[
    Path, typer.Option("--state", help="folder holding the cluster's engines, logs and state")
]


@app.command()
def up(
    n: Annotated[int, typer.Argument(min=1, max=64, help="how many cells")],
    targets: Annotated[
        list[str] | None,
        typer.Argument(help="environments each cell serves (as for `orsbox serve`)"),
    ] = None,
    port: Annotated[int, typer.Option(help="the router's port on 127.0.0.1")] = 8080,
    state: StateOption = DEFAULT_STATE,
    registry: Annotated[
        bool,
        typer.Option(
            "--registry",
            help="also run a registry (Debian's docker-registry) on loopback that every "
            "cell's engine pulls through; push to it with `orsbox images push`",
        ),
    ] = False,
) -> None:
    """Start N cells and the router; print the router's URL once every cell is healthy
    (and, with --registry, the registry's address)."""
    from orsbox.bundle import needed_images
    from orsbox.cli.build import ensure_images
    from orsbox.cluster.local import STATE_FILE, LocalCluster
    from orsbox.targets import resolve_targets

    tools = ("haproxy", "dockerd", "ip", *(("docker-registry",) if registry else ()))
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise typer.BadParameter(
            f"{', '.join(missing)} not found: a local cluster needs HAProxy, Docker's "
            "dockerd and iproute2, and with --registry docker-registry (apt-get install "
            "haproxy docker.io iproute2 docker-registry), run as root",
            param_hint="N",
        )
    if (state / STATE_FILE).exists():
        raise typer.BadParameter(
            f"a cluster is already up in {state}; `orsbox cluster down --state {state}` first",
            param_hint="--state",
        )
    environments = resolve_targets(targets or [])
    ensure_images(environments)
    cluster = LocalCluster.up(
        n, port, targets or [], state, needed_images(environments), registry=registry
    )
    typer.echo(cluster.url)
    if cluster.state.registry:
        typer.echo(f"registry: {cluster.state.registry}")


@app.command()
def down(state: StateOption = DEFAULT_STATE) -> None:
    """Stop the cells, the router, the engines and the registry `up` started, and remove
    their files."""
    from orsbox.cluster.local import STATE_FILE, ClusterState, LocalCluster

    if not (state / STATE_FILE).exists():
        typer.echo(f"no cluster in {state}")
        return
    LocalCluster(ClusterState.load(state)).down()
    typer.echo(f"removed the cluster in {state}")
