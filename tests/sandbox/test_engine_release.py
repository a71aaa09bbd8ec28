"""`orsbox doctor`'s engine release check: which Docker releases carry libnetwork's
deadlock on mass removal (moby/moby#42545, fixed in 20.10.27 and 23.0), and how a
warning reads in doctor's last line without failing it."""

from __future__ import annotations

import pytest

from orsbox.cli.doctor import summary
from orsbox.sandbox.diagnosis import EngineCheck
from orsbox.sandbox.docker.diagnosis import release_check


@pytest.mark.parametrize(
    ("description", "warned"),
    [
        ("Docker 20.10.24+dfsg1 at unix:///var/run/docker.sock", True),  # Debian 12's
        ("Docker 20.10.26 at DOCKER_HOST", True),
        ("Docker 19.03.15 at DOCKER_HOST", True),
        ("Docker 20.10.27 at DOCKER_HOST", False),
        ("Docker 23.0.0 at DOCKER_HOST", False),
        ("Docker 28.2.2 at DOCKER_HOST", False),
        ("Podman 4.3.1 at unix:///run/podman.sock", False),
        ("Docker unknown at DOCKER_HOST", False),
    ],
)
def test_releases_without_the_deadlock_fix_warn_and_pass(description: str, warned: bool) -> None:
    check = release_check(description)
    assert check.ok and check.warning is warned
    if warned:
        assert "moby/moby#42545" in check.detail and "20.10.27" in check.fix
    else:
        assert check.detail == description.split(" at ")[0]


def test_the_summary_counts_warnings_apart_from_failures() -> None:
    ok, warned = EngineCheck("a", True, ""), EngineCheck("b", True, "", "fix", warning=True)
    failed = EngineCheck("c", False, "", "fix")
    assert summary([ok, ok]) == "All good."
    assert summary([ok, warned]) == "All good, 1 warning."
    assert summary([warned, warned, failed]) == "2 ok, 1 failed, 2 warnings"
