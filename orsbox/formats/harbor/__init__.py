"""Harbor and Terminal-Bench task folders served as ORS environments (work in progress)."""

from __future__ import annotations

from pathlib import Path

from orsbox.authoring.environment import Environment
from orsbox.errors import ManifestError
from orsbox.formats.options import FormatOptions

TASK_FILES = ("task.toml", "task.yaml")


def is_task_folder(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in TASK_FILES)


def is_harbor_path(path: Path) -> bool:
    """A task folder, or a folder of task folders (a dataset)."""
    if not path.is_dir() or (path / "orsbox.toml").is_file():
        return False
    return is_task_folder(path) or any(is_task_folder(child) for child in path.iterdir())


def load(path: Path, options: FormatOptions) -> list[type[Environment]]:
    raise ManifestError(f"harbor:{path}: Harbor tasks are not supported yet")
