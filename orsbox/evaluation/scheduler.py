"""Run an evaluation: every (task, epoch) the folder lacks, `concurrency` at a time,
with a progress bar, each episode's record saved the moment it ends.

Exactly `concurrency` workers each play one episode at a time from its session's
creation to its deletion, so neither the model server nor the environment server
ever sees more episodes than that. Epochs run in order (every task's first attempt
before any second one), so a run stopped early still covers the tasks evenly.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from orsbox.client import list_splits, list_tasks
from orsbox.evaluation import report
from orsbox.evaluation.episode import ERROR, Limits, Server, Task, play
from orsbox.evaluation.model import Model, ModelError, ModelSettings
from orsbox.evaluation.results import Key, ResultStore
from orsbox.evaluation.tasks import select_tasks, task_id

HTTP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Plan:
    """Everything `orsbox eval` was asked to do."""

    server: Server
    model: ModelSettings
    split: str | None = None
    tasks: str | None = None
    epochs: int = 1
    concurrency: int = 4
    limits: Limits = field(default_factory=Limits)
    system_prompt: str | None = None
    pass_threshold: float = 1.0
    retry_errors: bool = False


@dataclass
class Outcome:
    summary: dict[str, Any]
    planned: int
    ran: int
    interrupted: bool = False


@dataclass
class _Tally:
    """The progress bar's numbers, and every record in this evaluation's scope."""

    records: dict[Key, dict[str, Any]]
    running: int = 0
    ran: int = 0
    fatal: ModelError | None = None  # why the run stopped early

    def fields(self) -> dict[str, Any]:
        done = list(self.records.values())
        played = [r["reward"] or 0.0 for r in done if r["status"] != ERROR]
        mean = f"{sum(played) / len(played):.3f}" if played else "-"
        errors = sum(r["status"] == ERROR for r in done)
        return {"running": self.running, "errors": errors, "mean": mean}


async def evaluate(
    plan: Plan, store: ResultStore, console: Console, http: httpx.AsyncClient | None = None
) -> Outcome:
    """Play what is missing and return the summary (also written to summary.json).
    Cancelled (Ctrl-C), it stops the episodes running, deletes their sessions, and
    returns the summary of what is recorded with `interrupted` set. A model that
    refuses every request (`ModelError.fatal`) stops the run the same way, and the
    error is raised once the summary is written."""
    started = time.monotonic()
    async with http or _http(plan.concurrency) as client:
        split, tasks = await _tasks(client, plan)
        keys = [(split, i, e) for e in range(plan.epochs) for i in tasks]
        run = {"env": plan.server.env, "split": split, "model": plan.model.model}
        done = store.open(run)
        try:
            tally = _Tally({k: r for k, r in done.items() if k in set(keys)})
            todo = [
                (tasks[index], epoch)
                for key in keys
                if _missing(tally.records.get(key), plan.retry_errors)
                for _, index, epoch in [key]
            ]
            outcome = Outcome({}, len(keys), 0)
            try:
                await _play_all(client, plan, todo, tally, store, console)
            except asyncio.CancelledError:  # Ctrl-C: the records say what is left
                outcome.interrupted = True
                _uncancel()
            outcome.ran = tally.ran
            outcome.summary = report.summarize(
                tally.records.values(),
                k=plan.epochs,
                threshold=plan.pass_threshold,
                wall_s=time.monotonic() - started,
            )
            outcome.summary.update(run, complete=len(tally.records) == len(keys))
            store.write_summary(outcome.summary)
            if tally.fatal is not None:
                raise tally.fatal
            return outcome
        finally:
            store.close()


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _http(concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=2 * concurrency + 4, max_keepalive_connections=concurrency
    )
    return httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, limits=limits)


async def _tasks(client: httpx.AsyncClient, plan: Plan) -> tuple[str, dict[int, Task]]:
    server = plan.server
    split = plan.split or (await list_splits(client, server.url, server.env, server.token))[0]
    found = await list_tasks(client, server.url, server.env, split, server.token)
    chosen = select_tasks(plan.tasks, found)
    return split, {i: Task(split, i, task_id(found[i])) for i in chosen}


def _missing(record: dict[str, Any] | None, retry_errors: bool) -> bool:
    return record is None or (retry_errors and record["status"] == ERROR)


async def _play_all(
    client: httpx.AsyncClient,
    plan: Plan,
    todo: list[tuple[Task, int]],
    tally: _Tally,
    store: ResultStore,
    console: Console,
) -> None:
    model = Model(plan.model)
    queue = list(reversed(todo))
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("running {task.fields[running]}  errors {task.fields[errors]}"),
        TextColumn("mean reward {task.fields[mean]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(plan.server.env, total=len(todo), **tally.fields())

        async def worker() -> None:
            while queue:
                task, epoch = queue.pop()
                tally.running += 1
                progress.update(bar, **tally.fields())
                try:
                    await _play_one(client, plan, model, task, epoch, tally, store)
                except ModelError as e:  # fatal: stop every worker
                    tally.fatal = e
                    raise
                finally:
                    tally.running -= 1
                progress.update(bar, advance=1, **tally.fields())

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(plan.concurrency, len(todo))):
                    group.create_task(worker())
        except* ModelError:
            pass  # kept in tally.fatal; raised once the summary is written
        finally:
            await asyncio.shield(model.close())


async def _play_one(
    client: httpx.AsyncClient,
    plan: Plan,
    model: Model,
    task: Task,
    epoch: int,
    tally: _Tally,
    store: ResultStore,
) -> None:
    episode = await play(client, plan.server, model, task, epoch, plan.limits, plan.system_prompt)
    record = episode.record()
    store.append(record, episode.transcript())
    tally.records[(task.split, task.index, epoch)] = record
    tally.ran += 1
