"""SWE-bench-schema datasets served as ORS environments (work in progress)."""

from __future__ import annotations

from pathlib import Path

from orsbox.authoring.environment import Environment
from orsbox.errors import ManifestError
from orsbox.formats.options import FormatOptions


def load(path: Path, options: FormatOptions) -> list[type[Environment]]:
    raise ManifestError(f"swebench:{path}: SWE-bench datasets are not supported yet")
