"""A minimal raw SSE reader for tests: events exactly as they arrive on the wire."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Stream:
    status: int
    headers: httpx.Headers
    events: list[tuple[str, str]] = field(default_factory=list)
    comments: list[tuple[float, str]] = field(default_factory=list)
    raw: str = ""

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def result(self) -> Any:
        assert self.names()[-1] == "end", self.events
        return json.loads("".join(data for name, data in self.events if name in ("chunk", "end")))


def post_sse(
    url: str,
    body: Any,
    sid: str,
    timeout: float = 60,
    first_event: threading.Event | None = None,
    **headers: str,
) -> Stream:
    """POST and read the whole SSE answer, keeping comments with their arrival times.
    `first_event` is set when the first event arrives (the server has taken the call)."""
    hdrs = {"X-Session-ID": sid, "Accept": "text/event-stream", **headers}
    started = time.monotonic()
    with httpx.stream("POST", url, json=body, headers=hdrs, timeout=timeout) as response:
        stream = Stream(response.status_code, response.headers)
        if response.status_code != 200:
            response.read()
            stream.raw = response.text
            return stream
        name, data = None, []
        for line in response.iter_lines():
            stream.raw += line + "\n"
            if line.startswith(":"):
                stream.comments.append((time.monotonic() - started, line))
            elif line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
            elif line == "" and name is not None:
                stream.events.append((name, "\n".join(data)))
                name, data = None, []
                if first_event is not None:
                    first_event.set()
    return stream
