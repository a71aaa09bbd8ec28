"""The backends the conformance suite runs on, each declared by a module of this package
of its own: `fake.py` (host processes) and `docker.py` (runc on the main engine, runsc
and Podman on private ones). A module here defines `UNDER_TEST`, name ->
`tests.runtimes.BackendUnderTest` (how to make the backend, the differences it documents,
what a test does to its sandboxes from outside), and that is all a backend does to join:
`collect` finds every module, tests/sandbox/conftest.py runs each conformance test once
per backend collected, and tests/test_backend_config.py fails for a backend the factory
lists (`orsbox.sandbox.config.BACKENDS`) that no module here declares. No existing test
or list is edited (docs/backends.md, "The file count").
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from tests.runtimes import BackendUnderTest


def collect(package: str = __name__, path: Iterable[str] = __path__) -> dict[str, BackendUnderTest]:
    """Every backend under test the modules of `package` (at `path`) declare, by name."""
    found: dict[str, BackendUnderTest] = {}
    for module in sorted(pkgutil.iter_modules(list(path)), key=lambda m: m.name):
        declared = importlib.import_module(f"{package}.{module.name}").UNDER_TEST
        twice = set(found) & set(declared)
        assert not twice, f"{package}.{module.name} declares {twice} again"
        found.update(declared)
    return found


UNDER_TEST = collect()
BACKENDS = list(UNDER_TEST)
