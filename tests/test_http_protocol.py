"""Raw HTTP against a real server: every status code, SSE framing, chunking, reconnect."""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx
import pytest

from orsbox.settings import Settings
from tests.fixture_envs.protocol_envs import BIG_TEXT
from tests.servers import LiveServer
from tests.sse_client import post_sse


def new_session(server: LiveServer, **task: object) -> str:
    sid = uuid.uuid4().hex
    spec = {"question": "q", "answer": "4", **task}
    r = httpx.post(f"{server.url}/create", headers={"X-Session-ID": sid}, json={"task_spec": spec})
    assert r.status_code == 200 and r.json() == {"sid": sid}
    return sid


def get(server: LiveServer, path: str, sid: str | None = None) -> httpx.Response:
    headers = {"X-Session-ID": sid} if sid else {}
    return httpx.get(f"{server.url}{path}", headers=headers, timeout=30)


def post(
    server: LiveServer, path: str, body: object = None, sid: str | None = None, **kw: object
) -> httpx.Response:
    headers = {"X-Session-ID": sid} if sid else {}
    return httpx.post(f"{server.url}{path}", headers=headers, json=body, timeout=30, **kw)  # type: ignore[arg-type]


# -- discovery -------------------------------------------------------------------------
def test_health_version_and_environments(protocol_server: LiveServer) -> None:
    health = get(protocol_server, "/health").json()
    assert health["status"] == "ok" and health["cell"] == Settings().cell
    assert get(protocol_server, "/version").json()["version"]
    assert get(protocol_server, "/list_environments").json() == ["protocol", "second_env"]


def test_tool_specs_serialise_exactly(protocol_server: LiveServer) -> None:
    tools = get(protocol_server, "/protocol/tools").json()["tools"]
    assert [t["name"] for t in tools] == sorted(t["name"] for t in tools)
    assert all(set(t) == {"name", "description", "input_schema"} for t in tools)
    by_name = {t["name"]: t for t in tools}
    assert by_name["big"]["input_schema"] is None
    assert by_name["submit"]["input_schema"]["required"] == ["answer"]
    assert by_name["submit"]["description"] == "Submit the final answer."
    assert "hint" not in by_name


def test_splits_and_tasks(protocol_server: LiveServer) -> None:
    assert get(protocol_server, "/protocol/splits").json() == [
        {"name": "train", "type": "train"},
        {"name": "test", "type": "test"},
        {"name": "hard", "type": "validation"},
    ]
    tasks = post(protocol_server, "/protocol/tasks", {"split": "hard"}).json()
    assert tasks["env_name"] == "protocol" and len(tasks["tasks"]) == 5
    assert post(protocol_server, "/protocol/num_tasks", {"split": "test"}).json() == {
        "num_tasks": 5
    }
    one = post(protocol_server, "/protocol/task", {"split": "test", "index": 2}).json()
    assert one == {
        "task": {"question": "test 2: what is 2+2?", "answer": "4"},
        "env_name": "protocol",
    }


