"""A scripted model: a real HTTP server speaking OpenAI chat completions with tool
calls, for `orsbox eval`'s tests.

Each task has a script, found by a phrase of its prompt (the first user message).
A script is a list of attempts, handed out in turn as conversations of that task start
(the k-th attempt at a task plays `attempts[k % len]`). An attempt is a list of steps,
one per model reply:

    {"tool": "submit", "arguments": {"answer": "7"}}   a tool call
    {"tool": "submit", "raw": "{answer: 7"}            a call whose arguments are not JSON
    {"say": "thinking"}                                a reply without a tool call
    {"empty": true}                                    a reply without a choice
    and on any step: "delay_s": 3 (the first time the task's reply at this turn is
    asked for: a retry after a timeout starts a new attempt),
    "hold": true (until `release()`), "rendezvous": n (until n replies wait together)

and an attempt may start with `{"fail": [429, 500]}`: its first requests get those
statuses before it is answered. Past its last step an attempt repeats the last one.
The tool-call ids carry the attempt number, which is how later turns find their script.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.servers import free_port
from tests.waiting import wait_until

Step = dict[str, Any]
ATTEMPT_ID = re.compile(r"^call_(\d+)_")
ATTEMPT_TEXT = re.compile(r"^\[attempt (\d+)\]")
RENDEZVOUS_TIMEOUT_S = 20.0
MODEL = "scripted"  # the one model this server has


@dataclass
class Script:
    match: str
    attempts: list[list[Step]]


@dataclass
class _State:
    starts: Counter[str] = field(default_factory=Counter)  # attempts handed out, per task
    failures: Counter[tuple[str, int]] = field(default_factory=Counter)
    delayed: set[tuple[str, int]] = field(default_factory=set)  # (task, turn) delayed once
    in_flight: int = 0
    most_in_flight: int = 0
    waiting: int = 0  # replies waiting at a rendezvous
    released: asyncio.Event | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    conversations: Counter[str] = field(default_factory=Counter)


class ModelServer:
    """The server's state, for tests to read (requests seen, peak concurrency)."""

    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.state = _State()
        self._hold = threading.Event()
        self.app = Starlette(
            routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])]
        )

    # -- what tests use

    def release(self) -> None:
        """Let every held reply (and any later one) through."""
        self._hold.set()

    @property
    def most_in_flight(self) -> int:
        return self.state.most_in_flight

    def started(self, match: str) -> int:
        """Conversations of the task whose prompt contains `match` that got a reply."""
        return self.state.conversations[match]

    # -- the endpoint

    async def _complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        state = self.state
        state.requests.append(body)
        state.in_flight += 1
        state.most_in_flight = max(state.most_in_flight, state.in_flight)
        try:
            return await self._answer(body)
        finally:
            state.in_flight -= 1

    async def _answer(self, body: dict[str, Any]) -> JSONResponse:
        if body["model"] != MODEL:
            return _error(404, f"The model `{body['model']}` does not exist.")
        script = self._script(body["messages"])
        if script is None:
            return _error(400, "the scripted model has no script for this prompt")
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        attempt = _attempt(body["messages"])
        if attempt is None:
            failed = self._fail_or_start(script)
            if isinstance(failed, JSONResponse):
                return failed
            attempt = failed
        steps = [s for s in script.attempts[attempt % len(script.attempts)] if "fail" not in s]
        step = steps[min(turn, len(steps) - 1)]
        await self._wait(step, (script.match, turn))
        return JSONResponse(_completion(body, step, attempt, turn))

    def _script(self, messages: list[dict[str, Any]]) -> Script | None:
        first = next((m for m in messages if m["role"] == "user"), None)
        text = _text(first["content"]) if first else ""
        return next((s for s in self.scripts if s.match in text), None)

    def _fail_or_start(self, script: Script) -> int | JSONResponse:
        """A new conversation: the scripted failure it must see first, else its attempt."""
        state = self.state
        attempt = state.starts[script.match]
        plan = script.attempts[attempt % len(script.attempts)]
        fails = [s for s in plan if "fail" in s]
        statuses = fails[0]["fail"] if fails else []
        seen = state.failures[(script.match, attempt)]
        if seen < len(statuses):
            state.failures[(script.match, attempt)] += 1
            return _error(statuses[seen], "scripted failure", retry_after_ms=50)
        state.starts[script.match] += 1
        state.conversations[script.match] += 1
        return attempt

    async def _wait(self, step: Step, reply: tuple[str, int]) -> None:
        if step.get("delay_s") and reply not in self.state.delayed:
            self.state.delayed.add(reply)
            await asyncio.sleep(step["delay_s"])
        if step.get("hold"):
            while not self._hold.is_set():
                await asyncio.sleep(0.02)
        if step.get("rendezvous"):
            await self._rendezvous(step["rendezvous"])

    async def _rendezvous(self, size: int) -> None:
        """Wait until `size` replies wait here together (or a timeout: the test then
        sees fewer in flight and fails on its own assertion)."""
        state = self.state
        if state.released is None or state.released.is_set():
            state.released = asyncio.Event()
        released = state.released
        state.waiting += 1
        if state.waiting >= size:
            state.waiting = 0
            released.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(released.wait(), RENDEZVOUS_TIMEOUT_S)


def _attempt(messages: list[dict[str, Any]]) -> int | None:
    for message in messages:
        if message["role"] != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if found := ATTEMPT_ID.match(call["id"]):
                return int(found[1])
        if found := ATTEMPT_TEXT.match(message.get("content") or ""):
            return int(found[1])
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")


def _completion(body: dict[str, Any], step: Step, attempt: int, turn: int) -> dict[str, Any]:
    if step.get("empty"):  # what some servers send for a filtered request
        return {
            "id": "chatcmpl-empty",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [],
        }
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if "say" in step:
        message["content"] = f"[attempt {attempt}] {step['say']}"
        arguments = ""
    else:
        arguments = step.get("raw") or json.dumps(step.get("arguments", {}))
        call = {"name": step["tool"], "arguments": arguments}
        message["tool_calls"] = [
            {"id": f"call_{attempt}_{turn}", "type": "function", "function": call}
        ]
    prompt_tokens = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
    completion_tokens = len(arguments or message["content"] or "") // 4 + 1
    return {
        "id": f"chatcmpl-{attempt}-{turn}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int, message: str, retry_after_ms: int | None = None) -> JSONResponse:
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms else None
    body = {"error": {"message": message, "type": "scripted", "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


@contextlib.contextmanager
def serve_model(scripts: list[Script]) -> Iterator[tuple[str, ModelServer]]:
    """The scripted model on a free loopback port, in a thread; yields its /v1 URL."""
    model = ModelServer(scripts)
    port = free_port()
    config = uvicorn.Config(model.app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, message="the model server starts")
    try:
        yield f"http://127.0.0.1:{port}/v1", model
    finally:
        model.release()
        server.should_exit = True
        thread.join(timeout=30)
