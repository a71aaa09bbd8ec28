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
        self, url: str, env: str, split: str, index: int, token: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.env = env
        self.sid = uuid.uuid4().hex
        headers = {"X-Session-ID": self.sid}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(timeout=60, headers=headers)
        self._task = {"env_name": env, "split": split, "index": index}

    def __enter__(self) -> Session:
        self._post("/create", self._task)
        return self

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
