"""Harbor 0.26 itself running tasks in orsbox sandboxes, compared with `orsbox check`.

`harbor run -p TASK -a oracle|nop -e orsbox.integrations.harbor:OrsboxEnvironment` runs
in a Python 3.12 virtual environment with Harbor and orsbox installed (scripts/test.sh
makes it at $ORSBOX_HARBOR_VENV); each trial's reward (its `result.json`) must equal what
`orsbox check` gives the same task: oracle = the solution's score, nop = untouched.
Harbor's own Docker environment cannot run here (it needs Compose v2, which Debian 12
does not package), so orsbox check, which runs Harbor's verifier semantics, is the
reference, and Harbor's own template task is compared as it ships. A trial runs on
Podman too (`--ek engine=...`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtimes import PODMAN_ENGINE, runtime_available
from tests.servers import ROOT, start_server

VENV = Path(os.environ.get("ORSBOX_HARBOR_VENV", "/opt/orsbox-harbor-venv"))
HARBOR = VENV / "bin" / "harbor"
PARITY = ROOT / "tests" / "fixtures" / "harbor-parity"
TEMPLATE = ROOT / "tests" / "fixtures" / "harbor" / "template-task"
ENVIRONMENT = "orsbox.integrations.harbor:OrsboxEnvironment"
TOKEN = "harbor-env-token-0123456789"
LABEL = "orsbox.harbor.session"
# No traffic off this machine: litellm's cost map is not fetched at import, and Harbor's
# end-of-job telemetry is off (it imports litellm first, which held every trial's exit
# for 12 s here: 22.8 s -> 4.0 s a trial, 7.4 -> 2.0 s of CPU)
QUIET_HARBOR = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0"}

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module", autouse=True)
def harbor_installed() -> None:
    if not HARBOR.exists():
        message = f"no Harbor at {HARBOR} (scripts/test.sh makes it; see docs/harbor.md)"
        if os.environ.get("ORSBOX_REQUIRE_HARBOR") == "1":
            pytest.fail(message)
        pytest.skip(message)


def harbor_run(
    task: Path, agent: str, jobs: Path, *kwargs: str, env: dict[str, str] | None = None
) -> dict:
    """One trial (`env`: variables besides this process's); its result.json."""
    argv = [str(HARBOR), "run", "-p", str(task), "-a", agent, "-e", ENVIRONMENT]
    argv += ["-o", str(jobs)]
    for kwarg in kwargs:
        argv += ["--ek", kwarg]
    env = {**os.environ, **QUIET_HARBOR, **(env or {})}
    done = subprocess.run(
        argv, cwd=jobs.parent, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = [p for p in jobs.glob("*/*/result.json")]
    return json.loads(result.read_text())


def reward(result: dict) -> float | None:
    verifier = result.get("verifier_result") or {}
    return (verifier.get("rewards") or {}).get("reward")


def orsbox_check(task: Path, *options: str) -> dict[str, str]:
    """`orsbox check`'s row for the task: solution, untouched, verdict."""
    argv = [sys.executable, "-m", "orsbox.cli.main", "check", str(task), *options]
    done = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    row = next(line for line in done.stdout.splitlines() if task.name in line and "│" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    return {"solution": cells[1], "untouched": cells[2], "verdict": cells[3]}


@pytest.mark.parametrize("task", ["word-count", "hello-prebuilt"])
def test_oracle_and_nop_through_orsbox_equal_orsbox_check(
    task: str, tmp_path: Path, base_image: str, docker_client
) -> None:
    folder = PARITY / task
    oracle = harbor_run(folder, "oracle", tmp_path / "oracle")
    nop = harbor_run(folder, "nop", tmp_path / "nop")
    check = orsbox_check(folder)
    assert (reward(oracle), reward(nop)) == (1.0, 0.0), (oracle, nop)
    assert (check["solution"], check["untouched"]) == ("1", "0"), check
    assert oracle["exception_info"] is None and nop["exception_info"] is None
    assert not docker_client.containers.list(all=True, filters={"label": LABEL})


@pytest.mark.parametrize("mapped_by", ["--ek", "ORSBOX_BACKEND"])
def test_harbors_template_task_as_it_ships(tmp_path: Path, base_image: str, mapped_by: str) -> None:
    """Its test.sh writes no reward: Harbor's trial ends in its reward-file error
    through orsbox's environment, as it does under Harbor's own verifier. Its image
    (`ubuntu:24.04`, from no registry here) is mapped by `--ek image_map=` or by the
    backend `ORSBOX_BACKEND` configures, as the server's."""
    rule = "ubuntu:24.04=orsbox/debian:bookworm"
    if mapped_by == "--ek":
        result = harbor_run(TEMPLATE, "oracle", tmp_path / "template", f"image_map={rule}")
    else:
        backend = {"ORSBOX_BACKEND": json.dumps({"image_map": [rule]})}
        result = harbor_run(TEMPLATE, "oracle", tmp_path / "template", env=backend)
    assert reward(result) is None
    assert "RewardFileNotFound" in json.dumps(result["exception_info"])


def test_through_an_orsbox_server_by_url_and_token(tmp_path: Path, base_image: str) -> None:
    server = start_server(
        ["tests/fixture_envs/protocol_envs.py:Protocol"],
        tmp_path,
        sandbox_api=1,
        sandbox_tokens=json.dumps([TOKEN]),
    )
    try:
        folder = PARITY / "hello-prebuilt"
        remote = (f"url={server.url}", f"token={TOKEN}")
        oracle = harbor_run(folder, "oracle", tmp_path / "oracle", *remote)
        nop = harbor_run(folder, "nop", tmp_path / "nop", *remote)
    finally:
        server.stop()
    assert (reward(oracle), reward(nop)) == (1.0, 0.0), (oracle, nop)


def test_a_trial_on_podman(tmp_path: Path, base_image: str) -> None:
    """`--ek engine=` Podman's: the oracle scores 1.0, its verifier running as root with
    no capabilities (it writes /logs/verifier). (A task wanting the network is refused
    when its sandbox starts, naming Podman: tests/sandbox/test_podman.py; nop's 0.0 and
    the parity with `orsbox check` are the runc trials' above.)"""
    runtime_available("podman")
    oracle = harbor_run(
        PARITY / "hello-prebuilt", "oracle", tmp_path / "oracle", f"engine={PODMAN_ENGINE}"
    )
    assert reward(oracle) == 1.0 and oracle["exception_info"] is None, oracle
