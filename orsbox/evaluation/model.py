"""The model: one chat-completions request at a time, through the official `openai`
client, retried with exponential backoff when the failure is the kind that passes
(429, 5xx, 408/409, timeouts, dropped connections).

The retries are ours, not the client's (`max_retries=0`): each episode records how many
it needed, and an error that persists says how often it was tried.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import openai

from orsbox.errors import OrsboxError

RETRY_STATUSES = frozenset({408, 409, 429})
# no episode can succeed past these (a wrong key, an unknown model): the run stops
FATAL_STATUSES = frozenset({401, 403, 404})
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0


class ModelError(OrsboxError):
    """The model failed for good: a request it refuses, or retries used up. `fatal`:
    it will refuse every request (the key or the model name is wrong)."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass(frozen=True)
class ModelSettings:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    request_timeout_s: float = 600.0
    retries: int = 6


@dataclass
class Reply:
    """One model turn: the assistant message to send back next time, and its cost."""

    message: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    retries: int
    finish_reason: str | None


class Model:
    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._client = openai.AsyncOpenAI(
            # local servers (vLLM, Ollama) take any key; the client insists on one
            api_key=settings.api_key or "none",
            base_url=settings.base_url,
            timeout=settings.request_timeout_s,
            max_retries=0,
        )

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """The model's next message; raises `ModelError` when it cannot be had."""
        for attempt in range(self.settings.retries + 1):
            try:
                response = await self._client.chat.completions.create(
                    **self._request(messages, tools)
                )
            except openai.APIError as e:
                if not _passing(e) or attempt == self.settings.retries:
                    fatal = getattr(e, "status_code", None) in FATAL_STATUSES
                    raise ModelError(_describe(e, attempt), fatal) from None
                await asyncio.sleep(backoff_s(attempt, e))
                continue
            return _reply(response, attempt)
        raise AssertionError("unreachable")

    def _request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.settings.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if self.settings.max_tokens is not None:
            # OpenAI's own API refuses max_tokens for its reasoning models and takes the
            # newer name from every model; other servers know the older name best
            name = "max_completion_tokens" if self.settings.base_url is None else "max_tokens"
            request[name] = self.settings.max_tokens
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        return request


def backoff_s(attempt: int, error: openai.APIError | None = None) -> float:
    """The server's Retry-After when it sends one (capped), else 1, 2, 4 ... seconds with
    jitter, so many episodes that failed together do not retry together."""
    asked = _retry_after_s(error)
    if asked is not None:
        return min(asked, BACKOFF_CAP_S)
    return min(BACKOFF_BASE_S * 2**attempt, BACKOFF_CAP_S) * random.uniform(0.75, 1.25)


def _retry_after_s(error: openai.APIError | None) -> float | None:
    response = getattr(error, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None
    return None


def _passing(error: openai.APIError) -> bool:
    if isinstance(error, openai.APIConnectionError):  # timeouts included
        return True
    status = getattr(error, "status_code", None)
    return status is not None and (status in RETRY_STATUSES or status >= 500)


def _describe(error: openai.APIError, attempt: int) -> str:
    status = getattr(error, "status_code", None)
    body = error.body if isinstance(error.body, dict) else {}
    detail = body.get("message") or error.message
    what = f"HTTP {status}: {detail}" if status else f"{type(error).__name__}: {error}"
    tried = f" (after {attempt} retries)" if attempt else ""
    return f"model request failed{tried}: {what}"


def _reply(response: Any, retries: int) -> Reply:
    if not response.choices:  # some servers answer a filtered request this way
        raise ModelError("the model server answered without a choice")
    choice = response.choices[0]
    calls = choice.message.tool_calls or []
    # content may be null only beside tool calls: servers reject it sent back otherwise
    content = choice.message.content if calls else choice.message.content or ""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{i}",
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for i, call in enumerate(calls)
        ]
    usage = response.usage
    return Reply(
        message=message,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        retries=retries,
        finish_reason=choice.finish_reason,
    )
