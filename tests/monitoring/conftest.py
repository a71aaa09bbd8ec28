"""A real server recording into a database of its own, and a small ORS client to play
episodes on it over HTTP (the operator's view is checked against what was played)."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.environments.conftest import bundled_images, example, orsbox
from tests.servers import ROOT, LiveServer, start_server
from tests.sse_client import Stream, post_sse
from tests.waiting import wait_until

CODING = str(ROOT / "environments" / "coding")
PROTOCOL = "tests/fixture_envs/protocol_envs.py:Protocol"

__all__ = ["bundled_images", "example", "orsbox"]  # shared with tests/environments


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/monitoring" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@dataclass
class Episode:
    """One session on a live server, driven call by call."""

    server: LiveServer
    env: str
    sid: str = field(default_factory=lambda: str(uuid.uuid4()))
    headers: dict[str, str] = field(default_factory=dict)

    def create(self, *, prompt: bool = True, **body: Any) -> None:
        """`/create` (train 0 unless a task is given), then the prompt, as an agent
        reads it before its first call."""
        if "task_spec" not in body:
            body = {"split": "train", "index": 0, **body}
        answer = httpx.post(
            f"{self.server.url}/create",
            json={"env_name": self.env, **body},
            headers={"X-Session-ID": self.sid, **self.headers},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        if not prompt:
            return
        shown = httpx.get(
            f"{self.server.url}/{self.env}/prompt",
            headers={"X-Session-ID": self.sid, **self.headers},
            timeout=120,
        )
        assert shown.status_code == 200, shown.text

    def call(self, tool: str, http_timeout: float = 120, **tool_input: Any) -> Stream:
        stream = post_sse(
            f"{self.server.url}/{self.env}/call",
            {"name": tool, "input": tool_input},
            self.sid,
            timeout=http_timeout,
            **self.headers,
        )
        assert stream.status == 200, stream.raw
        return stream

    def delete(self) -> None:
        answer = httpx.post(
            f"{self.server.url}/delete", headers={"X-Session-ID": self.sid, **self.headers}
        )
        assert answer.status_code == 200, answer.text


def recording_server(
    targets: list[str], tmp_path: Path, **settings: object
) -> tuple[LiveServer, Path]:
    settings.setdefault("episodes_db", tmp_path / "episodes.sqlite3")
    server = start_server(targets, tmp_path, setup_wait_s=60, **settings)
    return server, Path(str(settings["episodes_db"]))


def read_db(db: Path, sql: str, *args: Any) -> list[sqlite3.Row]:
    """Rows from the database as a separate reader sees them (the server keeps writing)."""
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, args).fetchall()


def wait_for_episode(
    db: Path, sid: str, *, ended: bool = True, calls: int | None = None
) -> sqlite3.Row:
    """The session's episode once the writer has committed it (ended, with `calls`)."""

    def committed() -> sqlite3.Row | None:
        if not db.exists():
            return None
        rows = read_db(db, "SELECT * FROM episodes WHERE session_id = ?", sid)
        if not rows or (ended and rows[0]["ended_at"] is None):
            return None
        if calls is not None and rows[0]["calls"] != calls:
            return None
        return rows[0]

    return wait_until(committed, 30, 0.05, f"episode of session {sid} recorded")


@pytest.fixture(scope="module")
def coding_server(
    tmp_path_factory: pytest.TempPathFactory, bundled_images: None
) -> Iterator[tuple[LiveServer, Path]]:
    server, db = recording_server([CODING, PROTOCOL], tmp_path_factory.mktemp("observe"))
    yield server, db
    server.stop()
