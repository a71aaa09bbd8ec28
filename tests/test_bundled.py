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


def test_math_grades_the_first_submit_only_and_keeps_the_answer_to_itself(
    server: LiveServer,
) -> None:
    """The exploit a trainer would teach ("submit anything, read the answer, submit
    it"): the wrong answer is not told the right one, and a second submit, the right
    answer included, gets the first one's finished result back, reward unchanged."""
    with ORS(base_url=server.url) as client:
        env = client.environment("math")
        task = env.list_tasks("train")[0]
        gold = task.task_spec["answer"].split("####")[-1].strip()
        with env.session(task=task) as session:
            wrong = session.call_tool("submit", {"answer": "8"})
            assert (wrong.blocks[0].text, wrong.reward, wrong.finished) == ("Incorrect.", 0.0, True)
            assert gold not in wrong.blocks[0].text
            again = session.call_tool("submit", {"answer": gold})
            assert (again.blocks[0].text, again.reward, again.finished) == ("Incorrect.", 0.0, True)
        with env.session(task=task) as session:
            assert session.call_tool("submit", {"answer": gold}).reward == 1.0
            assert session.call_tool("submit", {"answer": "8"}).reward == 1.0
