"""The bundled Python environment (math), served from its file without Docker; all four
bundled environments are played through `orsbox serve` in tests/environments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ors.client import ORS

from tests.servers import LiveServer, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(["environments/math/environment.py"], tmp_path_factory.mktemp("bundled"))
    yield live
    live.stop()


@pytest.mark.parametrize(("answer", "reward"), [("7", 1.0), ("8", 0.0)])
def test_math_episode(server: LiveServer, answer: str, reward: float) -> None:
    with ORS(base_url=server.url) as client:
        env = client.environment("math")
        task = env.list_tasks("train")[0]
        with env.session(task=task) as session:
            assert "muffins" in session.get_prompt()[0].text
            result = session.call_tool("submit", {"answer": answer})
            assert (result.reward, result.finished) == (reward, True)
