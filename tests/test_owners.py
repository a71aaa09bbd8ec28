"""One token, one client's episodes (issue 48), against a real server with two client
tokens and two environments and no default environment, driven by the two reference
clients (ors-sdk and openreward) as they are and by raw HTTP:

* another token's call, prompt, tools, ping, reconnect by `task_id` and `/delete` of a
  session answer exactly as for an id that never existed (404, the same text), and its
  `/delete` leaves the episode running; once deleted, 410 to its owner only;
* a request on another environment's path is a 400 naming both;
* a `/create` naming no environment is bound by the first path that names one (what
  the ors-sdk client's `session(split=, index=)` does); a bare path naming none (TRL's
  `X-Deployment: env` included) is a 400 listing the environments;
* a single-environment server, and an operator's explicit default, answer as before.

The sandboxes' side (counted against the client of the session that caused them):
tests/sandbox_api/test_openreward_environments.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import httpx
import pytest
from openreward import OpenReward
from ors.client import ORS

from orsbox.server import create_app
from orsbox.settings import Settings
from tests.conftest import PROTOCOL_ENVS
from tests.fixture_envs.protocol_envs import Protocol, Second
from tests.servers import LiveServer, start_server
from tests.sse_client import post_sse

TOKEN_A = "owners-a-" + uuid.uuid4().hex
TOKEN_B = "owners-b-" + uuid.uuid4().hex
SERVED = "protocol, second_env"
NAMES_NONE = f"names none; name one of: {SERVED}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        PROTOCOL_ENVS,
        tmp_path_factory.mktemp("owners"),
        sandbox_tokens=f"{TOKEN_A},{TOKEN_B}",  # a comma list, as a shell writes it
    )
    yield live
    live.stop()


def ask(
    server: LiveServer, method: str, path: str, token: str, sid: str, body: Any = None
) -> httpx.Response:
    headers = {"X-API-Key": token, "X-Session-ID": sid}
    return httpx.request(method, f"{server.url}{path}", headers=headers, json=body, timeout=30)


def call(server: LiveServer, token: str, sid: str, body: dict, env: str = "protocol") -> Any:
    return post_sse(f"{server.url}/{env}/call", body, sid, **{"X-API-Key": token})


ECHO = {"name": "echo", "input": {"text": "mine"}}


def others_requests(server: LiveServer, sid: str, task_id: str) -> dict[str, tuple[int, str]]:
    """Every session request token B can make with `sid`: status and body."""
    answers = {
        path: ask(server, method, path, TOKEN_B, sid)
        for method, path in [
            ("GET", "/protocol/prompt"),
            ("GET", "/protocol/task_tools"),
            ("GET", "/protocol/messages"),
            ("POST", "/ping"),
        ]
    }
    found = {path: (r.status_code, r.text) for path, r in answers.items()}
    for name, body in [("call", ECHO), ("reconnect", {**ECHO, "task_id": task_id})]:
        stream = call(server, TOKEN_B, sid, body)
        found[name] = (stream.status, stream.raw)
    fork = ask(server, "POST", "/orsbox/fork", TOKEN_B, sid, {"n": 1})
    found["fork"] = (fork.status_code, fork.text)
    return found


def as_unknown(server: LiveServer, sid: str) -> dict[str, tuple[int, str]]:
    """What the same requests get for an id that never existed, with `sid` in its place."""
    unknown = str(uuid.uuid4())
    return {
        what: (status, text.replace(unknown, sid))
        for what, (status, text) in others_requests(server, unknown, "0" * 32).items()
    }


@contextmanager
def ors_sdk_session(server: LiveServer) -> Iterator[Any]:
    with ORS(base_url=server.url, api_key=TOKEN_A) as client:
        env = client.environment("protocol")
        with env.session(task=env.get_task("train", 2)) as session:
            yield session


@contextmanager
def openreward_session(server: LiveServer) -> Iterator[Any]:
    client = OpenReward(api_key=TOKEN_A)
    try:
        env = client.environments.get("protocol")
        with env.session(task=env.get_task("train", 2)) as session:
            yield session
    finally:
        client.environments.close()


@pytest.fixture(params=[ors_sdk_session, openreward_session], ids=["ors-sdk", "openreward"])
def open_session(
    request: pytest.FixtureRequest, server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], AbstractContextManager[Any]]:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    monkeypatch.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    return lambda: request.param(server)


def test_another_token_gets_a_session_as_an_unknown_one(
    server: LiveServer, open_session: Callable[[], AbstractContextManager[Any]]
) -> None:
    with open_session() as session:
        sid = session.sid
        mine = call(server, TOKEN_A, sid, ECHO)
        task_id = dict(mine.events)["task_id"]
        assert mine.result()["output"]["blocks"][0]["text"] == "mine"

        theirs = others_requests(server, sid, task_id)
        assert theirs == as_unknown(server, sid)
        assert {status for status, _ in theirs.values()} == {404}
        assert all("not found" in text and "mine" not in text for _, text in theirs.values())

        ended = ask(server, "POST", "/delete", TOKEN_B, sid)
        assert (ended.status_code, ended.json()) == (200, {"sid": sid})  # as for any id
        assert ask(server, "POST", "/delete_session", TOKEN_B, sid).status_code == 200
        # the episode goes on: B's /delete left it alone
        assert session.call_tool("submit", {"answer": "4"}).reward == 1.0
        again = call(server, TOKEN_A, sid, {**ECHO, "task_id": task_id})  # A reconnects
        assert again.result()["output"]["blocks"][0]["text"] == "mine"

    gone = ask(server, "GET", "/protocol/prompt", TOKEN_A, sid)
    assert gone.status_code == 410  # to its owner
    after = ask(server, "GET", "/protocol/prompt", TOKEN_B, sid)
    assert (after.status_code, after.text) == as_unknown(server, sid)["/protocol/prompt"]


def test_a_path_of_another_environment_is_400_naming_both(server: LiveServer) -> None:
    sid = str(uuid.uuid4())
    made = ask(
        server,
        "POST",
        "/create",
        TOKEN_A,
        sid,
        {"env_name": "protocol", "split": "train", "index": 1},
    )
    assert made.status_code == 200
    try:
        for method, path in [("GET", "/second_env/prompt"), ("GET", "/Second_Env/task_tools")]:
            answer = ask(server, method, path, TOKEN_A, sid)
            assert answer.status_code == 400, path
            assert "environment 'protocol', not 'second_env'" in answer.json()["detail"]
        wrong = call(server, TOKEN_A, sid, {"name": "ping_tool", "input": {}}, env="second_env")
        assert wrong.status == 400 and "'protocol', not 'second_env'" in wrong.raw
        right = call(server, TOKEN_A, sid, {"name": "submit", "input": {"answer": "2"}})
        assert right.result()["output"]["reward"] == 1.0
    finally:
        ask(server, "POST", "/delete", TOKEN_A, sid)


def test_the_ors_sdk_client_gets_the_environment_it_named_by_split_and_index(
    server: LiveServer,
) -> None:
    """ors-sdk's `session(split=, index=)` posts /create with no environment name; the
    session is bound by its first request, on /ENV/..., to the environment it named."""
    with ORS(base_url=server.url, api_key=TOKEN_B) as client:
        with client.environment("second_env").session(split="validation", index=0) as session:
            assert session.get_prompt()[0].text == "second"
            assert session.call_tool("ping_tool", {}).blocks[0].text == "pong"
        with client.environment("protocol").session(split="hard", index=3) as session:
            assert session.get_prompt()[0].text == "hard 3: what is 3+3?"
            assert session.call_tool("submit", {"answer": "6"}).reward == 1.0


def test_a_create_naming_no_environment_on_a_server_of_several(server: LiveServer) -> None:
    sid = str(uuid.uuid4())
    made = ask(server, "POST", "/create", TOKEN_A, sid, {"split": "validation", "index": 0})
    assert (made.status_code, made.json()) == (200, {"sid": sid})
    try:
        assert ask(server, "POST", "/ping", TOKEN_A, sid).status_code == 200  # kept
        bare = ask(server, "GET", "/prompt", TOKEN_A, sid)
        assert bare.status_code == 400 and NAMES_NONE in bare.json()["detail"]
        # another client cannot bind it
        assert ask(server, "GET", "/second_env/prompt", TOKEN_B, sid).status_code == 404
        # a split the named environment has not: 400, and the session still unbound
        assert ask(server, "GET", "/protocol/prompt", TOKEN_A, sid).status_code == 400
        prompt = ask(server, "GET", "/second_env/prompt", TOKEN_A, sid)
        assert prompt.status_code == 200 and prompt.json()[0]["text"] == "second"
        other = ask(server, "GET", "/protocol/task_tools", TOKEN_A, sid)
        assert other.status_code == 400 and "'second_env', not 'protocol'" in other.text
    finally:
        ask(server, "POST", "/delete", TOKEN_A, sid)
    for body, needle in [
        ({"split": "nope", "index": 0}, "unknown split 'nope'"),
        ({"split": "train", "index": 7}, "index 7 is out of range"),
    ]:  # what no environment has: 400 at once
        wrong = ask(server, "POST", "/create", TOKEN_A, str(uuid.uuid4()), body)
        assert wrong.status_code == 400 and needle in wrong.json()["detail"]


def test_trl_without_env_name_gets_the_environments_listed(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's adapter without `env_name` sends `X-Deployment: env` on bare paths."""
    headers = {"X-API-Key": TOKEN_A, "X-Deployment": "env"}
    tools = httpx.get(f"{server.url}/tools", headers=headers, timeout=30)
    assert tools.status_code == 400 and NAMES_NONE in tools.json()["detail"]
    monkeypatch.setenv("OPENREWARD_SESSION_URL", server.url)
    client = OpenReward(api_key=TOKEN_A)
    try:
        with pytest.raises(Exception, match="names none"):
            client.environments.get("env").list_tools()
    finally:
        client.environments.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("environments", "default", "bare_prompt"),
    [
        ([Protocol], None, "train 1: what is 1+1?"),  # one served: it is the default
        ([Protocol, Second], "second_env", "second"),  # the operator named one
    ],
)
async def test_a_default_answers_requests_naming_none(
    environments: list[Any], default: str | None, bare_prompt: str
) -> None:
    app = create_app(environments, Settings(default_environment=default))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            sid = {"X-Session-ID": "s1"}
            split = "train" if default is None else "validation"
            body = {"split": split, "index": 1 if default is None else 0}
            assert (await client.post("/create", headers=sid, json=body)).status_code == 200
            for _ in range(50):
                answer = await client.get("/prompt", headers={**sid, "X-Deployment": "env"})
                if answer.status_code != 503:
                    break
            assert answer.json()[0]["text"] == bare_prompt


