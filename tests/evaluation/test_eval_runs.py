"""`orsbox eval` under stress: killed half-way and resumed, 16 episodes in flight, and
the failures a real model and a real environment produce."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from bench.servers import spawn_server, stop_process, wait_healthy
from orsbox.authoring.loading import load_environment
from orsbox.client import PING_INTERVAL_S, AsyncSession, ClientError
from orsbox.clock import ManualClock
from orsbox.server import create_app
from orsbox.settings import Settings
from tests.evaluation import runs
from tests.evaluation.scripts import MALFORMED, sums
from tests.model_server import Script, serve_model
from tests.servers import free_port
from tests.waiting import wait_until

RUN_S = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the server's


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_run_killed_half_way_resumes_with_one_result_per_task(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Tasks 0-3 answer at once, 4-7 are held: the run is killed with two of them in
    flight, then rerun: only what was missing is played."""
    options = ("--tasks", "0-7", "--concurrency", "2")
    with serve_model(sums(hold_from=4)) as (model_url, model), runs.sums_server() as (url, env):
        process = runs.start_eval("sums", model_url, tmp_path, "--url", url, *options)
        try:
            wait_until(
                lambda: len(runs.records(tmp_path)) == 4 and model.state.in_flight == 2,
                RUN_S,
                message="four episodes recorded and two held at the model",
            )
        finally:
            process.send_signal(sig)
            output = process.communicate(timeout=RUN_S)[0]
        if sig == signal.SIGINT:  # a clean stop: sessions deleted, summary written
            assert process.returncode == 130, output
            assert "interrupted: 4 episode(s) left" in output
            assert env.live == 0
            assert runs.summary(tmp_path)["complete"] is False
        assert len(runs.records(tmp_path)) == 4
        model.release()
        done = runs.run_eval("sums", model_url, tmp_path, "--url", url, *options)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 episode(s) were recorded by an earlier run and not played again" in done.stdout
    keys = [(r["task"], r["epoch"]) for r in runs.records(tmp_path)]
    assert sorted(keys) == [(task, 0) for task in range(8)]
    assert [model.started(f"[q{i}]") for i in range(4)] == [1, 1, 1, 1]  # not replayed
    summary = runs.summary(tmp_path)
    assert summary["complete"] is True and summary["episodes"] == 8
    assert summary["mean_reward"] == 1.0


def test_concurrency_16_keeps_16_episodes_in_flight_and_never_more(tmp_path: Path) -> None:
    """Every first reply waits until 16 wait together: the model server sees 16 at
    once, and the environment server 16 live sessions, twice over, never 17."""
    options = ("--tasks", "0-31", "--concurrency", "16")
    with serve_model(sums(rendezvous=16)) as (model_url, model), runs.sums_server() as (url, env):
        done = runs.run_eval("sums", model_url, tmp_path, "--url", url, *options)
        assert done.returncode == 0, done.stdout + done.stderr
        assert model.most_in_flight == 16
        assert env.most_live == 16
        assert env.live == 0
    assert runs.summary(tmp_path)["mean_reward"] == 1.0
    assert len(runs.records(tmp_path)) == 32


