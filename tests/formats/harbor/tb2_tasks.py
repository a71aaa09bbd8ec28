"""Tasks shaped like Terminal-Bench 2's (written here, not copied): `test.sh` installs
its test runner at grading time, runs `tests/test_outputs.py` with it and writes
`reward.txt` 1 or 0 from its exit status whatever failed on the way, as every TB2
verifier does. The sandbox images have no apt at grading time and no curl, so the
bootstraps here use what they have (python3): pip for the runner, urllib for the
installer download.

    runner-ready          pytest is in the image: the bootstrap is skipped, tests run
    runner-install-fails  no pytest and no pip: the install fails, `pytest: command
                          not found`, reward.txt 0
    runner-offline        TB2's uv bootstrap with the network off: the installer's
                          download fails, `uvx: command not found`, reward.txt 0
    verifier-slow         test.sh runs past [verifier].timeout_sec
"""

from __future__ import annotations

from pathlib import Path

from tests.formats.harbor.tasks import DOCKERFILE, harbor_task, write

# the Terminal-Bench 1 test task's image line, so both share Docker's cached layer
PYTEST_DOCKERFILE = (
    "FROM ubuntu:24.04\n"
    "RUN apt-get update && apt-get install -y --no-install-recommends python3-pytest"
    " && rm -rf /var/lib/apt/lists/*\n"
    "RUN command -v pytest || ln -s /usr/bin/pytest-3 /usr/local/bin/pytest\n"
    "WORKDIR /app\n"
)

PIP_BOOTSTRAP = """
#!/bin/bash
# Install the test runner unless the image has it, run the tests, write the reward.
if ! command -v pytest >/dev/null 2>&1; then
  python3 -m pip install --user pytest==8.4.1
  export PATH="$HOME/.local/bin:$PATH"
fi
pytest /tests/test_outputs.py -rA -p no:cacheprovider
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""

UV_BOOTSTRAP = """
#!/bin/bash
# Terminal-Bench 2's bootstrap: the uv installer, then uvx runs pytest with a CTRF report.
python3 -c 'import urllib.request as u; u.urlretrieve("https://uv-installer.invalid/0.9.5/install.sh", "/tmp/uv-install.sh")'
sh /tmp/uv-install.sh
source $HOME/.local/bin/env
uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""

SLOW = """
#!/bin/bash
echo "the tests started"
sleep 60
echo 1 > /logs/verifier/reward.txt
"""

TEST_OUTPUTS = """
from pathlib import Path


def test_out_file_exists():
    assert Path("/app/out.txt").exists()


def test_out_file_says_hello():
    assert Path("/app/out.txt").read_text().strip() == "hello"
"""


def tb2_task(folder: Path, test_sh: str, dockerfile: str = DOCKERFILE, **more: float) -> Path:
    """A TB2-shaped task: "hello" into /app/out.txt, checked by pytest tests."""
    harbor_task(
        folder, test_sh, instruction=f"[{folder.name}] Write hello into /app/out.txt.\n", **more
    )  # type: ignore[arg-type]
    return write(
        folder, {"tests/test_outputs.py": TEST_OUTPUTS, "environment/Dockerfile": dockerfile}
    )


def tb2_dataset(root: Path) -> Path:
    tb2_task(root / "runner-ready", PIP_BOOTSTRAP, PYTEST_DOCKERFILE)
    tb2_task(root / "runner-install-fails", PIP_BOOTSTRAP)
    tb2_task(root / "runner-offline", UV_BOOTSTRAP)
    tb2_task(root / "verifier-slow", SLOW, verifier_timeout=3)
    return root