def test_a_default_must_be_served() -> None:
    with pytest.raises(ValueError, match="ORSBOX_DEFAULT_ENVIRONMENT='nope' is not served"):
        create_app([Protocol, Second], Settings(default_environment="nope"))


def test_list_settings_take_json_or_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORSBOX_SANDBOX_IMAGES", "orsbox/*, python:3.11-slim")
    assert Settings().sandbox_images == ["orsbox/*", "python:3.11-slim"]
    monkeypatch.setenv("ORSBOX_SANDBOX_IMAGES", json.dumps(["orsbox/*", "x/y@sha256:*"]))
    assert Settings().sandbox_images == ["orsbox/*", "x/y@sha256:*"]
    monkeypatch.setenv("ORSBOX_SANDBOX_IMAGES", '["orsbox/*",')
    with pytest.raises(ValueError, match="ORSBOX_SANDBOX_IMAGES: not a JSON list"):
        Settings()
    monkeypatch.delenv("ORSBOX_SANDBOX_IMAGES")
    monkeypatch.setenv("ORSBOX_SANDBOX_TOKENS", '["secret-token-1", ')
    with pytest.raises(ValueError, match="ORSBOX_SANDBOX_TOKENS") as raised:
        Settings()
    assert "secret-token-1" not in str(raised.value)
