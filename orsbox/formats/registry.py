"""The formats orsbox serves: adding one is one entry here (docs/benchmarks.md, "Adding
a format"). Targets are matched against them in order, by prefix (`swebench:PATH`) and
then by the paths a format recognises; the command line offers their options. Each
format's package is imported here, so it stays light: its loader imports what it needs
(the `swebench` package, Harbor's verifier) when called."""

from __future__ import annotations

from pathlib import Path

from orsbox.errors import ManifestError
from orsbox.formats import Format, harbor, swebench

FORMATS: tuple[Format, ...] = (swebench.FORMAT, harbor.FORMAT)


def find_format(target: str) -> tuple[Format, Path] | None:
    """The format `target` names and the dataset's path; None when it names none."""
    prefix, sep, rest = target.partition(":")
    for found in FORMATS:
        if sep and prefix == found.prefix:
            if not rest:
                raise ManifestError(f"{target!r}: give the dataset's path after {prefix}:")
            return found, Path(rest)
    for found in FORMATS:
        if found.recognises is not None and found.recognises(Path(target)):
            return found, Path(target)
    return None


def targets_help() -> str:
    """What each format takes as a target, for a command's help."""
    return ", ".join(f.help for f in FORMATS if f.help)
