"""A Terminal-Bench-2-shaped task on every backend (docs/backends.md, "Every environment
on every backend"), through `orsbox check` as an author runs it: `storage_mb` set, no
network for the agent and, in `count-lines`, an allow-listed network for the verifier
(TB2's verifiers fetch their runner at grading time). On runc it is test_tb2.py's
`count-lines`. Under gVisor and on Podman a sandbox can have no such network and
cannot switch to one, so that task is refused at setup naming the engine, before its
agent runs, never at grading; `count-lines-offline`, the same task with a verifier
that needs no network, scores 1.0 with its solution and 0.0 untouched there."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.environments.conftest import orsbox
from tests.formats.harbor.tasks import write
from tests.formats.harbor.tb2 import TASK_TOML, VERIFIER_MIRROR_ONLY
from tests.runtimes import ENGINES, backend_setting, runtime_available

pytestmark = [pytest.mark.docker]

TEST_SH = """
#!/bin/bash
if [ "$(cat /workspace/count.txt 2>/dev/null)" = "3" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""
# what the refusal names, per engine (orsbox/formats/harbor/phases.py's `unmet_by`)
ENGINE_NAMED = {
    "runsc": r"\(gVisor: docs/gvisor\.md\)",
    "podman": r"\(Podman 4\.\S+: docs/backends\.md\)",
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both tasks on orsbox/base, which every engine holds (so nothing is built)."""
    root = tmp_path_factory.mktemp("tb2-backends")
    for name, verifier in (("count-lines", VERIFIER_MIRROR_ONLY), ("count-lines-offline", "")):
        toml = TASK_TOML.format(
            verifier=verifier,
            agent='network_mode = "no-network"\n',
            docker_image='docker_image = "orsbox/base:latest"\nnetwork_mode = "no-network"\n',
            storage_mb=64,
        )
        write(
            root / name,
            {
                "task.toml": toml,
                "instruction.md": "Write the number 3 into /workspace/count.txt.\n",
                "tests/test.sh": TEST_SH,
                "solution/solve.sh": "#!/bin/bash\necho 3 > /workspace/count.txt\n",
            },
        )
    return root


@pytest.mark.parametrize("runtime", list(ENGINES))
def test_verifier_network_refused_at_setup_and_offline_task_plays(
    base_image: str, dataset: Path, runtime: str
) -> None:
    runtime_available(runtime)
    env = {
        **os.environ,
        "ORSBOX_BACKEND": backend_setting(runtime),
        "ORSBOX_ALLOW_NETWORK_ALLOWLIST": "1",  # the operator allows it: the engine cannot
        "COLUMNS": "400",
    }
    done = orsbox("check", str(dataset), "--concurrency", "2", env=env, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr  # one task cannot run here
    rows = table_rows(done.stdout)
    assert rows["count-lines-offline"][:3] == ["1", "0", "ok"], rows
    solution, untouched, verdict = rows["count-lines"][:3]
    assert (solution, untouched) == ("-", "-"), rows  # no episode ran: refused at setup
    refused = (
        r"FAIL SetupFailed: task count-lines: its verifier's network differs from its "
        r"agent's, and this server's sandboxes cannot change their network while running "
        rf"\(network modes offered: .*{ENGINE_NAMED[runtime]}\)"
    )
    assert re.fullmatch(refused, verdict), verdict


def table_rows(stdout: str) -> dict[str, list[str]]:
    """`orsbox check`'s table: task -> [solution, untouched, verdict, time], each cell's
    lines (rich wraps a long verdict) joined."""
    rows: dict[str, list[str]] = {}
    current: list[str] = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 5 or cells[0] == "task":
            continue
        if cells[0]:
            current = rows.setdefault(cells[0], ["", "", "", ""])
        for i, cell in enumerate(cells[1:]):
            current[i] = f"{current[i]} {cell}".strip() if cell else current[i]
    return rows
