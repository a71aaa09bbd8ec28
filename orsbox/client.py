"""A small synchronous ORS client: enough to play one scripted episode (`orsbox run`).

Agents use `ors-sdk` or `openreward`; this client exists so the CLI needs neither. It
waits out setup (503 with `Retry-After`) and reads a tool result from its SSE stream
(`task_id`, then `chunk`s and `end`, or one `error`).
"""

from __future__ import annotations

import json
import time
import uuid
from types import TracebackType
from typing import Any

import httpx

from orsbox.errors import OrsboxError

SETUP_DEADLINE_S = 900.0
CALL_TIMEOUT_S = 900.0


class ClientError(OrsboxError):
    """The server answered with an error, or the stream ended without a result."""


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
            return _read_result(response.iter_lines())

    def fork(self, n: int) -> list[Session]:
        """`n` new sessions from this session's current files (orsbox's
        `POST /orsbox/fork`; running processes are not carried). Each is already
        created: use it in a `with` block, or `close()` it, to delete it."""
        answer = self._post("/orsbox/fork", {"n": n})
        task = self._task
        return [
            Session(self.url, self.env, task["split"], task["index"], self.token, sid=sid)
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
    return response.json()


def _read_result(lines: Any) -> dict[str, Any]:
    event, data, pieces = None, [], []
    for line in lines:
        if line.startswith(":"):
            continue
        if line.startswith("event:"):
            event = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
        elif line == "" and event is not None:
            text = "\n".join(data)
            if event == "error":
                raise ClientError(f"the tool failed: {text}")
            if event in ("chunk", "end"):
                pieces.append(text)
            if event == "end":
                return json.loads("".join(pieces))
            event, data = None, []
    raise ClientError("the result stream ended without a result")


def warm(url: str, env: str, count: int, token: str | None = None, **task: Any) -> dict[str, Any]:
    """Ask the server to keep `count` idle sandboxes of `env` ready ahead of a burst
    (orsbox's `POST /orsbox/warm`; `split=`, `index=` or `task_spec=` for a per-task
    image). Returns `{"image", "target", "idle"}`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"env_name": env, "count": count, **task}
    response = httpx.post(f"{url.rstrip('/')}/orsbox/warm", json=body, headers=headers, timeout=60)
    return _json(response, "/orsbox/warm")
