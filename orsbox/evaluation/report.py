"""The numbers an evaluation ends with, and the table that shows them.

pass@k is the unbiased estimator of Chen et al. (2021): for a task tried n times with
c passes, 1 - C(n-c, k) / C(n, k), averaged over tasks. An episode passes when its
reward reaches the pass threshold. Errors (a setup that failed, a model that kept
failing) are counted apart and left out of every mean: they say nothing about the
model. An episode that ended without a reward (turns or time ran out) has reward 0.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from math import comb
from statistics import fmean
from typing import Any

from rich.table import Table

from orsbox.evaluation.episode import ERROR


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k attempts drawn from n (c of them passing)
    passes."""
    if not 0 < k <= n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, not {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def summarize(
    records: Iterable[dict[str, Any]], *, k: int, threshold: float, wall_s: float
) -> dict[str, Any]:
    """The report as JSON (summary.json): totals, pass@1 and pass@k, per-task counts."""
    records = list(records)
    played = [r for r in records if r["status"] != ERROR]
    per_task: dict[int, list[float]] = defaultdict(list)
    for r in played:
        per_task[r["task"]].append(r["reward"] or 0.0)
    tasks = {r["task"] for r in records}
    return {
        "tasks": len(tasks),
        "episodes": len(records),
        "errors": len(records) - len(played),
        "statuses": dict(Counter(r["status"] for r in records)),
        "mean_reward": _mean(r["reward"] or 0.0 for r in played),
        "pass_threshold": threshold,
        "k": k,
        "pass@1": _pass_rate(per_task, 1, threshold),
        f"pass@{k}": _pass_rate(per_task, k, threshold),
        "tasks_with_k_attempts": sum(len(v) >= k for v in per_task.values()),
        "turns_per_episode": _mean(r["turns"] for r in played),
        "tokens_per_episode": _mean(r["prompt_tokens"] + r["completion_tokens"] for r in played),
        "model_retries": sum(r.get("model_retries", 0) for r in records),
        "wall_s": round(wall_s, 1),
        "per_task": {
            str(task): {"attempts": len(v), "passed": sum(x >= threshold for x in v)}
            for task, v in sorted(per_task.items())
        },
        "error_messages": sorted({r["error"] for r in records if r["status"] == ERROR}),
    }


def _pass_rate(per_task: dict[int, list[float]], k: int, threshold: float) -> float | None:
    scores = [
        pass_at_k(len(rewards), sum(x >= threshold for x in rewards), k)
        for rewards in per_task.values()
        if len(rewards) >= k
    ]
    return round(fmean(scores), 4) if scores else None


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(fmean(values), 4) if values else None


def table(summary: dict[str, Any], title: str) -> Table:
    """The end-of-run table: one metric a row, so it fits any terminal."""
    k = summary["k"]
    rows = [
        ("tasks", str(summary["tasks"])),
        ("episodes", str(summary["episodes"])),
        ("mean reward", _number(summary["mean_reward"])),
        ("pass@1", _number(summary["pass@1"])),
        *([(f"pass@{k}", _number(summary[f"pass@{k}"]))] if k > 1 else []),
        ("errors", str(summary["errors"])),
        ("ended", ", ".join(f"{n} {status}" for status, n in sorted(summary["statuses"].items()))),
        ("turns / episode", _number(summary["turns_per_episode"], 1)),
        ("tokens / episode", _number(summary["tokens_per_episode"], 0)),
        ("model retries", str(summary["model_retries"])),
        ("wall time", f"{summary['wall_s']:.1f}s"),
    ]
    view = Table(title=title, show_header=False)
    view.add_column("metric", style="bold")
    view.add_column("value", justify="right")
    for row in rows:
        view.add_row(*row)
    return view


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
