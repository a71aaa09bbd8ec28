"""A format that is only its seam: the files a new benchmark format adds
(docs/benchmarks.md, "Adding a format"), importing nothing of another format
(tests/formats/test_skeleton_format.py holds it to that).

This package is what `orsbox/formats/<name>/__init__.py` would be: the format's own
options and its loader, declared as one `Format`. Its datasets are JSON lines, one task
a line: `{"name": ..., "prompt": ..., "check": "a shell command that exits 0 when the
task is solved"}`, checked in the episode's sandbox at `submit`. Listing it is one
entry in `orsbox.formats.registry.FORMATS` (the tests add it with monkeypatch); with
that alone `orsbox serve skeleton:FILE` serves it, and `--check-timeout` is a flag of
every dataset command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import Field

from orsbox.authoring.environment import Environment
from orsbox.errors import ManifestError
from orsbox.formats import Format, FormatOptions
from orsbox.formats.options import Flag


class SkeletonOptions(FormatOptions):
    """What only skeleton datasets take."""

    check_timeout_s: Annotated[float, Flag("--check-timeout")] = Field(
        default=60.0, gt=0, description="seconds a skeleton task's check may run"
    )


def load(path: Path, given: FormatOptions) -> list[type[Environment]]:
    """One environment serving every line of the file at `path`."""
    from tests.skeleton_format.environment import SkeletonTask, dataset_environment

    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ManifestError(f"skeleton:{path}: {e.strerror}") from None
    tasks = [SkeletonTask(**json.loads(line)) for line in lines if line.strip()]
    if not tasks:
        raise ManifestError(f"skeleton:{path}: no tasks")
    return [dataset_environment(path, tasks, given.of(SkeletonOptions))]


FORMAT = Format(
    prefix="skeleton",
    load=load,
    options=SkeletonOptions,
    help="skeleton:FILE (JSON lines of checks)",
)
