"""The fake backend's own answers outside the conformance suite."""

from __future__ import annotations

import pytest

from orsbox.sandbox.fake import FakeBackend

pytestmark = [pytest.mark.anyio, pytest.mark.fake]


async def test_the_fake_leaves_nothing_on_the_host() -> None:
    """Nothing to sweep, no guard to prove; Docker's answers are tested against the real
    firewall (tests/network/test_guard.py, through `orsbox gc` and `orsbox doctor`)."""
    backend = FakeBackend()
    assert await backend.sweep_host_state(everything=True) is None
    [guard] = await backend.network_checks(allowlists=True)
    assert guard.ok and guard.name == "egress guard" and "not needed" in guard.detail
    assert backend.login_command("any") is None
