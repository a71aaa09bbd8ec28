"""`orsbox eval`: run a model (any OpenAI-compatible server) through an environment's
tasks, k attempts each, and report mean reward and pass@k.

The environment is served in-process on a free loopback port, loaded as `orsbox serve`
loads it, or reached at `--url` (any ORS server). Results go to `--out` as they come;
the same command run again plays only the episodes that are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from orsbox.cli import grading_options as G
from orsbox.cli.dataset_options import with_dataset_options
from orsbox.cli.run import ServerToken, ServerUrl, failures_exit
from orsbox.errors import ManifestError
from orsbox.formats import FormatOptions
from orsbox.formats.registry import targets_help

if TYPE_CHECKING:
    from orsbox.evaluation.episode import Server
    from orsbox.evaluation.results import ResultStore
    from orsbox.evaluation.scheduler import Outcome, Plan

out = Console(highlight=False, soft_wrap=True)
EXIT_INTERRUPTED = 130
_MODEL = "Model (any OpenAI-compatible chat-completions server)"
_EPISODES = "Episodes"


def _model(help: str, **more: Any) -> Any:
    return typer.Option(help=help, rich_help_panel=_MODEL, **more)


def _episodes(help: str, **more: Any) -> Any:
    return typer.Option(help=help, rich_help_panel=_EPISODES, **more)


@with_dataset_options
def evaluate(
    model: Annotated[str, _model("model name", show_default=False)],
    target: Annotated[
        str | None,
        typer.Argument(
            help="without --url: what `orsbox serve` takes (a bundled environment's name, a "
            f"folder, a file, an image, {targets_help()}); with --url: an environment on "
            "that server (default: its first)",
            metavar="TARGET",
            show_default=False,
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        _model(
            "the model server, e.g. http://localhost:8000/v1 (default: OpenAI's)",
            envvar="OPENAI_BASE_URL",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        _model(
            "the model server's key (local servers need none)",
            envvar="OPENAI_API_KEY",
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        _model("tokens per model reply (max_completion_tokens to OpenAI, else max_tokens)"),
    ] = None,
    temperature: Annotated[float | None, _model("sampling temperature")] = None,
    request_timeout: Annotated[float, _model("seconds per model request")] = 600.0,
    retries: Annotated[
        int, _model("retries of a model request that failed with 429, 5xx or a timeout")
    ] = 6,
    system_prompt: Annotated[
        Path | None, _model("file whose text is the system message", show_default=False)
    ] = None,
    url: ServerUrl = None,
    token: ServerToken = None,
    split: Annotated[str | None, _episodes("task split (default: the first one)")] = None,
    tasks: Annotated[
        str | None,
        _episodes(
            "tasks to run: indices, ranges and ids, e.g. 0-9,12,median-even (default: all)",
            show_default=False,
        ),
    ] = None,
    epochs: Annotated[int, _episodes("attempts per task (the k of pass@k)", min=1)] = 1,
    concurrency: Annotated[int, _episodes("episodes in flight at once", min=1)] = 4,
    max_turns: Annotated[int, _episodes("model replies per episode", min=1)] = 50,
    time_limit: Annotated[
        float | None,
        _episodes("seconds per episode, from its prompt on (setup has the server's limits)"),
    ] = None,
    pass_threshold: Annotated[float, _episodes("reward an episode needs to count as passed")] = 1.0,
    retry_errors: Annotated[bool, _episodes("also replay episodes recorded as errors")] = False,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="results folder (default: evals/ENV-SPLIT-MODEL); rerun with it to resume",
            show_default=False,
        ),
    ] = None,
    dataset: FormatOptions | None = None,
    grading_errors: G.GradingErrors = None,
) -> None:
    """Evaluate a model on an environment: mean reward, pass@1 and pass@k.

    Each episode: the prompt is the first user message, the environment's tools are the
    model's function tools, each tool call goes over ORS; it ends when a tool says
    finished, at --max-turns or at --time-limit, with the last reward given.
    Exit code 0 when every episode is recorded, 1 on a fatal error, 130 when
    interrupted (rerun the same command to finish)."""
    from orsbox.evaluation.episode import Limits
    from orsbox.evaluation.model import ModelSettings
    from orsbox.evaluation.scheduler import Plan

    settings = ModelSettings(
        model=model,
        base_url=base_url,
        api_key=api_key,
        max_tokens=max_tokens,
        temperature=temperature,
        request_timeout_s=request_timeout,
        retries=retries,
    )
    system = _read_text(system_prompt)
    served = _served(target, url, token, dataset or FormatOptions(), grading_errors)
    with served as server:
        plan = Plan(
            server=server,
            model=settings,
            split=split,
            tasks=tasks,
            epochs=epochs,
            concurrency=concurrency,
            limits=Limits(max_turns=max_turns, time_limit_s=time_limit),
            system_prompt=system,
            pass_threshold=pass_threshold,
            retry_errors=retry_errors,
        )
        _run(plan, out_dir)


@contextlib.contextmanager
def _served(
    target: str | None,
    url: str | None,
    token: str | None,
    dataset: FormatOptions,
    grading_errors: str | None,
) -> Iterator[Server]:
    """The environment's `Server`: at --url (whose operator chose how grading errors
    come back), or served here for the length of the run."""
    from orsbox.cli.run import local_environment, local_server
    from orsbox.evaluation.episode import Server
    from orsbox.settings import Settings

    settings = G.with_grading_errors(Settings(), grading_errors)
    if url is not None:
        yield Server(url.rstrip("/"), target or _first_environment(url, token), token)
        return
    if target is None:
        raise typer.BadParameter("name what to evaluate, or give --url", param_hint="TARGET")
    try:
        environments = local_environment(target, dataset, settings)
    except ManifestError as e:
        raise typer.BadParameter(str(e), param_hint="TARGET") from e
    if len(environments) > 1:
        names = ", ".join(e.name() for e in environments)
        raise typer.BadParameter(f"{target} holds several environments ({names}): name one")
    with local_server(environments, settings) as local_url:
        yield Server(local_url, environments[0].name().lower(), token)


def _first_environment(url: str, token: str | None) -> str:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        names = httpx.get(f"{url.rstrip('/')}/list_environments", headers=headers, timeout=60)
        return names.raise_for_status().json()[0]
    except (httpx.HTTPError, ValueError, IndexError, KeyError) as e:
        raise typer.BadParameter(
            f"cannot list the environments at {url} ({e}): name one", param_hint="TARGET"
        ) from None


def _run(plan: Plan, out_dir: Path | None) -> None:
    from orsbox.evaluation.report import table
    from orsbox.evaluation.results import ResultStore
    from orsbox.evaluation.tasks import TaskSelectionError

    folder = out_dir or Path("evals") / _slug(
        f"{plan.server.env}-{plan.split or 'first'}-{plan.model.model}"
    )
    with failures_exit("evaluation", out):
        try:
            outcome = asyncio.run(_interruptible(plan, ResultStore(folder)))
        except TaskSelectionError as e:
            hint = "--tasks"
            raise typer.BadParameter(str(e).removeprefix(f"{hint}: "), param_hint=hint) from None
    summary = outcome.summary
    title = f"{summary['env']} {summary['split']} · {summary['model']}"
    out.print(table(summary, title))
    for message in summary["error_messages"][:5]:
        out.print(f"[red]error:[/red] {escape(message)}")
    if summary["errors"]:
        out.print(
            f"{summary['errors']} episode(s) ended in an error: --retry-errors plays them again"
        )
    before = summary["episodes"] - outcome.played
    if before:
        out.print(f"{before} episode(s) were recorded by an earlier run and not played again")
    out.print(f"results: {folder}/results.jsonl\nsummary: {folder}/summary.json")
    if outcome.interrupted:
        left = outcome.planned - summary["episodes"]
        out.print(f"[yellow]interrupted: {left} episode(s) left; run the same command to finish[/]")
        raise typer.Exit(EXIT_INTERRUPTED)


async def _interruptible(plan: Plan, store: ResultStore) -> Outcome:
    """`evaluate`, which the first SIGINT or SIGTERM stops cleanly (sessions deleted,
    summary written); a second Ctrl-C stops at once."""
    from orsbox.evaluation.scheduler import evaluate

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def stop(sig: signal.Signals) -> None:
        loop.remove_signal_handler(sig)
        main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)
    try:
        return await evaluate(plan, store, out)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _read_text(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text()
    except OSError as e:
        raise typer.BadParameter(
            f"cannot read {path}: {e.strerror}", param_hint="--system-prompt"
        ) from None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")
