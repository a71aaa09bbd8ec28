"""Benchmark formats served as they are: each is a loader that turns a dataset people
already have into environment classes the server already knows how to serve.

    swebench:PATH   SWE-bench-schema rows (SWE-bench, SWE-Gym, SWE-smith, SWE-rebench,
                    R2E-Gym): `orsbox.formats.swebench`
    harbor:PATH     Harbor task folders and Terminal-Bench 1 tasks: `orsbox.formats.harbor`

A format is declared once, as a `Format` in its own package, and listed in
`orsbox.formats.registry.FORMATS`: targets find it there by its prefix (or by a path it
recognises), and the command line offers its options as flags. Its loader takes the
path and the user's `FormatOptions` and returns a list of `Environment` subclasses,
usually one `DatasetEnvironment` (`orsbox.formats.dataset`); it checks everything it can
at load and raises `ManifestError` naming the file, the row or task, the field and the
problem. docs/benchmarks.md, "Adding a format", lists the files a new one takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orsbox.formats.options import FormatOptions, parse_memory

if TYPE_CHECKING:
    from orsbox.authoring.environment import Environment

__all__ = ["Format", "FormatOptions", "parse_memory"]


@dataclass(frozen=True)
class Format:
    """A benchmark format: `PREFIX:PATH` on the command line, loaded by `load`.

    `options` is the format's own options model, a `FormatOptions` subclass whose extra
    fields become flags; `help` names the targets it takes, for `--help`; `recognises`,
    when set, says whether a bare path is one of its datasets (a Harbor task folder)."""

    prefix: str
    load: Callable[[Path, FormatOptions], list[type[Environment]]]
    options: type[FormatOptions] = FormatOptions
    help: str = ""
    recognises: Callable[[Path], bool] | None = None

    def own_fields(self) -> list[str]:
        """The fields only this format takes (the rest are every format's)."""
        return [
            name for name in self.options.model_fields if name not in FormatOptions.model_fields
        ]
