"""Grading's third outcome (issue 28): a grader that could not run is an error naming
its cause, never a reward of 0.0. Kept once per episode like a reward; on a real server:
the error event every client sees, the metric, the episode record, the status page,
the operator's `--grading-errors as-zero`; and graders that raise, which already were
errors. (Each format's rules: tests/formats/test_could_not_run.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openreward import OpenReward
from ors.client import ORS
from prometheus_client.parser import text_string_to_metric_families

from orsbox.authoring import ToolRaised, call_tool, tool
from orsbox.authoring.graded_once import GradedOnce
from orsbox.authoring.loading import load_environment
from orsbox.client import Session, ToolFailed
from orsbox.errors import GradingError
from orsbox.protocol.types import TextBlock, ToolOutput
from tests.environments.conftest import orsbox
from tests.evaluation import runs
from tests.fixture_envs.grading_envs import MISSING
from tests.model_server import Script, serve_model
from tests.monitoring.conftest import Episode, read_db, wait_for_episode
from tests.servers import LiveServer, start_server
from tests.sse_client import Stream

GRADED = "tests/fixture_envs/grading_envs.py:Graded"
OPENREWARD_GRADER = "tests/fixture_envs/openreward_grading_env.py:BrokenGrader"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the servers' loop; openreward's tools need asyncio


# -- the outcome itself -------------------------------------------------------------------
def test_the_error_event_text_carries_the_cause_back() -> None:
    error = GradingError("uvx: command not found\nand more", cause="runner-missing")
    back = GradingError.from_wire(error.wire())
    assert back is not None and (back.cause, back.message) == (error.cause, error.message)
    assert GradingError.from_wire("tool 'submit' failed: ValueError: x") is None


class _Counted(GradedOnce):
    gradings = 0

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["test"]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="")]

    async def grade_episode(self, note: str) -> ToolOutput:
        self.gradings += 1
        raise GradingError("no reward file", cause="no-reward-file")

    @tool
    async def submit(self) -> ToolOutput:
        """Grade."""
        return await self.final_output()


@pytest.mark.anyio
async def test_a_grading_error_is_kept_like_a_reward_graded_once() -> None:
    env = _Counted({})
    for _ in range(2):
        with pytest.raises(GradingError, match="no reward file"):
            await env.final_output()
    assert env.gradings == 1


@pytest.mark.anyio
async def test_a_tool_call_hands_the_server_the_grading_error_itself() -> None:
    """One exception type from the grader to the server (which makes the event, the
    record and the metric of it): `call_tool` neither wraps nor rewrites it."""
    with pytest.raises(GradingError) as raised:
        await call_tool(_Counted({}), "submit", {})
    assert type(raised.value) is GradingError and not isinstance(raised.value, ToolRaised)
    assert (raised.value.cause, raised.value.message) == ("no-reward-file", "no reward file")


# -- on a real server ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def graded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path]]:
    tmp = tmp_path_factory.mktemp("grading-errors")
    db = tmp / "episodes.sqlite3"
    server = start_server([GRADED], tmp, episodes_db=db)
    yield server, db
    server.stop()


def submitted(server: LiveServer, index: int) -> tuple[Stream, str]:
    """One episode of task `index` of `graded` that submits: the call's answer, and
    the session's id (to find its record)."""
    episode = Episode(server, "graded")
    episode.create(index=index)
    stream = episode.call("submit", answer="0")
    episode.delete()
    return stream, episode.sid


