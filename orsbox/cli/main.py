"""`orsbox` — serve ORS environments (typer gives typed options and a helpful --help)."""

from __future__ import annotations

import typer

from orsbox import __version__
from orsbox.cli import serve

app = typer.Typer(
    help="orsbox: a sandboxed, container-backed host for Open Reward Standard environments.",
    no_args_is_help=True,
    add_completion=False,
)
app.command(name="serve")(serve.serve)


@app.command()
def version() -> None:
    """Print the orsbox version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
