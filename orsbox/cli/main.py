"""`orsbox` — serve ORS environments (typer gives typed options and a helpful --help).

One module per command; each imports what it needs only when it runs, so `--help`
stays fast."""

from __future__ import annotations

import typer

from orsbox import __version__
from orsbox.cli import build, check, cluster, doctor, episodes, gc, images, ps, run, serve, warm
from orsbox.cli import evaluate as evaluate_command

app = typer.Typer(
    help="orsbox: a sandboxed, container-backed host for Open Reward Standard environments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
app.command(name="serve")(serve.serve)
app.command(name="build")(build.build)
app.command(name="run")(run.run)
app.command(name="check")(check.check)
app.command(name="doctor")(doctor.doctor)
app.command(name="ps")(ps.ps)
app.command(name="gc")(gc.gc)
app.command(name="warm")(warm.warm)
app.command(name="eval")(evaluate_command.evaluate)
app.add_typer(episodes.app, name="episodes")
app.add_typer(cluster.app, name="cluster")
app.add_typer(images.app, name="images")


@app.command()
def version() -> None:
    """Print the orsbox version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
