"""Every episode recorded: the four bundled environments' example episodes played over
HTTP, then read back with `orsbox episodes list | show | export` (JSON lines and Parquet).
Secrets stay out of the record; a server killed mid-episode leaves a readable database
with every finished call in it."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import threading
from pathlib import Path

import docker
import pandas as pd
import pytest
from typer.testing import CliRunner

from orsbox.cli.main import app
from tests.monitoring.conftest import (
    CODING,
    Episode,
    example,
    read_db,
    recording_server,
    wait_for_episode,
)
from tests.servers import LiveServer
from tests.waiting import wait_until

BUNDLED = ("coding", "math", "swe", "terminal")


@pytest.fixture(scope="module")
def bundled_recording(
    tmp_path_factory: pytest.TempPathFactory, bundled_images: None
) -> tuple[LiveServer, Path]:
    server, db = recording_server([], tmp_path_factory.mktemp("bundled-episodes"))
    yield server, db
    server.stop()


def test_every_bundled_environment_is_recorded_and_exported(
    bundled_recording: tuple[LiveServer, Path], tmp_path: Path
) -> None:
    server, db = bundled_recording
    actions = {env: example(env, "train-0-correct") for env in BUNDLED}
    for env, path in actions.items():
        episode = Episode(server, env)
        episode.create()
        for line in path.read_text().splitlines():
            action = json.loads(line)
            result = episode.call(action["name"], **action.get("input", {})).result()
        assert result["output"]["reward"] == 1.0 and result["output"]["finished"], result
        episode.delete()
    wait_until(
        lambda: len(read_db(db, "SELECT id FROM episodes WHERE ended_at IS NOT NULL")) == 4,
        30,
        message="four ended episodes",
    )

    listed = episodes_cli("list", "--db", str(db))
    assert all(env in listed for env in BUNDLED), listed

    exported = episodes_cli("export", "--db", str(db), "--format", "jsonl")
    episodes = {e["environment"]: e for e in map(json.loads, exported.splitlines())}
    assert sorted(episodes) == sorted(BUNDLED)
    for env, episode in episodes.items():
        played = [json.loads(line) for line in actions[env].read_text().splitlines() if line]
        assert [c["tool"] for c in episode["calls"]] == [a["name"] for a in played], env
        assert [c["input"] for c in episode["calls"]] == [a.get("input", {}) for a in played]
        assert episode["final_reward"] == 1.0 and episode["finished"] is True, env
        assert episode["state"] == "ended" and episode["prompt"], env
        last = episode["calls"][-1]
        assert last["reward"] == 1.0 and last["finished"] and last["outcome"] == "ok"
        assert last["output"]["output"]["blocks"], env
        assert episode["usage"]["calls"] == len(played) and episode["usage"]["wall_s"] > 0
        if env != "math":  # the one environment without a sandbox
            assert episode["usage"]["cpu_s"] > 0 and episode["usage"]["peak_memory_bytes"] > 0

    shown = episodes_cli("show", episodes["swe"]["id"][:10], "--db", str(db))
    assert "edit_file" in shown and "final reward: 1.0" in shown

    parquet = tmp_path / "episodes.parquet"
    episodes_cli("export", "--db", str(db), "--format", "parquet", "--output", str(parquet))
    table = pd.read_parquet(parquet)
    assert sorted(table["environment"]) == sorted(BUNDLED)
    swe = table[table["environment"] == "swe"].iloc[0]
    assert [c["tool"] for c in swe["calls"]] == ["edit_file", "bash", "submit"]
    assert swe["final_reward"] == 1.0


def test_secrets_never_reach_the_record(coding_server: tuple[LiveServer, Path]) -> None:
    server, db = coding_server
    secret = "sk-never-record-this-7d1f"
    episode = Episode(server, "protocol")
    episode.create(secrets={"token": secret})
    episode.call("echo", text=f"the key is {secret}")
    episode.call("leak")
    episode.call("explode")
    episode.delete()
    wait_for_episode(db, episode.sid, calls=3)
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    assert secret not in dump
    assert dump.count("[redacted]") >= 3  # the input, the leaked output, the raised error


def test_a_killed_server_leaves_every_finished_call_readable(
    tmp_path: Path, bundled_images: None
) -> None:
    server, db = recording_server([CODING], tmp_path)
    episode = Episode(server, "coding")
    episode.create()
    for n in range(5):
        assert episode.call("bash", command=f"echo call {n}").result()["ok"]
    wait_for_episode(db, episode.sid, ended=False, calls=5)
    hanging = threading.Thread(
        target=lambda: _ignore_errors(episode.call, "bash", command="sleep 60"), daemon=True
    )
    hanging.start()  # the episode's sixth call is running when the server dies
    wait_until(lambda: "sleep 60" in _processes_of(server), 30, message="the sixth call runs")
    server.stop(signal.SIGKILL)

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = read_db(db, "SELECT * FROM episodes WHERE session_id = ?", episode.sid)
    assert rows[0]["ended_at"] is None and rows[0]["state"] == "running"  # died mid-episode
    calls = read_db(db, "SELECT seq, tool, output FROM calls ORDER BY seq")
    assert [c["seq"] for c in calls] == [1, 2, 3, 4, 5]
    assert [json.loads(c["output"])["output"]["blocks"][0]["text"] for c in calls] == [
        f"call {n}\n" for n in range(5)
    ]
    assert "call 4" in episodes_cli("show", rows[0]["id"], "--db", str(db))


def episodes_cli(*args: str) -> str:
    """`orsbox episodes ...` in this process (the command reads only the database)."""
    result = CliRunner().invoke(app, ["episodes", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def _processes_of(server: LiveServer) -> str:
    """The command lines running in the server's sandboxes (docker top)."""
    client = docker.from_env()
    try:
        containers = client.containers.list(filters={"label": f"orsbox.pid={server.process.pid}"})
        return "\n".join(" ".join(p) for c in containers for p in c.top().get("Processes") or [])
    finally:
        client.close()


def _ignore_errors(fn, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
    with contextlib.suppress(Exception):  # the server is killed under this call
        fn(*args, **kwargs)