def test_errors_limits_images_and_options_reach_the_right_place(tmp_path: Path) -> None:
    """A setup failure and a model that keeps failing are errors, not rewards of 0; a
    reply that never comes ends at the time limit; images reach the model as image
    parts; the system prompt and sampling options reach the model server."""
    scripts = [
        *sums(),
        Script("[q5]", [[{"fail": [503] * 5}, {"tool": "submit", "arguments": {"answer": "10"}}]]),
        Script("[q6]", [[{"tool": "submit", "arguments": {"answer": "12"}, "hold": True}]]),
        Script("[q7]", [[{"empty": True}]]),
    ]
    system = tmp_path / "system.txt"
    system.write_text("You are careful.")
    out = tmp_path / "out"
    options = ["--tasks", "broken,picture,q5,q6,q7", "--retries", "2", "--time-limit", "2"]
    options += ["--system-prompt", str(system), "--max-tokens", "64", "--temperature", "0.5"]
    with serve_model(scripts[-3:] + scripts[:-3]) as (model_url, model):
        done = runs.run_eval(runs.SUMS, model_url, out, *options)
        assert done.returncode == 0, done.stdout + done.stderr
        by_id = {r["task_id"]: r for r in runs.records(out)}
        assert by_id["broken"]["status"] == "error" and by_id["broken"]["reward"] is None
        assert "setup" in by_id["broken"]["error"] and "task's files are missing" in done.stdout
        assert by_id["q5"]["status"] == "error"
        assert by_id["q5"]["error"].startswith("model request failed (after 2 retries): HTTP 503")
        assert (by_id["q6"]["status"], by_id["q6"]["reward"]) == ("time_limit", None)
        assert by_id["q7"]["error"] == "the model server answered without a choice"
        assert (by_id["picture"]["status"], by_id["picture"]["reward"]) == ("finished", 1.0)
        summary = runs.summary(out)
        assert (summary["errors"], summary["mean_reward"], summary["pass@1"]) == (3, 0.5, 0.5)

        picture = runs.transcript(out, by_id["picture"])["messages"]
        assert picture[0] == {"role": "system", "content": "You are careful."}
        assert [p["type"] for p in picture[1]["content"]] == ["text", "image_url"]
        assert picture[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
        after_look = picture[3:5]
        assert after_look[0] == {
            "role": "tool",
            "tool_call_id": "call_0_0",
            "content": "a red pixel",
        }
        assert (
            after_look[1]["role"] == "user" and after_look[1]["content"][0]["type"] == "image_url"
        )
        sent = model.state.requests[-1]
        assert (sent["max_tokens"], sent["temperature"]) == (64, 0.5)

        # --retry-errors plays an error again; its new record supersedes the old one
        again = runs.run_eval(runs.SUMS, model_url, out, "--tasks", "broken", "--retry-errors")
        assert again.returncode == 0, again.stdout + again.stderr
        assert [r["task_id"] for r in runs.records(out)].count("broken") == 2
        assert runs.summary(out)["episodes"] == 1

        # a model the server does not have: the run stops at once, nothing recorded
        unknown = runs.run_eval(runs.SUMS, model_url, tmp_path / "unknown", "--model", "gpt-x")
    assert unknown.returncode == 1
    assert "HTTP 404: The model `gpt-x` does not exist." in unknown.stdout
    assert runs.records(tmp_path / "unknown") == []


def test_any_ors_server_will_do_here_ors_sdks_reference_server(tmp_path: Path) -> None:
    """The reference server answers a malformed call in its own words; the model
    reads them, recovers, and the run scores like orsbox's."""
    port = free_port()
    server = spawn_server(["tests/fixture_envs/ors_sdk_sums.py", str(port)], tmp_path / "ors.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server, tmp_path / "ors.log", RUN_S)
        scripts = [
            Script("[q1]", [[*MALFORMED[:2], {"tool": "submit", "arguments": {"answer": "2"}}]])
        ]
        with serve_model(scripts + sums()) as (model_url, _):
            done = runs.run_eval("sums", model_url, tmp_path / "out", "--url", url)
    finally:
        stop_process(server)
    assert done.returncode == 0, done.stdout + done.stderr
    assert runs.rewards_by_task(tmp_path / "out") == {i: [1.0] for i in range(4)}
    (recovered,) = [r for r in runs.records(tmp_path / "out") if r["task"] == 1]
    answers = [m["content"] for m in runs.transcript(tmp_path / "out", recovered)["messages"]]
    assert answers[-3:] == ["Error: 'sbumit' is not a valid tool", None, "Correct!"]


@pytest.mark.anyio
async def test_a_session_outlives_the_servers_inactivity_timeout_while_the_model_thinks() -> None:
    """The episode pings its session as the reference clients do; without the pings
    the same wait gets the session reaped (the control). The server runs in this process
    at its default timeouts and shares a manual clock with the client, so the model
    thinks for three inactivity timeouts without the test waiting them out."""
    (environment,) = load_environment(str(runs.ROOT / runs.SUMS))
    clock, settings = ManualClock(), Settings(log_level="warning")
    app = create_app([environment], settings, clock=clock)
    thinking_s = 3 * settings.session_timeout_s

    async def episode(http: httpx.AsyncClient, ping_interval_s: float) -> dict:
        session = AsyncSession(
            http, str(http.base_url), "sums", "train", 3, None, ping_interval_s, clock=clock
        )
        async with session:
            await session.prompt()
            await clock.sleepers(2)  # the server's reaper and the client's pinger
            for _ in range(int(thinking_s / PING_INTERVAL_S)):  # no request of its own
                await clock.advance(PING_INTERVAL_S)  # returns once a due ping was answered
            return await session.call("submit", {"answer": "6"})

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orsbox") as http:
            assert (await episode(http, PING_INTERVAL_S))["output"]["reward"] == 1.0
            with pytest.raises(ClientError, match="404"):
                await episode(http, 2 * thinking_s)


def test_a_task_the_split_lacks_is_a_bad_parameter(tmp_path: Path) -> None:
    with serve_model(sums()) as (model_url, _):
        done = runs.run_eval(runs.SUMS, model_url, tmp_path, "--tasks", "q1,q99")
    assert done.returncode == 2
    assert "Invalid value for --tasks: no task has the id 'q99'" in done.stderr