def _metric(server: LiveServer, name: str, **labels: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return 0.0


def test_a_grading_error_is_the_submit_calls_error_counted_and_recorded(
    graded_server: tuple[LiveServer, Path],
) -> None:
    server, db = graded_server
    stream, sid = submitted(server, 1)
    assert stream.events[1:] == [
        ("error", f"[infra] grading_error: grading error [runner-missing]: {MISSING}")
    ]
    row = wait_for_episode(db, sid)
    assert (row["state"], row["grading_cause"], row["final_reward"]) == (
        "grading_error",
        "runner-missing",
        None,
    )
    assert row["error"] == f"grading error [runner-missing]: {MISSING}"
    (call,) = read_db(db, "SELECT outcome FROM calls WHERE episode_id = ?", row["id"])
    assert call["outcome"] == "grading_error"
    cause = {"environment": "graded", "cause": "runner-missing"}
    assert _metric(server, "orsbox_grading_errors_total", **cause) >= 1
    assert _metric(server, "orsbox_tool_calls_total", outcome="grading_error") >= 1
    page = httpx.get(f"{server.url}/").text
    assert "grading_error (runner-missing)" in page
    transcript = httpx.get(f"{server.url}/ui/episodes/{row['id']}").text
    assert "<th>grading error</th><td>runner-missing</td>" in transcript


def test_every_client_sees_a_failed_call_not_a_reward(
    graded_server: tuple[LiveServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = graded_server
    with (
        ORS(base_url=server.url) as ors,
        ors.environment("graded").session(split="train", index=1) as session,
        pytest.raises(RuntimeError, match=r"grading error \[runner-missing\]") as sdk,
    ):
        session.call_tool("submit", {"answer": "6"})
    assert MISSING in str(sdk.value)  # every line of the message
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    client = OpenReward(api_key="test-key")
    try:
        env = client.environments.get("graded")
        with (
            env.session(task=env.get_task("train", 1)) as session,
            pytest.raises(Exception, match=r"grading error \[runner-missing\]"),
        ):
            session.call_tool("submit", {"answer": "6"})
    finally:
        client.environments.close()
    with Session(server.url, "graded", "train", 1) as own, pytest.raises(ToolFailed) as failed:
        own.call("submit", {"answer": "6"})
    assert failed.value.grading_error is not None
    assert failed.value.grading_error.cause == "runner-missing"
    assert failed.value.infra  # the [infra] marker, as orsbox's own client reads it


def test_an_exception_in_a_python_grader_is_already_an_error(
    graded_server: tuple[LiveServer, Path],
) -> None:
    server, db = graded_server
    stream, sid = submitted(server, 2)
    assert stream.events[1:] == [
        ("error", "tool_failed: tool 'submit' failed: ValueError: the grader crashed")
    ]
    row = wait_for_episode(db, sid)
    assert (row["state"], row["grading_cause"], row["final_reward"]) == ("ended", None, None)


@pytest.mark.anyio
async def test_an_exception_in_an_openreward_grader_is_already_an_error() -> None:
    """Served unchanged, an openreward environment's tool goes through the same
    `call_tool` as orsbox's own: a grader that raises ends the call in an error."""
    [env_cls] = load_environment(OPENREWARD_GRADER)
    env = env_cls(task_spec={"question": "what is 2+2?"})
    with pytest.raises(ToolRaised) as raised:
        await call_tool(env, "submit", {"answer": "4"})
    assert str(raised.value) == "tool 'submit' failed: RuntimeError: the grader's runner is missing"
    assert GradingError.from_wire(str(raised.value)) is None  # no cause: not a grading error


def test_as_zero_gives_the_old_reward_and_keeps_the_cause(tmp_path: Path) -> None:
    db = tmp_path / "episodes.sqlite3"
    server = start_server([GRADED, "--grading-errors", "as-zero"], tmp_path, episodes_db=db)
    try:
        stream, sid = submitted(server, 1)
        result = stream.result()
        row = wait_for_episode(db, sid)
        counted = _metric(server, "orsbox_grading_errors_total", cause="runner-missing")
    finally:
        server.stop()
    output = result["output"]
    assert (output["reward"], output["finished"]) == (0.0, True)
    assert output["metadata"]["grading_error"] == {"cause": "runner-missing", "message": MISSING}
    assert output["blocks"][0]["text"].startswith("[reward 0: grading error [runner-missing]")
    assert (row["state"], row["grading_cause"], row["final_reward"]) == (
        "grading_error",
        "runner-missing",
        0.0,
    )
    assert counted == 1


def test_a_grading_errors_value_the_setting_does_not_know_is_refused() -> None:
    done = orsbox("serve", GRADED, "--grading-errors", "as-one", "--port", "1")
    assert done.returncode == 2
    assert "one of error, as-zero" in done.stderr


def test_orsbox_eval_with_as_zero_scores_the_old_zero(tmp_path: Path) -> None:
    """Without the switch the episode is an error (tests/formats/harbor plays that on a
    TB2-shaped task); with it, a finished episode of reward 0.0 that keeps its cause."""
    answer = [{"tool": "submit", "arguments": {"answer": "6"}}]
    with serve_model([Script("[runner missing]", [answer])]) as (model_url, _):
        done = runs.run_eval(
            GRADED, model_url, tmp_path, "--tasks", "1", "--grading-errors", "as-zero"
        )
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = runs.records(tmp_path)
    assert (record["status"], record["reward"], record["error"]) == ("finished", 0.0, None)
    assert runs.summary(tmp_path)["errors"] == 0
    transcript = runs.transcript(tmp_path, record)
    assert transcript["calls"][0]["reward"] == 0.0
    said = [str(m.get("content")) for m in transcript["messages"] if m["role"] == "tool"]
    assert "grading error [runner-missing]" in said[0]  # the cause, in the output's text
