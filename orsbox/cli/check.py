"""`orsbox check PATH`: a dataset author's check before publishing.

For every task of a Harbor / Terminal-Bench dataset: the solution graded (expect 1.0)
and an untouched sandbox graded (expect 0.0), a bounded number of tasks at once, then
one table. A grader that could not run shows as `error` in its column and as the
verdict `GRADING ERROR` with its cause. Exit code 1 when any task fails a check or
cannot be served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orsbox.cli.dataset_options import with_dataset_options
from orsbox.errors import GradingError, ManifestError
from orsbox.formats import FormatOptions

if TYPE_CHECKING:
    from orsbox.formats.harbor.environment import HarborEnvironment
    from orsbox.formats.harbor.oracle import Graded, TaskCheck

out = Console(highlight=False, soft_wrap=False, width=120)


@with_dataset_options
def check(
    path: Annotated[
        str, typer.Argument(help="a task folder or a folder of task folders", show_default=False)
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="tasks checked at once")
    ] = 2,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="print the whole test output of each task's solution run"
        ),
    ] = False,
    dataset: FormatOptions | None = None,
) -> None:
    """Check a Harbor / Terminal-Bench dataset: each task's solution must score 1.0 and
    an untouched sandbox 0.0. Builds missing images first."""
    from orsbox.cli.build import ensure_images
    from orsbox.formats.harbor.environment import HarborEnvironment
    from orsbox.targets import resolve_target

    target = path if path.startswith("harbor:") else f"harbor:{path}"
    try:
        environments = resolve_target(target, dataset or FormatOptions())
    except ManifestError as e:
        raise typer.BadParameter(str(e), param_hint="PATH") from e
    env_cls = environments[0]
    assert issubclass(env_cls, HarborEnvironment)
    ensure_images(environments)
    checks = asyncio.run(_check_all(env_cls, concurrency))
    out.print(_table(env_cls, checks))
    if verbose:
        _print_outputs(checks)
    passed = sum(c.passed for c in checks)
    out.print(f"{passed}/{len(checks) + len(env_cls.refused)} tasks pass")
    if passed < len(checks) + len(env_cls.refused):
        raise typer.Exit(1)


async def _check_all(env_cls: type[HarborEnvironment], concurrency: int) -> list[TaskCheck]:
    from orsbox.formats.harbor.oracle import check_task
    from orsbox.sandbox import create_backend
    from orsbox.settings import Settings

    backend = create_backend(Settings().backend)
    bound = asyncio.Semaphore(concurrency)

    async def one(name: str) -> TaskCheck:
        async with bound:
            return await check_task(env_cls, name, backend)

    try:
        return list(await asyncio.gather(*(one(name) for name in env_cls.tasks)))
    finally:
        await backend.close()


def _reward(grade: Graded | None) -> str:
    """The reward; `error` where the grader could not run (the verdict says why)."""
    if grade is None:
        return "-"
    return "error" if isinstance(grade, GradingError) else f"{grade.reward:g}"


def _table(env_cls: type[HarborEnvironment], checks: Sequence[TaskCheck]) -> Table:
    table = Table(title=f"orsbox check {env_cls.name()}")
    for column in ("task", "solution", "untouched", "verdict", "time"):
        table.add_column(column, justify="right" if column == "time" else "left")
    for c in checks:
        table.add_row(
            c.task, _reward(c.solution), _reward(c.untouched), _verdict(c), f"{c.seconds:.1f}s"
        )
    for name, reason in env_cls.refused.items():
        table.add_row(name, "-", "-", f"[red]REFUSED[/red] {escape(reason)}", "-")
    return table


def _verdict(check: TaskCheck) -> str:
    """ok, FAIL and why, or GRADING ERROR: which episode's verifier could not run and
    why (its cause first), so an author does not read it as a wrong solution."""
    if check.passed:
        return "[green]ok[/green]"
    if check.grading_errors:
        errors = "; ".join(f"{k}: {e.wire()}" for k, e in check.grading_errors.items())
        return f"[red]GRADING ERROR[/red] {escape(errors)}"
    return f"[red]FAIL[/red] {escape(_why(check))}"


def _why(check: TaskCheck) -> str:
    if check.error or check.solution is None or check.untouched is None:
        return check.error or "not graded"
    if isinstance(check.solution, GradingError) or isinstance(check.untouched, GradingError):
        return "not graded"  # `_verdict` reports these first
    problems = []
    if check.solution.reward != 1.0:
        cause = check.cause()
        problems.append("the solution does not score 1.0" + (f": {cause}" if cause else ""))
    if check.untouched.reward != 0.0:
        problems.append("an untouched sandbox does not score 0.0")
    return "; ".join(problems)


def _print_outputs(checks: Sequence[TaskCheck]) -> None:
    """The whole test output of each task's solution run, passed or not (`--verbose`:
    an author asking about a task wants to see what its verifier said either way)."""
    for c in checks:
        if c.solution is not None:
            out.rule(f"{c.task}: the solution's test output")
            out.print(escape(c.solution_output.rstrip() or "(no output)"))
