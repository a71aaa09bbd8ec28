"""`Engine._remove_with`'s answers to the engine's refusals (the removal itself is checked
against real engines in tests/sandbox/test_lifecycle.py and tests/adversarial)."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest

from orsbox.sandbox.docker.engine import Engine

# what Docker 20.10 answered, word for word, removing a gVisor sandbox the host's OOM
# killer had hit (10 s after its kill; the removal asked again succeeded at once)
ZOMBIE = (
    "Could not kill running container b61cb3768e72251f, cannot remove - container "
    "b61cb3768e72 PID 19241 is zombie and can not be killed. Use the --init option when "
    "creating containers to run an init inside the container that forwards signals and "
    "reaps processes"
)


class RefusingApi:
    """Refuses the first `refusals` removals with `explanation`, then removes."""

    def __init__(self, refusals: int, explanation: str) -> None:
        self.refusals, self.explanation, self.asked = refusals, explanation, 0

    def remove_container(self, container_id: str, force: bool) -> None:
        self.asked += 1
        if self.asked <= self.refusals:
            raise docker.errors.APIError("500 Server Error", explanation=self.explanation)

    def inspect_container(self, container_id: str) -> Any:
        raise docker.errors.NotFound("gone")


def test_a_removal_refused_over_a_zombie_is_asked_again() -> None:
    api = RefusingApi(2, ZOMBIE)
    Engine._remove_with(api, "b61cb3768e72", wait_s=5)
    assert api.asked == 3


def test_other_refusals_and_a_zombie_past_the_wait_are_raised() -> None:
    with pytest.raises(docker.errors.APIError, match="device or resource busy"):
        Engine._remove_with(RefusingApi(1, "device or resource busy"), "c", wait_s=5)
    api = RefusingApi(100, ZOMBIE)
    with pytest.raises(docker.errors.APIError, match="zombie"):
        Engine._remove_with(api, "c", wait_s=0.3)
    assert 2 <= api.asked < 100
