"""The episode record's writer, without a server: capping keeps JSON valid, retention
removes old ended episodes only, close() writes what was queued."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from orsbox.monitoring.episodes import EpisodeRecorder, cap_output, connect, find, recent


def test_a_capped_output_is_still_the_result_json() -> None:
    result = {"ok": True, "output": {"blocks": [{"type": "text", "text": "a" * 5000 + "END"}]}}
    capped = json.loads(cap_output(json.dumps(result), 1000) or "")
    text = capped["output"]["blocks"][0]["text"]
    assert len(text) < 1100 and text.startswith("aaa") and text.endswith("END")
    assert "characters not recorded" in text


def test_retention_removes_old_ended_episodes_only(tmp_path: Path) -> None:
    db = tmp_path / "episodes.sqlite3"
    old = time.time() - 3 * 86400
    with contextlib.closing(connect(db)) as conn:
        for episode_id, ended in (("old-ended", old + 60), ("old-running", None)):
            conn.execute(
                "INSERT INTO episodes (id, session_id, environment, started_at, ended_at) "
                "VALUES (?, 's', 'math', ?, ?)",
                (episode_id, old, ended),
            )
    recorder = EpisodeRecorder(db, retention_days=1)
    assert recorder.start()  # retention runs first, then hourly
    recorder.episode_started("new", "s2", "math", "{}")
    recorder.close()
    with contextlib.closing(connect(db)) as conn:
        assert sorted(e["id"] for e in recent(conn)) == ["new", "old-running"]


def test_close_writes_every_queued_record(tmp_path: Path) -> None:
    recorder = EpisodeRecorder(tmp_path / "e.sqlite3", output_cap_chars=100)
    assert recorder.start()
    recorder.episode_started("e1", "s1", "coding", json.dumps({"task": 1}))
    recorder.prompt("e1", json.dumps([{"type": "text", "text": "do it"}]))
    for seq in range(1, 201):
        recorder.call(
            "e1", seq, tool="bash", tool_input='{"command": "true"}', output=None,
            outcome="ok", reward=1.0 if seq == 200 else None, finished=seq == 200,
            duration_s=0.01, error=None, started_at=time.time(),
        )  # fmt: skip
    recorder.episode_ended("e1", "ended", None, {"calls": 200})
    recorder.close()
    assert recorder.written == 203 and recorder.dropped == 0
    with contextlib.closing(connect(tmp_path / "e.sqlite3")) as conn:
        episode = find(conn, "e1")
    assert episode is not None and len(episode["calls"]) == 200
    assert episode["final_reward"] == 1.0 and episode["finished"] and episode["state"] == "ended"
    assert episode["prompt"] == [{"type": "text", "text": "do it"}]


def test_an_unwritable_path_only_warns(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    recorder = EpisodeRecorder(blocker / "episodes.sqlite3")
    assert not recorder.start()
    recorder.episode_started("e", "s", "math", None)  # a no-op, not an error
    assert "will not be recorded" in caplog.text
