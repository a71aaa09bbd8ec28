"""A small ORS client: enough to play a scripted episode (`orsbox run`, synchronous) or
many model-driven ones at once (`orsbox eval`, `AsyncSession`).

Agents use `ors-sdk` or `openreward`; this client exists so the CLI needs neither. It
waits out setup (503 with `Retry-After`) and reads a tool result from its SSE stream
(`task_id`, then `chunk`s and `end`, or one `error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from types import TracebackType
from typing import Any

import httpx

from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.errors import GradingError, OrsboxError
from orsbox.protocol.reasons import Reason, is_infra, unlabelled

SETUP_DEADLINE_S = 900.0
CALL_TIMEOUT_S = 900.0
PING_INTERVAL_S = 10.0  # what ors-sdk and openreward clients send


class ClientError(OrsboxError):
    """The server answered with an error, or the stream ended without a result."""


class ToolFailed(ClientError):
    """The tool itself raised: the server answered the call with an `error` event
    (`event_text`); `grading_error` is the grader that could not run, if that is why."""

    def __init__(self, event_text: str) -> None:
        super().__init__(f"the tool failed: {event_text}")
        self.event_text = event_text

    @property
    def reason(self) -> Reason | None:
        """Why, as the server labelled the event (`orsbox.protocol.reasons`)."""
        return unlabelled(self.event_text)[0]

    @property
    def infra(self) -> bool:
        """Whether the failure is the host's, not the model's: the `[infra]` marker
        (docs/infra-failures.md)."""
        return is_infra(self.event_text)

    @property
    def grading_error(self) -> GradingError | None:
        return GradingError.from_wire(unlabelled(self.event_text)[1])


class Session:
    """One episode on a server: created on enter, deleted on exit."""

    def __init__(
        self,
        url: str,
        env: str,
        split: str,
        index: int,
        token: str | None = None,
        *,
        sid: str | None = None,
    ) -> None:
        """`sid`: a session the server already started (a fork's); entering does not
        create it again."""
        self.url = url.rstrip("/")
        self.env = env
        self.split, self.index = split, index
        self.token = token
        self.sid = sid or uuid.uuid4().hex
        self._created = sid is not None
        headers = {"X-Session-ID": self.sid}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(timeout=60, headers=headers)
        self._task = {"env_name": env, "split": split, "index": index}

    def __enter__(self) -> Session:
        if not self._created:
            self._post("/create", self._task)
            self._created = True
        return self

    def close(self) -> None:
        """Delete the session on the server (as leaving the `with` block does)."""
        self.__exit__(None, None, None)

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        try:
            self._http.post(f"{self.url}/delete")
        finally:
            self._http.close()

    def prompt(self) -> list[dict[str, Any]]:
        """The prompt blocks; waits while the environment's setup runs."""
        return self._ready("GET", f"/{self.env}/prompt")

    def call(self, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        """`{"ok": true, "output": {...}}` or `{"ok": false, "error": ...}`."""
        body = {"name": name, "input": tool_input}
        url = f"{self.url}/{self.env}/call"
        with self._http.stream("POST", url, json=body, timeout=CALL_TIMEOUT_S) as response:
            if response.status_code != 200:
                response.read()
                raise ClientError(f"call {name}: HTTP {response.status_code}: {response.text}")
            reader = ResultReader()
            for line in response.iter_lines():
                if (result := reader.feed(line)) is not None:
                    return result
            return reader.missing()

    def fork(self, n: int) -> list[Session]:
        """`n` new sessions from this session's current files (orsbox's
        `POST /orsbox/fork`; running processes are not carried). Each is already
        created: use it in a `with` block, or `close()` it, to delete it."""
        answer = self._post("/orsbox/fork", {"n": n})
        return [
            Session(self.url, self.env, self.split, self.index, self.token, sid=sid)
            for sid in answer["sids"]
        ]

    # -- plumbing

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        response = self._http.post(f"{self.url}{path}", json=body)
        return _json(response, path)

    def _ready(self, method: str, path: str) -> Any:
        deadline = time.monotonic() + SETUP_DEADLINE_S
        while True:
            response = self._http.request(method, f"{self.url}{path}")
            if response.status_code != 503 or time.monotonic() > deadline:
                return _json(response, path)
            time.sleep(float(response.headers.get("Retry-After", "1")))


def _json(response: httpx.Response, path: str) -> Any:
    if response.status_code != 200:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise ClientError(f"{path}: HTTP {response.status_code}: {detail}")
    return _parsed(response.text, path)


def _parsed(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ClientError(f"{where}: the server's answer is not JSON: {text[:200]!r}") from None


class ResultReader:
    """Reads a tool call's SSE stream a line at a time: `feed` returns the result once
    the `end` event arrives; an `error` event raises `ToolFailed`."""

    def __init__(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []
        self._pieces: list[str] = []

    def feed(self, line: str) -> dict[str, Any] | None:
        if line.startswith(":"):
            return None
        if line.startswith("event:"):
            self._event = line[len("event:") :].strip()
        elif line.startswith("data:"):
            self._data.append(line[len("data:") :].removeprefix(" "))
        elif line == "" and self._event is not None:
            event, text = self._event, "\n".join(self._data)
            self._event, self._data = None, []
            if event == "error":
                raise ToolFailed(text)
            if event in ("chunk", "end"):
                self._pieces.append(text)
            if event == "end":
                return _parsed("".join(self._pieces), "the tool result")
        return None

    @staticmethod
    def missing() -> dict[str, Any]:
        raise ClientError("the result stream ended without a result")


class AsyncSession:
    """One episode on a server, for asyncio callers: `async with AsyncSession(...)`
    creates it and deletes it on exit, whatever happened (also on cancellation)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        env: str,
        split: str,
        index: int,
        token: str | None = None,
        ping_interval_s: float = PING_INTERVAL_S,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`clock`: what the pings are paced by (`orsbox.clock`; a test's moves by hand)."""
        self.url = url.rstrip("/")
        self.ping_interval_s = ping_interval_s
        self.clock = clock
        self._pinger: asyncio.Task[None] | None = None
        self.env = env
        self.sid = uuid.uuid4().hex
        self._headers = {"X-Session-ID": self.sid}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._http = http
        self._task = {"env_name": env, "split": split, "index": index}

    async def __aenter__(self) -> AsyncSession:
        await self._ready("POST", "/create", self._task)  # 503: the server is at capacity
        self._pinger = asyncio.create_task(self._keep_alive())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        """Delete the session even when cancelled (Ctrl-C, a time limit), and however
        often: a cancellation that arrives meanwhile is raised once it is deleted."""
        if self._pinger is not None:
            self._pinger.cancel()
        delete = asyncio.ensure_future(self._delete())
        interrupted = False
        while not delete.done():
            try:
                await asyncio.shield(delete)
            except asyncio.CancelledError:
                interrupted = True
        if interrupted and exc_type is None:
            raise asyncio.CancelledError

    async def _keep_alive(self) -> None:
        """Ping while the episode lasts, as the reference clients do: a model that
        thinks for longer than the server's inactivity timeout keeps its session."""
        while True:
            await self.clock.sleep(self.ping_interval_s)
            with contextlib.suppress(httpx.HTTPError):
                await self._http.post(f"{self.url}/ping", headers=self._headers)

    async def _delete(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            await self._http.post(f"{self.url}/delete", headers=self._headers, timeout=30)

    async def prompt(self) -> list[dict[str, Any]]:
        """The prompt blocks; waits while the environment's setup runs."""
        return await self._ready("GET", f"/{self.env}/prompt")

    async def tools(self) -> list[dict[str, Any]]:
        """This task's tool specs (`task_tools`: shared and task-specific ones)."""
        return (await self._ready("GET", f"/{self.env}/task_tools"))["tools"]

    async def call(self, name: str, tool_input: Any) -> dict[str, Any]:
        """`{"ok": true, "output": {...}}` or `{"ok": false, "error": ...}`; raises
        `ToolFailed` when the tool raised."""
        body = {"name": name, "input": tool_input}
        url = f"{self.url}/{self.env}/call"
        request = self._http.stream(
            "POST", url, json=body, headers=self._headers, timeout=CALL_TIMEOUT_S
        )
        async with request as response:
            if response.status_code != 200:
                await response.aread()
                raise ClientError(f"call {name}: HTTP {response.status_code}: {response.text}")
            reader = ResultReader()
            async for line in response.aiter_lines():
                if (result := reader.feed(line)) is not None:
                    return result
            return reader.missing()

    async def _ready(self, method: str, path: str, body: Any = None) -> Any:
        """The answer once the server has room and the session is set up: a 503 is
        asked again after its Retry-After."""
        deadline = time.monotonic() + SETUP_DEADLINE_S
        url = f"{self.url}{path}"
        while True:
            response = await self._http.request(method, url, json=body, headers=self._headers)
            if response.status_code != 503 or time.monotonic() > deadline:
                return _json(response, path)
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")))


async def list_tasks(
    http: httpx.AsyncClient, url: str, env: str, split: str, token: str | None = None
) -> list[dict[str, Any]]:
    """Every task of `split`, in index order."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await http.post(
        f"{url.rstrip('/')}/{env}/tasks", json={"split": split}, headers=headers
    )
    return _json(response, f"/{env}/tasks")["tasks"]


async def list_splits(
    http: httpx.AsyncClient, url: str, env: str, token: str | None = None
) -> list[str]:
    """The environment's split names, in the order it lists them."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await http.get(f"{url.rstrip('/')}/{env}/splits", headers=headers)
    return [s["name"] if isinstance(s, dict) else str(s) for s in _json(response, "/splits")]


def warm(url: str, env: str, count: int, token: str | None = None, **task: Any) -> dict[str, Any]:
    """Ask the server to keep `count` idle sandboxes of `env` ready ahead of a burst
    (orsbox's `POST /orsbox/warm`; `split=`, `index=` or `task_spec=` for a per-task
    image). Returns `{"image", "target", "idle"}`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"env_name": env, "count": count, **task}
    response = httpx.post(f"{url.rstrip('/')}/orsbox/warm", json=body, headers=headers, timeout=60)
    return _json(response, "/orsbox/warm")
