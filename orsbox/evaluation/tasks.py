"""`--tasks`: which tasks of a split to run, as indices (`3`), inclusive ranges
(`0-9`) and task ids (`median-even`), comma-separated. A task's id is its `id`,
`instance_id`, `task_id` or `name` field, whichever it has first."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from orsbox.errors import OrsboxError

ID_FIELDS = ("id", "instance_id", "task_id", "name")
RANGE = re.compile(r"^(\d+)-(\d+)$")


class TaskSelectionError(OrsboxError):
    """`--tasks` names a task the split does not have."""


def task_id(task: Any) -> str | None:
    if isinstance(task, dict):
        for name in ID_FIELDS:
            if isinstance(task.get(name), str | int) and not isinstance(task.get(name), bool):
                return str(task[name])
    return None


def select_tasks(selection: str | None, tasks: Sequence[Any]) -> list[int]:
    """The indices `selection` names, in the order given, without repeats; all of them
    when it is empty."""
    if not selection or not selection.strip():
        return list(range(len(tasks)))
    ids = {task_id(task): i for i, task in enumerate(tasks) if task_id(task) is not None}
    chosen: list[int] = []
    for piece in (p.strip() for p in selection.split(",")):
        if piece:
            chosen += _indices(piece, ids, len(tasks))
    return list(dict.fromkeys(chosen))


def _indices(piece: str, ids: dict[str | None, int], count: int) -> list[int]:
    if piece.isdigit():
        return [_in_range(int(piece), count)]
    bounds = RANGE.match(piece)
    if bounds and piece not in ids:
        first, last = int(bounds[1]), int(bounds[2])
        if first > last:
            raise TaskSelectionError(f"--tasks {piece}: the range runs backwards")
        return [_in_range(i, count) for i in range(first, last + 1)]
    if piece in ids:
        return [ids[piece]]
    known = ", ".join(sorted(str(i) for i in ids)[:10]) or "none: use indices"
    raise TaskSelectionError(f"--tasks: no task has the id {piece!r} (ids: {known})")


def _in_range(index: int, count: int) -> int:
    if index >= count:
        raise TaskSelectionError(f"--tasks: index {index} is past the split's {count} tasks")
    return index
