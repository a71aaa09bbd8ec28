"""An asyncio client of orsbox's sandbox API (`orsbox.server.routes.sandboxes`).

The API is the one the `openreward` client speaks (create, `/run`, chunked files,
delete), plus orsbox's own `/run` fields (`cwd`, `env`, `user`). Integrations that drive
a remote orsbox server, or a cluster behind its router, use this client so that every
sandbox they start is an ordinary API sandbox there: under the server's policy, its
limits and its reaper, and routed by its id to the cell that holds it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import httpx

from orsbox.client import ClientError, ResultReader, ToolFailed

FILE_CHUNK_BYTES = 4 * 1024 * 1024  # one /write_file or /read_file request
REQUEST_TIMEOUT_S = 60.0
RUN_GRACE_S = 30.0  # what a /run may take past its own timeout (kill, reply)


@dataclass(frozen=True)
class RunResult:
    """One `/run`'s answer: the output bytes (stdout and stderr as written) and how the
    command ended. `exit_code` is None only when it timed out."""

    output: bytes
    exit_code: int | None
    timed_out: bool


class FileRefused(ClientError):
    """A file request the server refused: `status` is its HTTP status (400 a path that
    is no regular file or cannot be read, 404 a missing file, 413 too large)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class CommandFailed(ClientError):
    """The server answered a request with an `error` event: the command or the sandbox
    could not start (an unknown user, a failed image); the text says why."""


class SandboxApiClient:
    """One client (one token) of one orsbox server or router."""

    def __init__(self, url: str, token: str | None, *, timeout_s: float = REQUEST_TIMEOUT_S):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def create(self, settings: dict[str, Any], *, timeout_s: float = 600.0) -> str:
        """Start a sandbox (`SandboxSettings` fields) and return its id once it runs."""
        answer = await self._stream("/create_sandbox", settings, None, timeout_s)
        return str(answer["sid"])

    async def run(
        self,
        sid: str,
        command: str,
        *,
        timeout_s: float,
        max_bytes: int,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
    ) -> RunResult:
        body: dict[str, Any] = {"cmd": command, "timeout_s": timeout_s, "max_bytes": max_bytes}
        body.update({k: v for k, v in (("cwd", cwd), ("env", env), ("user", user)) if v})
        answer = await self._stream("/run", body, sid, timeout_s + RUN_GRACE_S)
        timed_out = bool(answer.get("timed_out"))
        code = None if timed_out else int(answer["return_code"])
        return RunResult(base64.b64decode(answer["output"]), code, timed_out)

    async def read_file(self, sid: str, path: str, *, max_bytes: int) -> bytes:
        """The whole file, in chunks; `FileRefused` (413) when it is over `max_bytes`."""
        size = int((await self._post("/stat_file", sid, params={"path": path}))["size"])
        if size > max_bytes:
            raise FileRefused(f"{path} is {size} bytes, over the {max_bytes}-byte limit", 413)
        data = bytearray()
        while len(data) < size:
            params = {"path": path, "offset": len(data), "length": FILE_CHUNK_BYTES}
            chunk = (await self._request("/read_file", sid, params=params)).content
            if not chunk:
                raise ClientError(f"{path} shrank while it was read")
            data += chunk
        return bytes(data)

    async def write_file(self, sid: str, path: str, data: bytes) -> None:
        """Write `data` exactly (chunks, then a commit that renames it into place)."""
        for offset in range(0, max(len(data), 1), FILE_CHUNK_BYTES):
            chunk = data[offset : offset + FILE_CHUNK_BYTES]
            params = {"path": path, "offset": offset, "mkdirs": 1}
            await self._post("/write_file", sid, params=params, content=chunk)
        await self._post("/write_file", sid, params={"path": path, "commit": 1, "size": len(data)})

    async def delete(self, sid: str) -> None:
        await self._http.post("/delete_session", headers={"X-Session-ID": sid})

    # -- plumbing

    async def _post(self, path: str, sid: str, **kwargs: Any) -> dict[str, Any]:
        return (await self._request(path, sid, **kwargs)).json()

    async def _request(self, path: str, sid: str, **kwargs: Any) -> httpx.Response:
        response = await self._http.post(path, headers={"X-Session-ID": sid}, **kwargs)
        if response.status_code != 200:
            status = response.status_code
            raise FileRefused(f"{path}: HTTP {status}: {_detail(response)}", status)
        return response

    async def _stream(self, path: str, body: Any, sid: str | None, timeout_s: float) -> Any:
        headers = {"Accept": "text/event-stream", **({"X-Session-ID": sid} if sid else {})}
        request = self._http.stream("POST", path, json=body, headers=headers, timeout=timeout_s)
        async with request as response:
            if response.status_code != 200:
                await response.aread()
                raise ClientError(f"{path}: HTTP {response.status_code}: {_detail(response)}")
            reader = ResultReader()  # skips the `task_id` event, raises on `error`
            try:
                async for line in response.aiter_lines():
                    if (result := reader.feed(line)) is not None:
                        return result
            except ToolFailed as e:
                why = str(e).removeprefix("the tool failed: ")
                raise CommandFailed(f"{path}: {why}") from None
        raise ClientError(f"{path}: the answer ended without a result")


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", response.text))
    except (ValueError, AttributeError):
        return response.text
