"""One episode: a model plays one task over ORS until a tool says `finished`, the turns
run out, or the time runs out.

The prompt is the first user message and the environment's tools are the model's
function tools. Every tool call goes to the environment, even one naming a tool that
does not exist or with input the schema rejects: the environment's error is the answer
the model reads. Only arguments that are not a JSON object are answered here, in the
same form. The reward is the last one the environment gave; an episode whose session
could not be set up, whose grader could not run (a `GradingError` in the call's error
event), or whose model failed for good, is an error, not a reward of 0.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from orsbox.client import AsyncSession, ClientError, ToolFailed
from orsbox.errors import GradingError
from orsbox.evaluation import messages as M
from orsbox.evaluation.model import Model, ModelError, Reply

# how an episode ended
FINISHED, MAX_TURNS, TIME_LIMIT, ERROR = "finished", "max_turns", "time_limit", "error"


@dataclass(frozen=True)
class Server:
    """Where the environment is served."""

    url: str
    env: str
    token: str | None = None


@dataclass(frozen=True)
class Limits:
    max_turns: int = 50
    time_limit_s: float | None = None  # from the prompt on; setup has the server's limits


@dataclass(frozen=True)
class Task:
    split: str
    index: int
    task_id: str | None = None


@dataclass
class Episode:
    """What one episode did: the JSONL record (`record()`) and its transcript."""

    task: Task
    epoch: int
    session_id: str | None = None  # the ORS session: the server's logs and records name it
    status: str = ERROR
    reward: float | None = None
    error: str | None = None
    grading_cause: str | None = None  # the grader could not run (an error, no reward)
    turns: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_retries: int = 0
    seconds: float = 0.0
    tools: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {
            "split": self.task.split,
            "task": self.task.index,
            "task_id": self.task.task_id,
            "epoch": self.epoch,
            "session_id": self.session_id,
            "status": self.status,
            "reward": self.reward,
            "error": self.error,
            "grading_cause": self.grading_cause,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model_retries": self.model_retries,
            "seconds": round(self.seconds, 3),
        }

    def transcript(self) -> dict[str, Any]:
        return {
            "task": asdict(self.task),
            "epoch": self.epoch,
            "result": self.record(),
            "tools": self.tools,
            "messages": self.messages,
            "calls": self.calls,
        }


async def play(
    http: httpx.AsyncClient,
    server: Server,
    model: Model,
    task: Task,
    epoch: int,
    limits: Limits,
    system_prompt: str | None = None,
) -> Episode:
    """Play the episode; raises only when cancelled or when the model refuses for good
    (`ModelError.fatal`): anything else a server or model does is in the `Episode`."""
    episode = Episode(task, epoch)
    started = time.monotonic()
    try:
        session = AsyncSession(http, server.url, server.env, task.split, task.index, server.token)
        episode.session_id = session.sid
        async with session:
            await _set_up(session, episode, system_prompt)
            await _play_limited(session, model, episode, limits)
    except GradingError as e:
        episode.status, episode.error, episode.grading_cause = ERROR, e.wire(), e.cause
    except (ClientError, httpx.HTTPError) as e:
        episode.status, episode.error = ERROR, f"environment: {_text(e)}"
    except ModelError as e:
        if e.fatal:
            raise
        episode.status, episode.error = ERROR, str(e)
    finally:
        episode.seconds = time.monotonic() - started
    return episode


async def _set_up(session: AsyncSession, episode: Episode, system_prompt: str | None) -> None:
    try:
        prompt = await session.prompt()
        episode.tools = await session.tools()
    except ClientError as e:
        raise ClientError(f"setup: {e}") from None
    if system_prompt:
        episode.messages.append({"role": "system", "content": system_prompt})
    episode.messages.append(M.user_message(prompt))


async def _play_limited(
    session: AsyncSession, model: Model, episode: Episode, limits: Limits
) -> None:
    deadline = asyncio.timeout(limits.time_limit_s)
    try:
        async with deadline:
            await _turns(session, model, episode, limits.max_turns)
    except TimeoutError:
        if not deadline.expired():
            raise
        episode.status = TIME_LIMIT


async def _turns(session: AsyncSession, model: Model, episode: Episode, max_turns: int) -> None:
    tools = M.function_tools(episode.tools)
    episode.status = MAX_TURNS
    while episode.turns < max_turns:
        reply = await model.complete(episode.messages, tools)
        _count(episode, reply)
        calls = reply.message.get("tool_calls", [])
        if not calls:
            episode.messages.append({"role": "user", "content": M.NO_TOOL_CALL})
        for call in calls:
            if await _call(session, episode, call):
                episode.status = FINISHED
                return


def _count(episode: Episode, reply: Reply) -> None:
    episode.turns += 1
    episode.prompt_tokens += reply.prompt_tokens
    episode.completion_tokens += reply.completion_tokens
    episode.model_retries += reply.retries
    episode.messages.append(reply.message)


async def _call(session: AsyncSession, episode: Episode, call: dict[str, Any]) -> bool:
    """Answer one tool call; True when the environment says the episode is finished."""
    name, raw = call["function"]["name"], call["function"]["arguments"]
    arguments, problem = M.parse_arguments(raw)
    entry: dict[str, Any] = {"turn": episode.turns, "name": name, "input": arguments or raw}
    episode.calls.append(entry)
    if problem is not None:
        entry["error"] = problem
        episode.messages.append(M.error_message(call["id"], problem))
        return False
    episode.tool_calls += 1
    try:
        result = await session.call(name, arguments)
    except ToolFailed as e:  # the tool raised: the model reads why, as from any tool
        grading = e.grading_error
        if grading is not None:  # no reward to read: the episode ends as an error
            entry["error"] = grading.wire()
            raise grading from None
        result = {"ok": False, "error": str(e)}
    episode.messages.extend(M.tool_messages(call["id"], result))
    if not result.get("ok"):
        entry["error"] = result.get("error")
        return False
    output = result["output"]
    entry.update(reward=output.get("reward"), finished=bool(output.get("finished")))
    if output.get("reward") is not None:
        episode.reward = output["reward"]
    return bool(output.get("finished"))


def _text(error: Exception) -> str:
    return str(error) or type(error).__name__
