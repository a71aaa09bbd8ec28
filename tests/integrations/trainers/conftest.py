"""One orsbox server with several environments for the trainers' tests (a worker's
files share it): `math` (bundled), `coding` (bundled, a container per episode) and
`shaky` (envs.py: a grader that cannot run, a setup that fails). The `openreward`
client every trainer here uses reaches it through `OPENREWARD_SESSION_URL`, as
docs/trainers.md tells a user to point it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.servers import LiveServer, start_server
from tests.waiting import wait_until

SHAKY = "tests/integrations/trainers/envs.py:Shaky"


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Iterator[LiveServer]:
    live = start_server(["math", "coding", SHAKY], tmp_path_factory.mktemp("trainers"))
    yield live
    live.stop()


@pytest.fixture
def ors_url(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The variables a trainer's process gets, and after the test: no session left on
    the server (every adapter closed what it opened)."""
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    monkeypatch.setenv("OPENREWARD_API_KEY", "trainer-key")
    yield server.url
    wait_until(
        lambda: httpx.get(f"{server.url}/health").json()["sessions"] == 0,
        20,
        interval_s=0.1,
        message="every session the trainer's class opened deleted",
    )
