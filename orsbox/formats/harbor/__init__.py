"""Harbor and Terminal-Bench task folders served as ORS environments, unmodified.

`harbor:PATH`, or any folder that is a task folder (`task.toml`: Harbor; `task.yaml`:
Terminal-Bench 1) or holds task folders, is one environment: one task per folder,
sorted by name. Modules, by concept:

    task_config  the task files' schemas, every field (pydantic, unknown fields refused)
    refusals     what orsbox cannot honour, refused at load with task, field and reason
    images       a task's image: its Dockerfile built (image map applied), or as given
    task         a task folder read into what an episode needs, for both formats
    verifier     grading exactly as Harbor's verifier (and Terminal-Bench 1's harness)
    environment  the `DatasetEnvironment` subclass that serves a dataset

docs/harbor.md is the user's guide.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import Field

from orsbox.authoring.environment import Environment
from orsbox.errors import ManifestError
from orsbox.formats import Format
from orsbox.formats.options import FormatOptions

TASK_FILES = ("task.toml", "task.yaml")

log = logging.getLogger("orsbox.formats.harbor")


class HarborOptions(FormatOptions):
    """What only Harbor tasks take."""

    build_missing: bool = Field(
        default=False,
        description="build a Harbor task's missing docker_image from its environment/Dockerfile",
    )


def is_task_folder(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in TASK_FILES)


def is_harbor_path(path: Path) -> bool:
    """A task folder, or a folder of task folders (a dataset)."""
    if not path.is_dir() or (path / "orsbox.toml").is_file():
        return False
    return is_task_folder(path) or any(is_task_folder(child) for child in path.iterdir())


def task_folders(path: Path) -> list[Path]:
    """The task folders `path` names: itself, or its task subfolders sorted by name."""
    if not path.is_dir():
        raise ManifestError(f"harbor:{path}: not a folder")
    if is_task_folder(path):
        return [path]
    folders = sorted(
        (child for child in path.iterdir() if is_task_folder(child)), key=lambda p: p.name
    )
    if not folders:
        raise ManifestError(
            f"harbor:{path}: no task folders (folders with a task.toml or task.yaml) in it"
        )
    return folders


def load(path: Path, given: FormatOptions) -> list[type[Environment]]:
    """One environment serving every task under `path`. A task that cannot be served is
    a `ManifestError` naming it, the file or field and the problem: raised for a single
    task folder; for a dataset, logged, and the other tasks are served (none left:
    raised)."""
    from orsbox.formats.harbor.environment import dataset_environment
    from orsbox.formats.harbor.phases import NetworkAllowed
    from orsbox.formats.harbor.task import read_task

    options = given.of(HarborOptions)
    allowed = NetworkAllowed.from_settings()
    folders = task_folders(path)
    tasks, refused = [], {}
    for folder in folders:
        try:
            tasks.append(read_task(folder, options, allowed))
        except ManifestError as e:
            if len(folders) == 1:
                raise
            refused[folder.name] = str(e)
            log.error("not serving %s", e)
    if not tasks:
        raise ManifestError(
            f"harbor:{path}: no task can be served:\n" + "\n".join(refused.values())
        )
    return [dataset_environment(path, tasks, options, refused)]


FORMAT = Format(
    prefix="harbor",
    load=load,
    options=HarborOptions,
    help="harbor:PATH or a folder of Harbor / Terminal-Bench tasks",
    recognises=is_harbor_path,
)
