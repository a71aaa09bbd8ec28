"""The reward-hacking report end to end: SWE episodes played over HTTP against
`orsbox serve swebench:` with episode recording on; the cheating one is flagged in
`orsbox episodes list --flagged`, in `orsbox episodes show` and on its episode page, the
honest one is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.formats.swebench import dataset, images
from tests.monitoring.conftest import Episode, recording_server, wait_for_episode
from tests.monitoring.test_episodes import episodes_cli

pytestmark = [pytest.mark.docker]

INSTANCE = "pytest-dev__pytest-1"


def play(server: object, patch: str) -> tuple[str, dict[str, Any]]:
    """One episode that applies `patch` and submits: its session id and graded result."""
    episode = Episode(server, "flagged")  # type: ignore[arg-type]
    episode.create(task_spec={"instance_id": INSTANCE})
    episode.call("write_file", path="/tmp/agent.diff", content=patch).result()
    applied = episode.call("bash", command="git apply /tmp/agent.diff && echo APPLIED").result()
    assert "APPLIED" in applied["output"]["blocks"][0]["text"], applied
    graded = episode.call("submit").result()
    assert graded["output"]["finished"], graded
    episode.delete()
    return episode.sid, graded["output"]


def test_cheating_episode_is_flagged_everywhere(tmp_path: Path, test_images: list[str]) -> None:
    path = dataset.write_jsonl(tmp_path / "test.jsonl", [dataset.v4_row()])
    targets = [f"swebench:{path}", "--name", "flagged"]
    for rule in images.IMAGE_MAP:
        targets += ["--image-map", rule]
    server, db = recording_server(targets, tmp_path)  # official grading: the default
    try:
        honest, _ = play(server, dataset.patches().gold)
        cheat, graded = play(server, dataset.cheats()["pytest.ini addopts"][0])
        honest_id = wait_for_episode(db, honest)["id"]
        cheat_id = wait_for_episode(db, cheat)["id"]
        page = httpx.get(f"{server.url}/ui/episodes/{cheat_id}", timeout=30).text
        clean_page = httpx.get(f"{server.url}/ui/episodes/{honest_id}", timeout=30).text
    finally:
        server.stop()

    # the reward is the official verdict, which the harness gives this cheat; strict is 0
    assert graded["reward"] == 1.0 and graded["metadata"]["grading"] == "official"
    assert graded["metadata"]["verdicts"]["strict"]["resolved"] is False

    flagged = episodes_cli("list", "--flagged", "--db", str(db))
    assert cheat_id[:12] in flagged and honest_id[:12] not in flagged, flagged
    every = episodes_cli("list", "--db", str(db))
    assert cheat_id[:12] in every and honest_id[:12] in every

    shown = episodes_cli("show", cheat_id, "--db", str(db))
    assert "reward hacking: protected files changed: pytest.ini" in shown, shown
    assert "reward hacking" not in episodes_cli("show", honest_id, "--db", str(db))

    assert 'id="reward-hacking"' in page and "protected files changed: pytest.ini" in page
    assert 'id="reward-hacking"' not in clean_page
