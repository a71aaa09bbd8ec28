"""`orsbox warm`: ask a running server to start idle sandboxes ahead of a burst
(its `POST /orsbox/warm`, see the README's "warm ahead of a burst")."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

out = Console(highlight=False)


def warm(
    env: Annotated[str, typer.Argument(help="the environment's name")],
    count: Annotated[
        int, typer.Argument(min=0, help="idle sandboxes to keep ready; 0 removes them")
    ],
    url: Annotated[str, typer.Option(help="the server")] = "http://127.0.0.1:8080",
    split: Annotated[
        str | None, typer.Option(help="with --index: warm this task's sandbox")
    ] = None,
    index: Annotated[int | None, typer.Option(help="the task's index in --split")] = None,
) -> None:
    """Keep COUNT idle sandboxes of ENV ready on a running server, ahead of a burst.

    For an environment whose image is per task, name the task (--split, --index); a task
    whose setup is cached is warmed with its saved state. The token, if the server
    needs one, comes from ORSBOX_TOKEN."""
    import httpx

    from orsbox.client import ClientError
    from orsbox.client import warm as ask

    task = {"split": split, "index": index} if split is not None else {}
    try:
        answer = ask(url, env, count, os.environ.get("ORSBOX_TOKEN"), **task)
    except (ClientError, httpx.HTTPError) as e:
        out.print(f"[red]{url}: {e}[/red]")
        raise typer.Exit(1) from None
    out.print(
        f"{env}: keeping {answer['target']} idle sandbox(es) of {answer['image']} "
        f"({answer['idle']} ready now)"
    )
