"""The Docker backend under test, on three engines: runc on the main one, runsc (gVisor)
and Podman on private ones (tests/runtimes.py starts nothing: it skips, or in CI fails,
where an engine does not answer)."""

from __future__ import annotations

from collections.abc import Mapping

from tests.runtimes import (
    ENGINE_DIFFERENCES,
    GVISOR_DIFFERENCES,
    PODMAN_DIFFERENCES,
    BackendUnderTest,
    EngineOutside,
    engine_maker,
)


def on_engine(
    name: str, who: str, differences: Mapping[str, str] | None = None
) -> BackendUnderTest:
    """The backend on `name`'s engine, with what every engine here and it alone document."""
    documented = {**ENGINE_DIFFERENCES, **(differences or {})}
    return BackendUnderTest(
        name, who, engine_maker(name), documented, EngineOutside(), backend="docker"
    )


UNDER_TEST = {
    "runc": on_engine("runc", "runc"),
    "runsc": on_engine("runsc", "gVisor", GVISOR_DIFFERENCES),
    "podman": on_engine("podman", "Podman", PODMAN_DIFFERENCES),
}
