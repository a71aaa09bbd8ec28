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
    planned: int  # episodes in the evaluation
    played: int  # of them, played by this run (the others were recorded before)
    interrupted: bool = False


class _Tally:
    """Every record in the evaluation's scope, and the progress bar's running numbers."""

    def __init__(self, records: dict[Key, dict[str, Any]]) -> None:
        self.records: dict[Key, dict[str, Any]] = {}
        self.running = self.played = self.errors = 0
        self._rewards = 0.0
        self.fatal: ModelError | None = None  # why the run stopped early
        for key, record in records.items():
            self.add(key, record)

    def add(self, key: Key, record: dict[str, Any]) -> None:
        previous = self.records.get(key)  # a retried error
        if previous is not None and previous["status"] == ERROR:
            self.errors -= 1
        self.records[key] = record
        if record["status"] == ERROR:
            self.errors += 1
        else:
            self._rewards += record["reward"] or 0.0

    def fields(self) -> dict[str, Any]:
        scored = len(self.records) - self.errors
        mean = f"{self._rewards / scored:.3f}" if scored else "-"
        return {"running": self.running, "errors": self.errors, "mean": mean}


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
        recorded = store.open(run)
        try:
            in_scope = set(keys)
            tally = _Tally({k: r for k, r in recorded.items() if k in in_scope})
            todo = [
                (tasks[index], epoch)
                for (_, index, epoch) in keys
                if _missing(tally.records.get((split, index, epoch)), plan.retry_errors)
            ]
            outcome = Outcome({}, len(keys), 0)
            console.print(
                f"{plan.server.env} {split} · {plan.model.model}: {len(todo)} of {len(keys)} "
                f"episode(s) to play ({len(tasks)} task(s), {plan.epochs} epoch(s))"
            )
            try:
                await _play_all(client, plan, todo, tally, store, console)
            except asyncio.CancelledError:  # Ctrl-C: the records say what is left
                outcome.interrupted = True
                _uncancel()
            outcome.played = tally.played
            outcome.summary = _summary(plan, tally, run, len(keys), time.monotonic() - started)
            store.write_summary(outcome.summary)
            if tally.fatal is not None:
                raise tally.fatal
            return outcome
        finally:
            store.close()


def _summary(
    plan: Plan, tally: _Tally, run: dict[str, Any], planned: int, wall_s: float
) -> dict[str, Any]:
    summary = report.summarize(
        tally.records.values(), k=plan.epochs, threshold=plan.pass_threshold, wall_s=wall_s
    )
    return {**summary, **run, "complete": len(tally.records) == planned}


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


def _progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("running {task.fields[running]}  errors {task.fields[errors]}"),
        TextColumn("mean reward {task.fields[mean]}"),
        TimeElapsedColumn(),
        console=console,
    )


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
    with _progress_bar(console) as progress:
        bar = progress.add_task(plan.server.env, total=len(todo), **tally.fields())

        async def worker() -> None:
            while queue:
                task, epoch = queue.pop()
                tally.running += 1
                progress.update(bar, **tally.fields())
                try:
                    episode = await play(
                        client, plan.server, model, task, epoch, plan.limits, plan.system_prompt
                    )
                except ModelError as e:  # fatal: stop every worker
                    tally.fatal = e
                    raise
                finally:
                    tally.running -= 1
                store.append(episode.record(), episode.transcript())
                tally.add((task.split, task.index, epoch), episode.record())
                tally.played += 1
                progress.update(bar, advance=1, **tally.fields())

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(plan.concurrency, len(todo))):
                    group.create_task(worker())
        except* ModelError:
            pass  # kept in tally.fatal; raised once the summary is written
        finally:
            await asyncio.shield(model.close())
