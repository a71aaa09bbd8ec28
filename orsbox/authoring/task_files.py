"""Task files of declarative environments: JSONL (one JSON object a line) or Parquet.

Read once, when the environment is loaded, so a broken file stops the server from
starting with a message naming the file and line, instead of failing an episode later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orsbox.errors import ManifestError

SUFFIXES = (".jsonl", ".parquet")


def read_tasks(path: Path) -> list[dict[str, Any]]:
    """Every task in `path`; raises `ManifestError` naming the file (and line)."""
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    if path.suffix == ".parquet":
        return _read_parquet(path)
    raise ManifestError(f"{path}: task files must end in {' or '.join(SUFFIXES)}")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: cannot read tasks: {e}") from None
    tasks = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
        except json.JSONDecodeError as e:
            raise ManifestError(
                f"{path}:{number}: invalid JSON: {e.msg} (column {e.colno})"
            ) from None
        if not isinstance(task, dict):
            raise ManifestError(
                f"{path}:{number}: a task must be a JSON object, not {type(task).__name__}"
            )
        tasks.append(task)
    return tasks


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ManifestError(
            f"{path}: reading Parquet needs pyarrow (pip install pyarrow)"
        ) from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises a zoo of types for a damaged file
        raise ManifestError(f"{path}: cannot read Parquet: {e}") from None