@pytest.mark.parametrize(
    ("start", "stop", "expected"),
    [
        (None, None, [0, 1, 2, 3, 4]),
        (-2, None, [3, 4]),
        (1, -1, [1, 2, 3]),
        (None, 2, [0, 1]),
        (4, 1, []),
        (-99, 99, [0, 1, 2, 3, 4]),
    ],
)
def test_task_range_is_a_python_slice(
    protocol_server: LiveServer, start: int | None, stop: int | None, expected: list[int]
) -> None:
    body = {
        "split": "train",
        **({"start": start} if start is not None else {}),
        **({"stop": stop} if stop is not None else {}),
    }
    answer = post(protocol_server, "/protocol/task_range", body).json()
    assert [int(t["answer"]) // 2 for t in answer["tasks"]] == expected
    assert answer["env_name"] == "protocol"


def test_bare_paths_reach_the_default_environment(protocol_server: LiveServer) -> None:
    assert get(protocol_server, "/tools").json() == get(protocol_server, "/protocol/tools").json()
    assert (
        post(protocol_server, "/task", {"split": "train", "index": 1}).json()["env_name"]
        == "protocol"
    )
    sid = new_session(protocol_server)
    assert get(protocol_server, "/prompt", sid).json()[0]["text"] == "q"
    assert (
        post_sse(
            f"{protocol_server.url}/call", {"name": "submit", "input": {"answer": "4"}}, sid
        ).result()["output"]["reward"]
        == 1.0
    )


def test_names_match_case_insensitively_and_discovery_ignores_session_ids(
    protocol_server: LiveServer,
) -> None:
    r = httpx.get(
        f"{protocol_server.url}/SECOND_ENV/splits", headers={"X-Session-ID": "never-created"}
    )
    assert r.status_code == 200 and r.json() == [{"name": "validation", "type": "validation"}]


def test_curl_style_bodies_without_json_content_type(protocol_server: LiveServer) -> None:
    r = httpx.post(
        f"{protocol_server.url}/protocol/num_tasks",
        content=b'{"split": "train"}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.json() == {"num_tasks": 5}


# -- status codes ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "body", "status", "needle"),
    [
        ("GET", "/nope/tools", None, 404, "unknown environment 'nope'"),
        ("POST", "/nope/tasks", {"split": "train"}, 404, "unknown environment"),
        (
            "POST",
            "/protocol/tasks",
            {"split": "nope"},
            400,
            "unknown split 'nope'; splits: train, test, hard",
        ),
        ("POST", "/protocol/tasks", {"split": 3}, 400, "split: Input should be a valid string"),
        ("POST", "/protocol/tasks", {}, 400, "split: Field required"),
        (
            "POST",
            "/protocol/tasks",
            {"split": "train", "extra": 1},
            400,
            "extra: Extra inputs are not permitted",
        ),
        (
            "POST",
            "/protocol/task",
            {"split": "train", "index": 99},
            400,
            "index 99 is out of range",
        ),
        (
            "POST",
            "/protocol/task",
            {"split": "train", "index": "x"},
            400,
            "index: Input should be a valid integer",
        ),
        ("POST", "/protocol/num_tasks", {"split": "zzz"}, 400, "unknown split"),
        ("POST", "/protocol/task_range", {"split": "zzz"}, 400, "unknown split"),
    ],
)
def test_discovery_errors(
    protocol_server: LiveServer, method: str, path: str, body: object, status: int, needle: str
) -> None:
    r = httpx.request(method, f"{protocol_server.url}{path}", json=body)
    assert r.status_code == status
    assert needle in r.json()["detail"]
    assert list(r.json()) == ["detail"]  # the client's mistake: no `infra` marker


def test_malformed_json_is_400(protocol_server: LiveServer) -> None:
    r = httpx.post(
        f"{protocol_server.url}/protocol/tasks",
        content=b'{"split": ',
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400 and "malformed JSON" in r.json()["detail"]


def test_oversize_bodies_are_413(protocol_server: LiveServer) -> None:
    big = {"split": "x" * 2_000_000}
    r = post(protocol_server, "/protocol/tasks", big)
    assert r.status_code == 413 and "exceeds 1000000 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit must still hold
        for _ in range(40):
            yield b"x" * 50_000

    r = httpx.post(
        f"{protocol_server.url}/protocol/tasks",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 413
    assert get(protocol_server, "/health").status_code == 200


@pytest.mark.parametrize(
    ("headers", "body", "status", "needle"),
    [
        ({}, {"task_spec": {}}, 400, "X-Session-ID header is required"),
        ({"X-Session-ID": ""}, {"task_spec": {}}, 400, "X-Session-ID header is required"),
        ({"X-Session-ID": "a"}, {}, 400, "either task_spec or split and index"),
        ({"X-Session-ID": "a"}, None, 400, "either task_spec or split and index"),
        (
            {"X-Session-ID": "a"},
            {"task_spec": {}, "split": "train", "index": 0},
            400,
            "not both or neither",
        ),
        ({"X-Session-ID": "a"}, {"split": "train"}, 400, "split and index must be given together"),
        (
            {"X-Session-ID": "a"},
            {"env_name": "nope", "task_spec": {}},
            404,
            "unknown environment 'nope'",
        ),
        ({"X-Session-ID": "a"}, {"split": "nope", "index": 0}, 400, "unknown split"),
        ({"X-Session-ID": "a"}, {"split": "train", "index": 7}, 400, "index 7 is out of range"),
        ({"X-Session-ID": "a"}, {"task_spec": "x"}, 400, "task_spec"),
        (
            {"X-Session-ID": "a", "X-Secrets": "%%%"},
            {"task_spec": {}},
            400,
            "X-Secrets header must be base64",
        ),
    ],
)
def test_create_errors(
    protocol_server: LiveServer, headers: dict[str, str], body: object, status: int, needle: str
) -> None:
    r = httpx.post(f"{protocol_server.url}/create", headers=headers, json=body)
    assert r.status_code == status, r.text
    assert needle in r.json()["detail"]
    assert get(protocol_server, "/prompt", "a").status_code == 404  # nothing half-created


def test_create_twice_is_400(protocol_server: LiveServer) -> None:
    sid = new_session(protocol_server)
    r = post(protocol_server, "/create", {"task_spec": {}}, sid)
    assert r.status_code == 400 and "already exists" in r.json()["detail"]


def test_unknown_and_deleted_sessions(protocol_server: LiveServer) -> None:
    for path in ("/protocol/prompt", "/protocol/task_tools"):
        r = get(protocol_server, path, "ghost")
        assert r.status_code == 404 and "not found" in r.json()["detail"]
    assert post(protocol_server, "/ping", None, "ghost").status_code == 404
    assert (
        post(
            protocol_server, "/protocol/call", {"name": "echo", "input": {"text": "x"}}, "ghost"
        ).status_code
        == 404
    )
    assert post(protocol_server, "/ping").status_code == 400
    assert get(protocol_server, "/protocol/prompt").status_code == 400

    sid = new_session(protocol_server)
    assert post(protocol_server, "/delete", None, sid).json() == {"sid": sid}
    assert get(protocol_server, "/protocol/prompt", sid).status_code == 410
    assert post(protocol_server, "/ping", None, sid).status_code == 410
    r = post(protocol_server, "/protocol/call", {"name": "echo", "input": {"text": "x"}}, sid)
    assert r.status_code == 410 and "deleted" in r.json()["detail"]


def test_delete_is_idempotent(protocol_server: LiveServer) -> None:
    assert post(protocol_server, "/delete", None, "never-existed").json() == {
        "sid": "never-existed"
    }
    sid = new_session(protocol_server)
    for _ in range(2):
        assert post(protocol_server, "/delete", None, sid).status_code == 200
        assert post(protocol_server, "/delete_session", None, sid).json() == {"sid": sid}
    assert post(protocol_server, "/delete").status_code == 400


def test_create_session_json_or_sse(protocol_server: LiveServer) -> None:
    plain = httpx.post(f"{protocol_server.url}/create_session")
    assert plain.headers["content-type"].startswith("application/json")
    assert uuid.UUID(plain.json()["sid"].split(".")[0])
    stream = post_sse(f"{protocol_server.url}/create_session", None, "")
    assert stream.names() == ["task_id", "end"]
    assert json.loads(stream.events[1][1]) == {"sid": stream.events[0][1]}


# -- tool calls over SSE ---------------------------------------------------------------
def call(server: LiveServer, sid: str, name: str, tool_input: dict | None = None, **kw: object):
    return post_sse(
        f"{server.url}/protocol/call", {"name": name, "input": tool_input or {}}, sid, **kw
    )  # type: ignore[arg-type]


def test_small_result_framing(protocol_server: LiveServer) -> None:
    sid = new_session(protocol_server)
    stream = call(protocol_server, sid, "echo", {"text": "hi"})
    assert stream.status == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert stream.names() == ["task_id", "end"]
    assert len(stream.events[0][1]) == 32
    assert stream.events[1][1] == (
        '{"ok":true,"output":{"blocks":[{"text":"hi","detail":null,"type":"text"}],'
        '"metadata":{"len":2},"reward":null,"finished":false}}'
    )
    image = call(protocol_server, sid, "image").result()["output"]["blocks"][0]
    assert image == {
        "data": "iVBORw0KGgo=",
        "mimeType": "image/png",
        "detail": None,
        "type": "image",
    }


def test_large_result_chunk_boundaries(protocol_server: LiveServer) -> None:
    sid = new_session(protocol_server)
    stream = call(protocol_server, sid, "big")
    names = stream.names()
    assert names[0] == "task_id" and names[-1] == "end" and set(names[1:-1]) == {"chunk"}
    pieces = [data for name, data in stream.events[1:]]
    assert len(pieces) > 3
    assert all(len(p) <= 4096 for p in pieces)
    assert all(len(p) == 4096 for p in pieces[:-1])
    assert not any(p[0].isspace() for p in pieces)
    # a client that strips leading whitespace (ors-sdk) still reassembles the exact text
    assert (
        json.loads("".join(p.lstrip() for p in pieces))["output"]["blocks"][0]["text"] == BIG_TEXT
    )


def test_tool_errors(protocol_server: LiveServer) -> None:
    sid = new_session(protocol_server)
    unknown = call(protocol_server, sid, "nope").result()
    assert (
        unknown["ok"] is False
        and unknown["error"].startswith("not_found: unknown tool 'nope'")
        and "submit" in unknown["error"]
        and unknown["reason"] == "not_found"
    )
    invalid = call(protocol_server, sid, "sleep", {"seconds": "soon"}).result()
    assert invalid == {
        "ok": False,
        "error": "input_validation: invalid input for tool 'sleep': seconds: Input should be a valid number, unable to parse string as a number",
        "reason": "input_validation",
    }
    raised = call(protocol_server, sid, "explode")
    assert raised.names() == ["task_id", "error"]
    assert raised.events[1][1].startswith("tool_failed: tool 'explode' failed: ValueError: kaboom")
    assert (
        call(protocol_server, sid, "echo", {"text": "alive"}).result()["output"]["blocks"][0][
            "text"
        ]
        == "alive"
    )


def assert_keepalive_pings(server: LiveServer, keepalive_s: float) -> None:
    """A tool sleeping 2.5 intervals: a `: ping` comment every `keepalive_s` meanwhile."""
    sid = new_session(server)
    seconds = 2.5 * keepalive_s
    stream = call(server, sid, "sleep", {"seconds": seconds})
    assert stream.result()["output"]["blocks"][0]["text"] == f"slept {seconds}"
    times = [t for t, _ in stream.comments]
    assert len(times) >= 2, stream.raw
    assert all(c.startswith(": ping") for _, c in stream.comments)
    k = keepalive_s
    assert 0.8 * k < times[0] < 1.3 * k and 0.8 * k < times[1] - times[0] < 1.2 * k, times


# CI-sized: the keep-alive's interval on a manual clock, tests/test_server_timeouts.py.
@pytest.mark.full_matrix
def test_keepalive_comments_at_the_default_interval(protocol_server: LiveServer) -> None:
    assert Settings().keepalive_s == 10
    assert_keepalive_pings(protocol_server, 10)


def test_reconnect_running_finished_unknown(protocol_server: LiveServer) -> None:
    """The result forgotten `result_linger_s` after the call's end: on a manual clock in
    tests/test_server_timeouts.py."""
    sid = new_session(protocol_server)
    url = f"{protocol_server.url}/protocol/call"
    body = {"name": "sleep", "input": {"seconds": 2}}
    # start, read only the task id, drop the connection
    with httpx.stream("POST", url, json=body, headers={"X-Session-ID": sid}) as r:
        lines = r.iter_lines()
        assert next(lines) == "event: task_id"
        task_id = next(lines).removeprefix("data: ")
    started = time.monotonic()
    running = post_sse(url, {**body, "task_id": task_id}, sid)
    assert running.events[0] == ("task_id", task_id)
    assert running.result()["output"]["blocks"][0]["text"] == "slept 2.0"
    assert time.monotonic() - started < 3  # the call kept running while no one listened
    finished = post_sse(url, {**body, "task_id": task_id}, sid)
    assert finished.result() == running.result()
    other = new_session(protocol_server)
    assert post_sse(url, {**body, "task_id": task_id}, other).events == [
        ("error", "unknown task_id")
    ]
    assert post_sse(url, {**body, "task_id": "bogus"}, sid).events == [("error", "unknown task_id")]


def test_calls_in_one_session_run_in_arrival_order(protocol_server: LiveServer) -> None:
    """A call sent once the first has its task id (so has arrived) runs after it."""
    sid = new_session(protocol_server)
    body = {"name": "block", "input": {"seconds": 1.5}}
    url, headers = f"{protocol_server.url}/protocol/call", {"X-Session-ID": sid}
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as slow:
        lines = slow.iter_lines()
        assert next(lines) == "event: task_id"
        second = call(protocol_server, sid, "blocking_now").result()
        assert second["output"]["blocks"][0]["text"] == "0", second
        assert any(line == "event: end" for line in lines)


def test_blocking_tool_does_not_stall_server_or_other_sessions(protocol_server: LiveServer) -> None:
    busy, other = new_session(protocol_server), new_session(protocol_server)
    arrived = threading.Event()

    def block() -> None:
        url = f"{protocol_server.url}/protocol/call"
        body = {"name": "block", "input": {"seconds": 4}}
        with httpx.stream("POST", url, json=body, headers={"X-Session-ID": busy}, timeout=30) as r:
            for _ in r.iter_lines():
                arrived.set()  # the call is in: its task id came back

    worker = threading.Thread(target=block)
    worker.start()
    assert arrived.wait(10), "the blocking call never arrived"
    started = time.monotonic()
    assert get(protocol_server, "/health").status_code == 200
    assert call(protocol_server, other, "echo", {"text": "x"}).result()["ok"] is True
    assert time.monotonic() - started < 2
    assert worker.is_alive()
    worker.join()


# -- session lifecycle -----------------------------------------------------------------
# The setup wait (503 after `setup_wait_s`, an answer as soon as the setup ends) runs on
# a manual clock in tests/test_server_timeouts.py.


def test_failed_setup_fails_later_requests_with_its_message(
    protocol_server: LiveServer, tmp
) -> None:
    log = tmp / "teardown.log"
    sid = new_session(protocol_server, fail_setup=True, teardown_log=str(log))
    for r in (  # the first waits for the setup's end (torn down before it is announced)
        get(protocol_server, "/protocol/prompt", sid),
        post(protocol_server, "/ping", None, sid),
        post(protocol_server, "/protocol/call", {"name": "echo", "input": {"text": "x"}}, sid),
    ):
        assert r.status_code == 500
        assert r.json() == {  # not the model's doing: marked (docs/infra-failures.md)
            "detail": "setup failed: RuntimeError: setup exploded with no token",
            "infra": True,
        }
    assert log.read_text() == "torn down\n"  # a failed setup still releases resources
    assert post(protocol_server, "/delete", None, sid).status_code == 200


def test_a_task_the_setup_refuses_is_the_clients_mistake(protocol_server: LiveServer) -> None:
    """A task_spec the environment refuses as it starts (a dataset's `{"name": ...}`
    naming none of its tasks, `BadRequest`): the requests after answer 400 with why,
    not a 500 marked as the host's failure, which a trainer would mask."""
    sid = new_session(protocol_server, refuse="nope")
    for r in (
        get(protocol_server, "/protocol/prompt", sid),
        post(protocol_server, "/protocol/call", {"name": "echo", "input": {"text": "x"}}, sid),
    ):
        assert r.status_code == 400
        assert r.json() == {"detail": "setup failed: BadRequest: protocol has no task named 'nope'"}
    assert post(protocol_server, "/delete", None, sid).status_code == 200


def test_delete_during_setup(protocol_server: LiveServer) -> None:
    sid = new_session(protocol_server, setup_s=30)
    started = time.monotonic()
    assert post(protocol_server, "/delete", None, sid).status_code == 200
    assert time.monotonic() - started < 2
    assert get(protocol_server, "/protocol/prompt", sid).status_code == 410


# The reaper (idle sessions torn down, a running call or a setup never reaped) runs on
# a manual clock in tests/test_server_timeouts.py, through the same app.


def test_shutdown_tears_down_every_session(tmp) -> None:
    from tests.conftest import PROTOCOL_ENVS
    from tests.servers import start_server

    server = start_server(PROTOCOL_ENVS, tmp, default_environment="protocol")
    logs = [tmp / f"teardown-{i}.log" for i in range(3)]
    for log in logs:
        new_session(server, teardown_log=str(log))
    server.stop()  # SIGTERM: uvicorn shuts down gracefully, then re-raises the signal
    assert [log.read_text() for log in logs] == ["torn down\n"] * 3
    assert "Application shutdown complete" in server.log()
