"""Recording degrades, never fails: with the database locked by another process or its
disk full, every call and episode still succeeds and the server says why records are
missing. And `--log-format json` writes one object a line, naming session and call."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.monitoring.conftest import PROTOCOL, Episode, read_db, recording_server, wait_for_episode
from tests.monitoring.test_metrics import scrape, value
from tests.waiting import wait_until


def play(episode: Episode, calls: int, text: str = "x") -> None:
    episode.create()
    for _ in range(calls):
        assert episode.call("echo", text=text).result()["ok"]
    assert episode.call("submit", answer="0").result()["output"]["reward"] == 1.0
    episode.delete()


def test_a_locked_database_costs_records_not_calls(tmp_path: Path) -> None:
    server, db = recording_server([PROTOCOL], tmp_path)
    try:
        first = Episode(server, "protocol")
        play(first, 2)
        wait_for_episode(db, first.sid, calls=3)
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as locker:
            locker.execute("BEGIN EXCLUSIVE")  # another process holds the database
            locked = Episode(server, "protocol")
            play(locked, 5)  # every call answers while the writer waits
            wait_until(
                lambda: "could not record" in server.log(), 30, message="a warning in the log"
            )
            locker.execute("ROLLBACK")
        dropped = value(scrape(server), "orsbox_episode_records_dropped_total")
        assert dropped >= 1
        after = Episode(server, "protocol")
        play(after, 1)
        wait_for_episode(db, after.sid, calls=2)  # recording resumed on its own
    finally:
        server.stop()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB filesystem of its own (root may mount a tmpfs)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_costs_records_not_calls(tmp_path: Path, tiny_disk: Path) -> None:
    server, _ = recording_server([PROTOCOL], tmp_path, episodes_db=tiny_disk / "episodes.sqlite3")
    try:
        # 12 calls of 20 KB in and out (each kept up to 16 K characters): ~400 KB
        play(Episode(server, "protocol"), 12, text="y" * 20_000)
        wait_until(lambda: "could not record" in server.log(), 30, message="a warning")
        assert "database or disk is full" in server.log()
        assert value(scrape(server), "orsbox_episode_records_dropped_total") >= 1
    finally:
        server.stop()


def test_json_logs_name_session_and_call(tmp_path: Path) -> None:
    server, db = recording_server([PROTOCOL], tmp_path, log_format="json")
    try:
        episode = Episode(server, "protocol")
        episode.create()
        task_id = dict(episode.call("explode").events)["task_id"]
        episode.delete()
        wait_for_episode(db, episode.sid)
    finally:
        server.stop()
    lines = [line for line in server.log().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message"} <= set(records[0])
    raised = [r for r in records if r.get("call_id") == task_id]
    assert raised and raised[0]["session_id"] == episode.sid and raised[0]["level"] == "warning"
    assert "kaboom" in raised[0]["message"] and "Traceback" in raised[0]["exception"]
    assert any(r["logger"] == "uvicorn.access" for r in records)
    assert read_db(db, "SELECT outcome FROM calls")[0]["outcome"] == "raised"
