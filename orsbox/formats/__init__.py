"""Benchmark formats served as they are: each is a loader that turns a dataset people
already have into environment classes the server already knows how to serve.

    swebench:PATH   SWE-bench-schema rows (SWE-bench, SWE-Gym, SWE-smith, SWE-rebench,
                    R2E-Gym): `orsbox.formats.swebench`
    harbor:PATH     Harbor task folders and Terminal-Bench 1 tasks: `orsbox.formats.harbor`

A loader takes the path and the user's `FormatOptions` and returns a list of
`Environment` subclasses; it checks everything it can at load and raises
`ManifestError` naming the file, the row or task, the field and the problem.
"""

from __future__ import annotations

from orsbox.formats.options import FormatOptions, parse_memory

__all__ = ["FormatOptions", "parse_memory"]
