"""Task folders shaped like Terminal-Bench 2.0's, written for the tests (no upstream files).

Like a published TB2 task: `task.toml` with TB2's limits (1 CPU, 2 GB, `storage_mb`
10 GB, 900 s timeouts) and a `docker_image`
that no registry here has (built from the task's Dockerfile with `--build-missing`);
a Dockerfile `FROM` an official Python image, which the tests map onto the local
Debian base (`TB2_IMAGE_MAP`); a `tests/test.sh` that installs its own test runner with apt at
grading time, never stops on a failed step, runs pytest on `tests/test_outputs.py`,
and writes `/logs/verifier/reward.txt` from pytest's exit code. TB2's own test.sh
fetches uv from the internet and pytest from PyPI; here the runner comes from the
Debian mirror (`python3-pytest`), the only outside host tests may reach.

`count-lines` gives its phases the network as an operator would harden a published
task: none for the agent, and for the verifier only the Debian mirror, through the
allow-list's egress proxy (apt follows `http_proxy`). `sudo-task` keeps the published
default, Harbor's `public`, in every phase.

`sudo-task` runs its agent as a user with `sudo` rights, as some TB2 images do; its
image keeps apt's package lists, so an `apt-get install` needs no `apt-get update`.
"""

from __future__ import annotations

from pathlib import Path

from tests.formats.harbor.tasks import RUN_ID, write

TB2_IMAGE_MAP = "python:3.13-slim-bookworm=orsbox/debian:bookworm"
# As a TB2 task names its published image; missing here, so built with --build-missing.
TB2_DOCKER_IMAGE = f"orsbox-test/count-lines:{RUN_ID}"

# The verifier reaches the Debian mirror and nothing else (Harbor 0.26's allowlist mode).
VERIFIER_MIRROR_ONLY = 'network_mode = "allowlist"\nallowed_hosts = ["deb.debian.org"]\n'

TASK_TOML = """
version = "1.0"

[metadata]
author_name = "orsbox tests"
author_email = "tests@orsbox.invalid"
difficulty = "easy"
category = "file-operations"
tags = ["file-operations", "counting"]
expert_time_estimate_min = 2.0
junior_time_estimate_min = 5.0

[verifier]
timeout_sec = 900.0
{verifier}
[agent]
timeout_sec = 900.0
{agent}
[environment]
build_timeout_sec = 600.0
{docker_image}cpus = 1
memory_mb = 2048
storage_mb = {storage_mb}
"""

DOCKERFILE = """
FROM python:3.13-slim-bookworm

WORKDIR /app

RUN printf 'alpha\\nbeta\\ngamma\\n' > /app/words.txt
"""

TEST_SH = """
#!/bin/bash

apt-get update
apt-get install -y --no-install-recommends python3-pytest

python3 -m pytest /tests/test_outputs.py -rA -p no:cacheprovider

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

TEST_OUTPUTS = '''
"""Checks that /app/count.txt holds the number of lines of /app/words.txt."""

from pathlib import Path


def test_count_file_exists():
    assert Path("/app/count.txt").exists()


def test_count_is_right():
    assert Path("/app/count.txt").read_text().strip() == "3"
'''

SOLVE_SH = """
#!/bin/bash
set -euo pipefail

wc -l < /app/words.txt > /app/count.txt
"""

SUDO_DOCKERFILE = """
FROM python:3.13-slim-bookworm

RUN apt-get update && apt-get install -y --no-install-recommends sudo \\
    && useradd --create-home --shell /bin/bash agent \\
    && echo 'agent ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/agent

WORKDIR /home/agent
"""

SUDO_TEST_SH = """
#!/bin/bash
if command -v hello >/dev/null; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def tb2_dataset(root: Path) -> Path:
    """`count-lines` (a TB2-shaped task) and `sudo-task` (its agent has sudo)."""
    write(
        root / "count-lines",
        {
            "task.toml": TASK_TOML.format(
                verifier=VERIFIER_MIRROR_ONLY,
                agent='network_mode = "no-network"\n',
                docker_image=f'docker_image = "{TB2_DOCKER_IMAGE}"\n',
                storage_mb=10240,
            ),
            "instruction.md": "Write the number of lines of /app/words.txt into /app/count.txt.\n",
            "environment/Dockerfile": DOCKERFILE,
            "tests/test.sh": TEST_SH,
            "tests/test_outputs.py": TEST_OUTPUTS,
            "solution/solve.sh": SOLVE_SH,
        },
    )
    write(
        root / "sudo-task",
        {
            "task.toml": TASK_TOML.format(
                verifier="", agent='user = "agent"\n', docker_image="", storage_mb=1024
            ),
            "instruction.md": "Install Debian's `hello` package.\n",
            "environment/Dockerfile": SUDO_DOCKERFILE,
            "tests/test.sh": SUDO_TEST_SH,
            "solution/solve.sh": "#!/bin/bash\nsudo apt-get install -y hello\n",
        },
    )
    return root
