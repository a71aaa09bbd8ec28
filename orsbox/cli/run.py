"""`orsbox run`: play one scripted episode and print everything that happens.

Against a running server (`--url`), or in-process: the environment is loaded like
`orsbox serve` loads it, and a real server listens on a free loopback port in a thread
for the length of the episode, so both paths speak the same HTTP + SSE.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from orsbox.authoring.environment import Environment
from orsbox.cli import backend_options as B
from orsbox.cli import grading_options as G
from orsbox.cli.dataset_options import with_dataset_options
from orsbox.errors import ManifestError, OrsboxError
from orsbox.formats import FormatOptions
from orsbox.settings import Settings

out = Console(highlight=False, soft_wrap=True)
SERVER_START_S = 60.0

# the ORS server a command talks to; `orsbox eval` takes the same two options
ServerUrl = Annotated[
    str | None,
    typer.Option(help="a running server, e.g. http://127.0.0.1:8080; default: in-process"),
]
ServerToken = Annotated[
    str | None,
    typer.Option(envvar="ORSBOX_TOKEN", help="the server's API token, if it needs one"),
]


def read_actions(path: Path) -> list[dict[str, Any]]:
    """The tool calls of a JSONL file: `{"name": "bash", "input": {...}}` a line."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise typer.BadParameter(
            f"cannot read {path}: {e.strerror}", param_hint="--actions"
        ) from None
    actions = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
            assert isinstance(action, dict) and isinstance(action.get("name"), str)
            assert isinstance(action.get("input", {}), dict)
        except (ValueError, AssertionError):
            raise typer.BadParameter(
                f'{path}:{number}: expected {{"name": "<tool>", "input": {{...}}}}',
                param_hint="--actions",
            ) from None
        actions.append({"name": action["name"], "input": action.get("input", {})})
    return actions


def _free_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def local_server(
    environments: Sequence[type[Environment]], settings: Settings | None = None
) -> Iterator[str]:
    """A real orsbox server on a free loopback port, in a thread; yields its URL."""
    import uvicorn

    from orsbox.server import create_app

    sock = _free_socket()
    port = sock.getsockname()[1]
    given = {"host": "127.0.0.1", "port": port, "log_level": "warning"}
    settings = (settings or Settings()).model_copy(update=given)
    app = create_app(environments, settings)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise OrsboxError("the in-process server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=120)
        sock.close()


def _print_blocks(blocks: list[dict[str, Any]]) -> None:
    for block in blocks:
        if block.get("type") == "image":
            out.print(f"[image {block.get('mimeType', '')}]")
        else:
            out.print(escape(str(block.get("text", ""))))


def play(
    url: str,
    env: str,
    split: str,
    index: int,
    actions: list[dict[str, Any]],
    token: str | None = None,
) -> None:
    """Play the episode against `url`, printing prompt, calls, outputs and rewards."""
    from orsbox.client import Session

    reward, finished = None, False
    with Session(url, env, split, index, token) as session:
        out.rule(f"{env} {split}[{index}]: prompt")
        _print_blocks(session.prompt())
        for number, action in enumerate(actions, start=1):
            if finished:
                out.print(
                    f"[yellow]episode finished; {len(actions) - number + 1} action(s) not sent[/]"
                )
                break
            out.rule(f"call {number}: {action['name']}")
            out.print(escape(json.dumps(action["input"], ensure_ascii=False)), style="cyan")
            result = session.call(action["name"], action["input"])
            if not result.get("ok"):
                out.print(f"[red]error:[/red] {escape(str(result.get('error')))}")
                continue
            output = result["output"]
            _print_blocks(output.get("blocks", []))
            reward = output.get("reward") if output.get("reward") is not None else reward
            finished = bool(output.get("finished"))
            out.print(f"[dim]reward: {output.get('reward')}  finished: {finished}[/dim]")
    out.rule("result")
    out.print(f"[bold]final reward: {reward}  finished: {str(finished).lower()}[/bold]")


def local_environment(
    target: str, dataset: FormatOptions, settings: Settings
) -> list[type[Environment]]:
    """The environments `target` names, their missing images built on the engine of
    `settings.backend` (where the local server will start their sandboxes)."""
    from orsbox.cli.build import ensure_images
    from orsbox.targets import resolve_target

    environments = resolve_target(target, dataset, settings.backend)
    ensure_images(environments, settings.backend)
    return environments


def _first_split(url: str, env: str, token: str | None) -> str:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    splits = httpx.get(f"{url}/{env}/splits", headers=headers, timeout=60).json()
    return splits[0]["name"] if isinstance(splits, list) else "train"


@with_dataset_options
@B.with_backend_options
def run(
    env: Annotated[
        str,
        typer.Argument(
            help="with --url: an environment name on that server; without: a bundled "
            "environment's name, a folder, a file or an image, loaded as `serve` does",
            metavar="ENV",
            show_default=False,
        ),
    ],
    actions: Annotated[
        Path,
        typer.Option(
            help='JSONL file of tool calls, one {"name": tool, "input": {...}} a line',
            show_default=False,
        ),
    ],
    split: Annotated[
        str | None, typer.Option(help="task split (default: the first one)", show_default=False)
    ] = None,
    index: Annotated[int, typer.Option(help="task index in the split")] = 0,
    url: ServerUrl = None,
    token: ServerToken = None,
    dataset: FormatOptions | None = None,
    backend_flags: B.BackendFlags | None = None,
    grading_errors: G.GradingErrors = None,
) -> None:
    """Play one scripted episode and print what happens.

    Prints the prompt, each call with its output, reward and finished flag, and the
    final reward. Exit code 0 whatever the reward; 1 when the server fails the
    episode."""
    steps = read_actions(actions)
    try:
        with failures_exit("episode"), contextlib.ExitStack() as stack:
            name = env
            if url is None:
                settings = B.with_backend(Settings(), backend_flags)
                settings = G.with_grading_errors(settings, grading_errors)
                environments = local_environment(env, dataset or FormatOptions(), settings)
                name = environments[0].name().lower()
                url = stack.enter_context(local_server(environments, settings))
            play(url, name, split or _first_split(url, name, token), index, steps, token)
    except ManifestError as e:
        raise typer.BadParameter(str(e), param_hint="ENV") from e


@contextlib.contextmanager
def failures_exit(what: str, console: Console = out) -> Iterator[None]:
    """What a server or the way to it did wrong, as one red line and exit code 1 (a
    broken manifest passes through: the caller names the argument it came from)."""
    import httpx

    try:
        yield
    except ManifestError:
        raise
    except OrsboxError as e:  # the client's errors included
        console.print(f"[red]{what} failed:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None
    except httpx.HTTPError as e:
        console.print(f"[red]cannot reach the server:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None
