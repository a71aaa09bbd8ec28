"""The README's quick start, run as written on a fresh clone: its first command alone
(engine, install, images, serve) serves the four bundled environments, and the README's
`orsbox run swe` line plays the example against it to reward 1.

The commands are read from README.md, so the test follows the README when it changes.
"A fresh machine" is approximated where this machine allows: a fresh `git clone` of
this commit, installed by the README's own `pip install -e .` into a virtualenv that
sees the already-installed dependencies (so no 100-package download), on an engine
that already runs (`scripts/start-docker.sh` then does nothing) with images that are
already built (scripts/test.sh builds them first; `orsbox serve` would otherwise)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ROOT, free_port
from tests.waiting import poll_until, wait_until

README = ROOT / "README.md"
SERVE_TIMEOUT_S = 300  # pip install -e . (fetches setuptools for the build) and serve


def quick_start() -> tuple[str, str]:
    """The quick start's first command and its `orsbox run swe --url ...` line."""
    section = README.read_text().split("## Quick start", 1)[1]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    first = blocks[0].splitlines()[0].split("#", 1)[0].strip()
    play = next(
        line.split("#", 1)[0].strip()
        for block in blocks[1:]
        for line in block.splitlines()
        if line.startswith("orsbox run swe") and "--url" in line
    )
    return first, play


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A clone of this commit and an environment whose `pip` and `orsbox` are a new
    virtualenv's."""
    clone = tmp_path / "orsbox"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        VIRTUAL_ENV=str(venv),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    yield clone, env


def test_the_readme_quick_start_serves_and_plays(
    fresh_clone: tuple[Path, dict[str, str]], bundled_images: None, tmp_path: Path
) -> None:
    clone, env = fresh_clone
    first, play = quick_start()
    assert first == "bash scripts/start-docker.sh && pip install -e . && orsbox serve", first
    port = free_port()
    server_id = f"test-readme-{uuid.uuid4().hex[:8]}"
    env.update(ORSBOX_PORT=str(port), ORSBOX_SERVER_ID=server_id)
    env["ORSBOX_EPISODES_DB"] = str(tmp_path / "episodes.sqlite3")
    log = tmp_path / "quick-start.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", first], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: process.poll() is not None or _healthy(url),
            SERVE_TIMEOUT_S,
            0.5,
            "the quick start's first command serves",
        )
        assert process.poll() is None, log.read_text()
        assert httpx.get(f"{url}/list_environments").json() == ["math", "coding", "swe", "terminal"]
        installed = subprocess.run(
            ["python", "-c", "import orsbox; print(orsbox.__file__)"],
            cwd="/",
            env=env,
            capture_output=True,
            text=True,
        )
        assert installed.stdout.startswith(str(clone)), installed  # the clone's, not ours

        played = subprocess.run(
            ["bash", "-c", play.replace("127.0.0.1:8080", f"127.0.0.1:{port}")],
            cwd=clone, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert played.returncode == 0, played.stdout + played.stderr
        assert "final reward: 1.0  finished: true" in played.stdout, played.stdout
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
    left = poll_until(lambda: not _containers_of(server_id), 30)
    assert left, f"the quick start's server left containers: {_containers_of(server_id)}"


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _containers_of(server_id: str) -> list[str]:
    import docker

    client = docker.from_env()
    try:
        return [
            c["Id"]
            for c in client.api.containers(
                all=True, filters={"label": f"orsbox.server={server_id}"}
            )
        ]
    finally:
        client.close()
